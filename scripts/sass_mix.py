#!/usr/bin/env python3
"""Registers, stack and the hot loop's instruction mix of the kernels in CUDA cubins (no GPU needed).

    scripts/sass_mix.py [--cuobjdump PATH] [--filter REGEX] A.cubin [B.cubin]

For each kernel (entry function) of A, and with B the same kernel in B side by side: registers,
stack frame and spill bytes (cuobjdump -res-usage), CALLs and local-memory accesses (LDL/STL) in
the whole function, and the counts per instruction kind inside the hot loop: the backward branch
whose range holds the most tensor-core instructions (HMMA/QMMA/HGMMA...), i.e. the K/V loop of an
attention kernel. Kinds: the opcode with its first modifier kept for MUFU (MUFU.EX2) and SHFL,
plain otherwise (FMNMX, FMUL, FFMA, BRA, ...).

Exit codes: 0 printed; 2 bad arguments or unreadable cubin; 3 no kernel matched --filter.
Used for docs/perf-notes.md ("the shared online softmax").
"""

from __future__ import annotations

import argparse
import collections
import re
import shutil
import subprocess
import sys

MMA = re.compile(r"^(HMMA|QMMA|IMMA|HGMMA|QGMMA|IGMMA|UTCHMMA)")
KEEP_SUB = ("MUFU", "SHFL")
KINDS = ("FMNMX", "MUFU.EX2", "MUFU.RCP", "FMUL", "FFMA", "FADD", "FSETP", "FSEL", "SHFL.BFLY",
         "HMMA", "QMMA", "LDSM", "F2FP", "BRA", "BSSY", "CALL", "LDL", "STL", "ISETP", "SEL")

INSN = re.compile(r"/\*([0-9a-f]{4,})\*/\s+(@!?U?P\w+\s+)?([A-Z][A-Z0-9_.]*)\s*([^;]*);")
FUNC = re.compile(r"Function : (\S+)")


def kind(opcode: str) -> str:
    parts = opcode.split(".")
    if parts[0] in KEEP_SUB and len(parts) > 1:
        return parts[0] + "." + parts[1]
    return parts[0]


def run_tool(args: list[str]) -> str:
    try:
        return subprocess.run(args, check=True, capture_output=True, text=True).stdout
    except (OSError, subprocess.CalledProcessError) as e:
        err = getattr(e, "stderr", "") or str(e)
        print(f"sass_mix: {' '.join(args[:2])}: {err.strip().splitlines()[-1] if err.strip() else e}",
              file=sys.stderr)
        sys.exit(2)


def demangle(names: list[str]) -> dict[str, str]:
    tool = shutil.which("c++filt")
    if not tool or not names:
        return {n: n for n in names}
    out = subprocess.run([tool], input="\n".join(names), capture_output=True, text=True).stdout
    short = {}
    for n, d in zip(names, out.splitlines()):
        d = re.sub(r"\(anonymous namespace\)::|fa::|\(fa::\w+\)|void |sm80::", "", d)
        d = d.replace("__nv_bfloat16", "bf16").replace("__half", "f16")
        short[n] = d
    return short


def parse_sass(text: str) -> dict[str, list[tuple[int, str, str]]]:
    funcs: dict[str, list[tuple[int, str, str]]] = {}
    cur = None
    for line in text.splitlines():
        m = FUNC.search(line)
        if m:
            cur = funcs.setdefault(m.group(1), [])
            continue
        m = INSN.search(line)
        if m and cur is not None:
            cur.append((int(m.group(1), 16), m.group(3), m.group(4)))
    return funcs


def parse_res(text: str) -> dict[str, dict[str, int]]:
    res: dict[str, dict[str, int]] = {}
    cur = None
    for line in text.splitlines():
        m = re.search(r"Function (\S+):", line)
        if m:
            cur = res.setdefault(m.group(1), {})
            continue
        if cur is not None:
            for key in ("REG", "STACK", "LOCAL"):
                v = re.search(rf"\b{key}:(\d+)", line)
                if v:
                    cur[key] = int(v.group(1))
    return res


