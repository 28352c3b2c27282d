#!/usr/bin/env python3
"""Asserts what a kernel's SASS must hold, from CUDA objects or binaries (no GPU needed).

    scripts/sass_check.py [--cuobjdump PATH] --filter REGEX [--require OPCODE]... FILE...

For every entry function of FILE (cuobjdump -sass) whose name matches --filter: each --require
opcode (e.g. HGMMA: the wgmma instructions) appears at least once, no local-memory access
(LDL/STL: register spills) appears, and cuobjdump -res-usage reports STACK:0 and LOCAL:0. Prints
one line per kernel and a summary.

Exit codes: 0 every matched kernel passes; 1 a check failed, or no kernel matched --filter;
2 bad arguments or an unreadable file; 77 no cuobjdump (ctest reads 77 as a skip: the pinned
nvidia-cuda-cuobjdump wheel is not installed, scripts/requirements-sass-tools.txt).
Used by ctest (sass_fa3: HGMMA in fa3's kernels, no spills; sass_check_fails_on_fa2: the check
fails on fa2's mma.sync kernels).
"""

from __future__ import annotations

import argparse
import glob
import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass, field

FUNCTION = re.compile(r"^\s*Function\s*:\s*(\S+)")
RES_FUNCTION = re.compile(r"^\s*Function\s+(\S+?):?\s*$")
RES_FIELD = re.compile(r"\b(STACK|LOCAL|REG):(\d+)")
OPCODE = re.compile(r"/\*[0-9a-f]{4,}\*/\s+(?:@!?U?P\w+\s+)?([A-Z][A-Z0-9_]*)")


@dataclass
class Kernel:
    name: str
    opcodes: dict[str, int] = field(default_factory=dict)
    resources: dict[str, int] = field(default_factory=dict)


def parse_sass(text: str) -> dict[str, Kernel]:
    """Kernels of a cuobjdump -sass dump with their opcode counts (first token of each line)."""
    kernels: dict[str, Kernel] = {}
    current: Kernel | None = None
    for line in text.splitlines():
        m = FUNCTION.match(line)
        if m:
            current = kernels.setdefault(m.group(1), Kernel(m.group(1)))
            continue
        if current is None:
            continue
        m = OPCODE.search(line)
        if m:
            op = m.group(1)
            current.opcodes[op] = current.opcodes.get(op, 0) + 1
    return kernels


def parse_resources(text: str, kernels: dict[str, Kernel]) -> None:
    """Adds cuobjdump -res-usage's STACK, LOCAL and REG to the kernels it names."""
    name = None
    for line in text.splitlines():
        m = RES_FUNCTION.match(line)
        if m:
            name = m.group(1)
            continue
        if name is not None and name in kernels:
            for key, value in RES_FIELD.findall(line):
                kernels[name].resources[key] = int(value)
            name = None


def problems(k: Kernel, required: list[str]) -> list[str]:
    """Why a kernel fails the check (empty: it passes)."""
    out = []
    for op in required:
        if k.opcodes.get(op, 0) == 0:
            out.append(f"no {op}")
    for op in ("LDL", "STL"):
        if k.opcodes.get(op, 0):
            out.append(f"{k.opcodes[op]} {op} (local memory: register spills)")
    for key in ("STACK", "LOCAL"):
        if k.resources.get(key, 0):
            out.append(f"{key}:{k.resources[key]} bytes")
    if "STACK" not in k.resources:
        out.append("no resource usage from cuobjdump -res-usage")
    return out


def find_cuobjdump() -> str:
    """The pinned wheel's cuobjdump in .venv (scripts/setup.sh --test), else PATH's; '' if none."""
    repo = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    wheel = "lib/python3*/site-packages/nvidia/cu*/bin/cuobjdump"
    found = sorted(glob.glob(os.path.join(repo, ".venv", wheel)))
    return found[0] if found else shutil.which("cuobjdump") or ""


def run(cuobjdump: str, args: list[str]) -> str:
    env = dict(os.environ)
    # cuobjdump runs nvdisasm for sm_90a; the wheels put both in one bin/ folder.
    env["PATH"] = os.path.dirname(os.path.abspath(cuobjdump)) + os.pathsep + env.get("PATH", "")
    r = subprocess.run([cuobjdump, *args], capture_output=True, text=True, env=env, check=False)
    if r.returncode != 0:
        raise OSError(f"{cuobjdump} {' '.join(args)}: exit {r.returncode}: {r.stderr.strip()}")
    return r.stdout


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cuobjdump", help="cuobjdump to run (default: find_cuobjdump(); '' or "
                    "missing: exit 77)")
    ap.add_argument("--filter", required=True, help="regex on the mangled kernel names")
    ap.add_argument("--require", action="append", default=[], help="opcode that must appear")
    ap.add_argument("files", nargs="+")
    a = ap.parse_args(argv)
    if a.cuobjdump is None:
        a.cuobjdump = find_cuobjdump()
    if not a.cuobjdump or not os.access(a.cuobjdump, os.X_OK):
        print(f"sass_check: skipped: no cuobjdump ('{a.cuobjdump}'): install the pinned "
              "nvidia-cuda-cuobjdump and nvidia-cuda-nvdisasm wheels (scripts/setup.sh, "
              "scripts/requirements-sass-tools.txt)")
        return 77
    try:
        pattern = re.compile(a.filter)
    except re.error as e:
        print(f"sass_check: error: --filter '{a.filter}': {e}", file=sys.stderr)
        return 2
    kernels: dict[str, Kernel] = {}
    for f in a.files:
        if not os.path.isfile(f):
            print(f"sass_check: error: {f}: no such file", file=sys.stderr)
            return 2
        try:
            found = parse_sass(run(a.cuobjdump, ["-sass", f]))
            parse_resources(run(a.cuobjdump, ["-res-usage", f]), found)
        except OSError as e:
            print(f"sass_check: error: {e}", file=sys.stderr)
            return 2
        kernels.update({n: k for n, k in found.items() if pattern.search(n)})
    if not kernels:
        print(f"sass_check: FAILED: no kernel matches --filter '{a.filter}' in {' '.join(a.files)}")
        return 1
    failed = 0
    for name in sorted(kernels):
        k = kernels[name]
        bad = problems(k, a.require)
        failed += bool(bad)
        have = ", ".join(f"{op} {k.opcodes.get(op, 0)}" for op in a.require)
        status = "FAILED: " + "; ".join(bad) if bad else "ok"
        print(f"sass_check: {name}: REG {k.resources.get('REG', '?')}, {have or 'no requirement'}, "
              f"LDL {k.opcodes.get('LDL', 0)}, STL {k.opcodes.get('STL', 0)}: {status}")
    print(f"sass_check: {len(kernels) - failed} of {len(kernels)} kernels pass "
          f"(require {', '.join(a.require) or 'nothing'}; no LDL/STL, STACK 0, LOCAL 0)")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
