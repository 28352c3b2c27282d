#!/usr/bin/env python3
"""Holds every kernel's stack frame (register spills, local arrays) to a recorded budget.

    scripts/spill_check.py FILE... --budget tests/data/spill-budget.json
    scripts/spill_check.py FILE... --write-budget tests/data/spill-budget.json

FILE: a binary, library or object with device code (build/bin/fa-bench holds every kernel). No
GPU needed: cuobjdump -res-usage gives each kernel's REG, STACK (the per-thread stack frame:
spills plus local arrays) and LOCAL on each architecture. A kernel fails when its STACK or LOCAL
is over its budget, or when it has a stack frame and no budget (a new spilling kernel): one line
each, naming the kernel, the architecture, the budget and the actual bytes. A kernel below its
budget is a note (the budget can be tightened: --write-budget). The default build prints no
ptxas spill warnings (CMake option FA_WARN_ON_SPILLS prints them); this check is where a spill is
seen, and where a deliberate one is recorded.

A kernel is keyed by its mangled name, with nvcc's anonymous-namespace tag
(_GLOBAL__N__<hash>_<n>_<file>_<hash>: the hash follows the source's path) cut to the file's name,
so a budget recorded on one machine holds on another; the budget also stores the readable name.
Kernels without a stack frame are not listed (their budget is 0). The FAULTS instantiations (the
verification tests' kernels) are in fa-bench and budgeted like every other kernel.

Exit codes: 0 every kernel within its budget, or the budget written; 1 a kernel over its budget or
new and spilling; 2 bad arguments, an unreadable file, or no budget file; 77 no cuobjdump, or
FILE built for none of the budget's architectures (ctest reads 77 as a skip, with the reason).
Used by ctest spill_budget (fa-bench against tests/data/spill-budget.json).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import sass_check  # noqa: E402  (cuobjdump's lookup, invocation and -res-usage fields)

ARCH = re.compile(r"^\s*arch\s*=\s*(sm_\w+)")
ANONYMOUS = re.compile(r"(\d+)(_GLOBAL__N__)")
ANONYMOUS_TAG = re.compile(r"_GLOBAL__N__[0-9a-f]+_(\d+)_")
FIELDS = ("STACK", "LOCAL")
REGENERATE = "scripts/spill_check.py build/bin/fa-bench --write-budget tests/data/spill-budget.json"

Usage = dict[str, dict[str, dict[str, int]]]  # arch -> kernel key -> {"REG", "STACK", "LOCAL"}


def stable_key(mangled: str) -> str:
    """The mangled name with each anonymous-namespace tag cut to _GLOBAL__N__<file> (still a
    mangled name: c++filt reads it as "(anonymous namespace)")."""
    out, pos = [], 0
    for m in ANONYMOUS.finditer(mangled):
        if m.start() < pos:
            continue
        length = int(m.group(1))
        tag = mangled[m.start(2):m.start(2) + length]
        t = ANONYMOUS_TAG.match(tag)
        if not t:
            continue
        file = tag[t.end():t.end() + int(t.group(1))]
        short = "_GLOBAL__N__" + file
        out.append(mangled[pos:m.start()] + f"{len(short)}{short}")
        pos = m.start(2) + length
    out.append(mangled[pos:])
    return "".join(out)


def parse_res_usage(text: str) -> Usage:
    """cuobjdump -res-usage: REG, STACK and LOCAL of each function on each architecture (the last
    `arch =` line before its `Resource usage`); a key seen twice keeps the larger numbers."""
    usage: Usage = {}
    arch, name = None, None
    for line in text.splitlines():
        m = ARCH.match(line)
        if m:
            arch = m.group(1)
            continue
        m = sass_check.RES_FUNCTION.match(line)
        if m:
            name = stable_key(m.group(1))
            continue
        if name is not None and arch is not None:
            fields = {k: int(v) for k, v in sass_check.RES_FIELD.findall(line)}
            if fields:
                have = usage.setdefault(arch, {}).setdefault(name, {})
                for k, v in fields.items():
                    have[k] = max(have.get(k, 0), v)
            name = None
    return usage


def _strip_signature(name: str) -> str:
    """`void ns::kernel<...>(Params)` -> `ns::kernel<...>`: the template arguments name the
    instantiation, the parameter list only repeats the kernel's."""
    if name.startswith("void "):
        name = name[5:]
    if name.endswith(")"):
        depth = 0
        for i in range(len(name) - 1, -1, -1):
            depth += {")": 1, "(": -1}.get(name[i], 0)
            if depth == 0:
                return name[:i] if i else name
    return name