def hot_loop(insns: list[tuple[int, str, str]]) -> tuple[int, int] | None:
    """(start, end) addresses of the backward branch range holding the most MMA instructions."""
    best = None
    for addr, op, args in insns:
        if not op.startswith("BRA"):
            continue
        t = re.search(r"0x([0-9a-f]+)", args)
        if not t or int(t.group(1), 16) >= addr:
            continue
        lo = int(t.group(1), 16)
        n = sum(1 for a, o, _ in insns if lo <= a <= addr and MMA.match(o))
        key = (n, addr - lo)
        if n and (best is None or key > best[0]):
            best = (key, (lo, addr))
    return best[1] if best else None


def summary(insns, res) -> dict[str, object]:
    loop = hot_loop(insns)
    mix = collections.Counter()
    if loop:
        mix.update(kind(o) for a, o, _ in insns if loop[0] <= a <= loop[1])
    whole = collections.Counter(kind(o) for _, o, _ in insns)
    return {
        "regs": res.get("REG", -1),
        "stack": res.get("STACK", -1),
        "local": res.get("LOCAL", -1),
        "calls": whole["CALL.REL.NOINC"] + whole["CALL.ABS.NOINC"] + whole["CALL"],
        "ldl_stl": whole["LDL"] + whole["STL"],
        "loop_len": sum(mix.values()),
        "mix": mix,
    }


def load(path: str, tool: str) -> tuple[dict, dict]:
    return (parse_sass(run_tool([tool, "-sass", path])),
            parse_res(run_tool([tool, "-res-usage", path])))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("cubins", nargs="+", metavar="CUBIN", help="one cubin, or two to compare (A B)")
    ap.add_argument("--filter", default=".", help="regular expression on the demangled kernel name")
    ap.add_argument("--cuobjdump", default=shutil.which("cuobjdump") or "cuobjdump")
    ap.add_argument("--kinds", default=",".join(KINDS), help="instruction kinds to print")
    a = ap.parse_args()
    if len(a.cubins) > 2:
        ap.error("at most two cubins")
    # Kernels are matched by demangled name: the anonymous namespace's mangled name differs
    # between two builds of the same file.
    loaded = []
    for path in a.cubins:
        sass, res = load(path, a.cuobjdump)
        short = demangle(sorted(sass))
        loaded.append(({short[n]: v for n, v in sass.items()},
                       {short.get(n, n): v for n, v in res.items()}))
    names = sorted(loaded[0][0])
    short = {n: n for n in names}
    pat = re.compile(a.filter)
    names = [n for n in names if pat.search(short[n])]
    if not names:
        print(f"sass_mix: no kernel matches --filter {a.filter!r}", file=sys.stderr)
        return 3
    kinds = [k for k in a.kinds.split(",") if k]
    for n in names:
        rows = []
        for sass, res in loaded:
            if n not in sass:
                rows.append(None)
                continue
            rows.append(summary(sass[n], res.get(n, {})))
        print(short[n])
        head = ["regs", "stack", "calls", "ldl_stl", "loop_len"] + kinds
        print("  " + " ".join(f"{h:>9}" for h in ["", *head]))
        for label, r in zip("AB", rows):
            if r is None:
                print(f"  {label:>9} (absent)")
                continue
            vals = [r["regs"], r["stack"], r["calls"], r["ldl_stl"], r["loop_len"]]
            vals += [r["mix"].get(k, 0) for k in kinds]
            print("  " + " ".join(f"{v:>9}" for v in [label, *vals]))
        if len(rows) == 2 and all(rows):
            extra = sorted((set(rows[0]["mix"]) | set(rows[1]["mix"])) - set(kinds))
            diff = [f"{k} {rows[0]['mix'].get(k, 0)}->{rows[1]['mix'].get(k, 0)}" for k in extra
                    if rows[0]["mix"].get(k, 0) != rows[1]["mix"].get(k, 0)]
            if diff:
                print("  other loop kinds that differ: " + ", ".join(diff))
    return 0


if __name__ == "__main__":
    sys.exit(main())
