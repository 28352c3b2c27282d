#!/usr/bin/env python3
"""Compares the SASS of two builds of the same kernels, kernel by kernel: for a refactoring that
should not change what the kernels do (no GPU needed).

    scripts/sass_compare.py [--cuobjdump PATH] [--rename FROM=TO ...] BEFORE.o AFTER.o

For each kernel (matched by demangled name; --rename replaces text in the names before, e.g.
a type that moved namespace: --rename fa::fa3::Grid=fa::hopper::Grid) it counts every opcode and reports the kernels whose counts of
the instructions that do the work differ: wgmma (HGMMA, QGMMA), barriers (SYNCS, BAR), special
functions (MUFU), floating point (F*), loads and stores (LD*, ST*; not LDC, a constant-bank read),
TMA (UTMA, UBLKCP), atomics and reductions, shuffles, fences. Integer address arithmetic, moves
and NOPs may differ (register allocation and scheduling). Exit code 0 when no kernel differs in
those counts and both files have the same kernels, 1 otherwise, 2 on bad input.
"""
import argparse
import collections
import re
import shutil
import subprocess
import sys

WORK = re.compile(r"(HGMMA|QGMMA|SYNCS|BAR|MUFU|F[A-Z0-9]|ST|LD(?!C)|UTMA|UBLKCP|ATOM|RED|WARP|"
                  r"ELECT|SHFL|USETMAXREG|MEMBAR|FENCE|CCTL)")


def kernels(cuobjdump, path):
    """{kernel name: [opcode, ...]} from cuobjdump -sass."""
    sass = subprocess.run([cuobjdump, "-sass", path], check=True, capture_output=True,
                          text=True).stdout
    out = collections.OrderedDict()
    current = None
    for line in sass.splitlines():
        m = re.search(r"Function : (\S+)", line)
        if m:
            current = out.setdefault(m.group(1), [])
            continue
        m = re.match(r"\s*/\*[0-9a-f]{4,}\*/\s+(@!?U?P\w+\s+)?([A-Z0-9_.]+)", line)
        if m and current is not None:
            current.append(m.group(2))
    return out


def demangled(names):
    """The names as c++filt prints them (unchanged where c++filt is missing)."""
    if not shutil.which("c++filt"):
        return list(names)
    out = subprocess.run(["c++filt"], input="\n".join(names), check=True, capture_output=True,
                         text=True).stdout
    return out.splitlines()


def by_name(found, renames=()):
    out = collections.OrderedDict()
    for name, ops in zip(demangled(list(found)), found.values()):
        for old, new in renames:
            name = name.replace(old, new)
        out[name] = ops
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cuobjdump", default=shutil.which("cuobjdump") or "cuobjdump")
    ap.add_argument("--rename", action="append", default=[], metavar="FROM=TO")
    ap.add_argument("before")
    ap.add_argument("after")
    a = ap.parse_args()
    try:
        renames = [tuple(r.split("=", 1)) for r in a.rename]
        if any(len(r) != 2 for r in renames):
            print("sass_compare: --rename takes FROM=TO", file=sys.stderr)
            return 2
        before = by_name(kernels(a.cuobjdump, a.before), renames)
        after = by_name(kernels(a.cuobjdump, a.after))
    except (OSError, subprocess.CalledProcessError) as e:
        print(f"sass_compare: {e}", file=sys.stderr)
        return 2
    differ = 0
    for name in sorted(set(before) | set(after)):
        if name not in before or name not in after:
            print(f"only in {'after' if name in after else 'before'}: {name}")
            differ += 1
            continue
        cb = collections.Counter(o for o in before[name] if WORK.match(o))
        ca = collections.Counter(o for o in after[name] if WORK.match(o))
        if cb != ca:
            delta = {o: ca[o] - cb[o] for o in sorted(set(cb) | set(ca)) if ca[o] != cb[o]}
            print(f"differs: {name}: {delta}")
            differ += 1
        else:
            print(f"same work: {name}: {len(before[name])} -> {len(after[name])} instructions")
    print(f"{len(before)} kernels before, {len(after)} after, {differ} differ")
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
