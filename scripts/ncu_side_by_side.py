#!/usr/bin/env python3
"""Two Nsight Compute reports of one kernel each, metric by metric, side by side.

    python3 scripts/ncu_side_by_side.py A.csv B.csv [--names fa2 torch-flash] [--min-diff 0.1]

A.csv and B.csv are the standard output of ``ncu --csv --page details ...``: the profiled
program's own output and ncu's ``==PROF==`` lines may surround the CSV, which starts at the line
whose first field is "ID". For every (section, metric, unit) both reports carry with a numeric
value, prints A, B and A/B; the rows whose ratio is off 1 by more than --min-diff come first,
largest difference first, then the rest in report order. When a report holds several kernels
(launches), the first is used and the count is said.

Exit status: 0 printed; 1 a report has no CSV or no metric in common with the other; 2 usage.
"""

from __future__ import annotations

import argparse
import csv
import sys
from pathlib import Path

Key = tuple[str, str, str]  # section, metric, unit


def read_report(text: str) -> tuple[dict[Key, float], str, int]:
    """The first kernel's numeric metrics, its name, and how many kernels the report holds."""
    lines = text.splitlines()
    start = next((i for i, line in enumerate(lines) if line.startswith('"ID"')), None)
    if start is None:
        raise ValueError("no ncu CSV (a line starting with \"ID\")")
    header = next(csv.reader([lines[start]]))
    col = {name: i for i, name in enumerate(header)}
    for need in ("ID", "Kernel Name", "Section Name", "Metric Name", "Metric Unit", "Metric Value"):
        if need not in col:
            raise ValueError(f"ncu CSV without a '{need}' column")
    # ncu 2025.3 ends a metric's row after "Metric Value" when no rule fired on it (16 fields
    # under a 20-field header, H100 2026-11-25): a row needs the fields up to the value only.
    width = max(col[n] for n in ("ID", "Kernel Name", "Section Name", "Metric Name",
                                 "Metric Unit", "Metric Value")) + 1
    rows = [r for r in csv.reader(lines[start + 1:]) if len(r) >= width]
    ids = list(dict.fromkeys(r[col["ID"]] for r in rows))
    if not ids:
        raise ValueError("ncu CSV without rows")
    metrics: dict[Key, float] = {}
    name = ""
    for r in rows:
        if r[col["ID"]] != ids[0]:
            continue
        name = r[col["Kernel Name"]]
        try:
            value = float(r[col["Metric Value"]].replace(",", ""))
        except ValueError:
            continue  # text values (a cache policy, a function name)
        key = (r[col["Section Name"]], r[col["Metric Name"]], r[col["Metric Unit"]])
        metrics.setdefault(key, value)
    return metrics, name, len(ids)


def side_by_side(a: dict[Key, float], b: dict[Key, float], min_diff: float) -> list[tuple]:
    """(key, a, b, ratio or None) for the keys both carry: big differences first."""
    common = [k for k in a if k in b]
    out = []
    for k in common:
        ratio = a[k] / b[k] if b[k] != 0 else None
        out.append((k, a[k], b[k], ratio))

    def off(row) -> float:
        ratio = row[3]
        if ratio is None:
            return float("inf") if row[1] != 0 else 0.0
        return abs(ratio - 1.0)

    big = sorted((r for r in out if off(r) > min_diff), key=off, reverse=True)
    rest = [r for r in out if off(r) <= min_diff]
    return big + rest


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("a", type=Path)
    p.add_argument("b", type=Path)
    p.add_argument("--names", nargs=2, default=("A", "B"), metavar=("NAME_A", "NAME_B"))
    p.add_argument("--min-diff", type=float, default=0.1,
                   help="rows with |A/B - 1| above this come first (default 0.1)")
    args = p.parse_args(argv)
    reports = []
    for path in (args.a, args.b):
        try:
            reports.append(read_report(path.read_text(errors="replace")))
        except (OSError, ValueError) as e:
            print(f"ncu_side_by_side: {path}: {e}", file=sys.stderr)
            return 1
    (ma, na, ca), (mb, nb, cb) = reports
    rows = side_by_side(ma, mb, args.min_diff)
    if not rows:
        print("ncu_side_by_side: no metric in common", file=sys.stderr)
        return 1
    name_a, name_b = args.names
    print(f"{name_a}: {na[:100]} ({ca} kernel(s) in the report; the first)")
    print(f"{name_b}: {nb[:100]} ({cb} kernel(s) in the report; the first)")
    print(f"{'section':<28} {'metric':<44} {'unit':<12} {name_a:>14} {name_b:>14} {'ratio':>7}")
    for (section, metric, unit), va, vb, ratio in rows:
        r = f"{ratio:7.2f}" if ratio is not None else "      -"
        print(f"{section[:28]:<28} {metric[:44]:<44} {unit[:12]:<12} {va:14.4g} {vb:14.4g} {r}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