def readable_names(keys: list[str]) -> dict[str, str]:
    """Demangled names (c++filt, one call); without c++filt the keys themselves."""
    tool = shutil.which("c++filt")
    if not keys or not tool:
        return {k: k for k in keys}
    r = subprocess.run([tool], input="\n".join(keys) + "\n", capture_output=True, text=True,
                       check=False)
    lines = r.stdout.splitlines()
    if r.returncode != 0 or len(lines) != len(keys):
        return {k: k for k in keys}
    return {k: _strip_signature(n) for k, n in zip(keys, lines)}


def budget_of(usage: Usage) -> dict:
    """The budget file's content: every kernel with a stack frame or local memory, per arch."""
    keys = sorted({k for kernels in usage.values() for k in kernels})
    names = readable_names(keys)
    archs = {}
    for arch in sorted(usage):
        archs[arch] = {
            key: {"kernel": names[key], "stack": r.get("STACK", 0), "local": r.get("LOCAL", 0),
                  "reg": r.get("REG", 0)}
            for key, r in sorted(usage[arch].items())
            if any(r.get(f, 0) for f in FIELDS)}
    return {
        "about": "Per-thread stack frame (register spills and local arrays) and local memory, in "
                 "bytes, each kernel may use; kernels not listed: 0. Checked by ctest "
                 "spill_budget (scripts/spill_check.py); reg is informative. Recorded from "
                 "the build's ptxas: another CUDA toolkit may allocate otherwise (re-record).",
        "regenerate": REGENERATE,
        "architectures": archs,
    }


def dump_budget(content: dict) -> str:
    """JSON with one line per kernel, so a change of budget is a one-line diff."""
    head = {k: v for k, v in content.items() if k != "architectures"}
    lines = ["{"] + [f" {json.dumps(k)}: {json.dumps(v)}," for k, v in head.items()]
    lines.append(' "architectures": {')
    archs = list(content["architectures"].items())
    for i, (arch, kernels) in enumerate(archs):
        rows = [f"   {json.dumps(k)}: {json.dumps(v)}" for k, v in kernels.items()]
        lines.append(f"  {json.dumps(arch)}: {{" + ("" if rows else "}"))
        if rows:
            lines.append(",\n".join(rows))
            lines.append("  }")
        lines[-1] += "," if i + 1 < len(archs) else ""
    lines += [" }", "}"]
    return "\n".join(lines) + "\n"


def check(usage: Usage, budget: dict, budget_path: str) -> tuple[list[str], list[str], int]:
    """(failures, notes, kernels checked): one line per kernel over its budget or new and
    spilling; notes for kernels below their budget, budgeted kernels not found, unbudgeted
    architectures."""
    archs = budget.get("architectures", {})
    failures: list[str] = []
    notes: list[str] = []
    checked = 0
    keys = sorted({k for kernels in usage.values() for k in kernels})
    names = readable_names(keys)
    for arch in sorted(usage):
        if arch not in archs:
            notes.append(f"{arch}: no budget (the budget covers {', '.join(sorted(archs))}): "
                         "not checked")
            continue
        allowed = archs[arch]
        for key, r in sorted(usage[arch].items()):
            checked += 1
            entry = allowed.get(key) or {}
            over, under = [], []
            for f in FIELDS:
                actual, limit = r.get(f, 0), entry.get(f.lower(), 0)
                if actual != limit:
                    (over if actual > limit else under).append(
                        f"{f} {actual} bytes, budget {limit}")
            if over:
                why = "over its budget" if entry else f"a new spilling kernel, not in {budget_path}"
                failures.append(f"{arch} {names[key]}: {', '.join(over)} ({why}; "
                                f"REG {r.get('REG', '?')})")
            elif under:
                notes.append(f"{arch} {names[key]}: {', '.join(under)}: below its budget "
                             "(tighten it: --write-budget)")
        for key, entry in sorted(allowed.items()):
            if key not in usage[arch]:
                notes.append(f"{arch} {entry.get('kernel', key)}: in the budget, not in the "
                             "binary (removed, renamed, or not built here)")
    return failures, notes, checked


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("files", nargs="+", metavar="FILE", help="binary, library or object")
    mode = ap.add_mutually_exclusive_group(required=True)
    mode.add_argument("--budget", help="budget file to check against (JSON)")
    mode.add_argument("--write-budget", metavar="BUDGET", help="record FILE's kernels as the budget")
    ap.add_argument("--cuobjdump", help="cuobjdump to run (default: the .venv wheel's, else "
                    "PATH's; '' or missing: exit 77)")
    a = ap.parse_args(argv)
    if a.cuobjdump is None:
        a.cuobjdump = sass_check.find_cuobjdump()
    if not a.cuobjdump or not os.access(a.cuobjdump, os.X_OK):
        print(f"spill_check: skipped: no cuobjdump ('{a.cuobjdump}'): install the pinned "
              "nvidia-cuda-cuobjdump and nvidia-cuda-nvdisasm wheels (scripts/setup.sh --test, "
              "scripts/requirements-sass-tools.txt)")
        return 77
    budget = None
    if a.budget is not None:
        try:
            with open(a.budget, encoding="utf-8") as f:
                budget = json.load(f)
            if not isinstance(budget.get("architectures"), dict):
                raise ValueError("no 'architectures' object")
        except FileNotFoundError:
            print(f"spill_check: error: --budget {a.budget}: no such file; record it from a "
                  f"complete build: {REGENERATE}", file=sys.stderr)
            return 2
        except (OSError, ValueError, AttributeError) as e:
            print(f"spill_check: error: --budget {a.budget}: not a spill budget ({e}); "
                  f"regenerate it: {REGENERATE}", file=sys.stderr)
            return 2
    usage: Usage = {}
    for path in a.files:
        if not os.path.isfile(path):
            print(f"spill_check: error: {path}: no such file", file=sys.stderr)
            return 2
        try:
            found = parse_res_usage(sass_check.run(a.cuobjdump, ["-res-usage", path]))
        except OSError as e:
            print(f"spill_check: error: {e}", file=sys.stderr)
            return 2
        for arch, kernels in found.items():
            into = usage.setdefault(arch, {})
            for key, r in kernels.items():
                have = into.setdefault(key, {})
                for k, v in r.items():
                    have[k] = max(have.get(k, 0), v)
    if not usage:
        print(f"spill_check: error: {' '.join(a.files)}: no kernel in cuobjdump -res-usage",
              file=sys.stderr)
        return 2
    if a.write_budget is not None:
        content = budget_of(usage)
        with open(a.write_budget, "w", encoding="utf-8") as f:
            f.write(dump_budget(content))
        counts = ", ".join(f"{arch} {len(k)}" for arch, k in content["architectures"].items())
        print(f"spill_check: wrote {a.write_budget}: kernels with a stack frame: {counts}")
        return 0
    if not set(usage) & set(budget["architectures"]):
        print(f"spill_check: skipped: {' '.join(a.files)} is built for {', '.join(sorted(usage))}; "
              f"{a.budget} covers {', '.join(sorted(budget['architectures']))}")
        return 77
    failures, notes, checked = check(usage, budget, a.budget)
    for line in notes:
        print(f"spill_check: note: {line}")
    for line in failures:
        print(f"spill_check: FAILED: {line}")
    if failures:
        print(f"spill_check: {len(failures)} of {checked} kernels over budget; if a spill is "
              f"wanted, record it (scripts/spill_check.py {' '.join(a.files)} --write-budget "
              f"{a.budget}) and say why in the commit")
        return 1
    print(f"spill_check: {checked} kernels on {', '.join(sorted(usage))} within {a.budget}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
