#!/usr/bin/env python3
"""TFLOP/s of the same fa-bench table from several builds, side by side, with each side's ratio to
the first (scripts/exp2_ab.sh: base and cand; scripts/fp8_quant_sweep.sh: one side per setting).

    scripts/ab_table.py LABEL=RESULT.json [LABEL=RESULT.json ...]

A row is (variant@tile~schedule, d, causal, N). A row that did not run, or whose verification
failed, shows its status instead of a figure and has no ratio. A missing or unreadable file counts
as a side with no rows.
"""

import json
import sys


def read_rows(path):
    """(row name, d, causal, N) -> (TFLOP/s or None, status) from one result file."""
    try:
        with open(path) as f:
            doc = json.load(f)
    except (OSError, ValueError):
        return {}
    rows = {}
    for config in doc.get("configs", []):
        for r in config["results"]:
            verified = (r.get("verification") or {}).get("passed") is not False
            ok = r["status"] == "ok" and verified
            tflops = (r.get("derived") or {}).get("tflops_convention") if ok else None
            name = r["variant"]
            tiles = r.get("kernel_config") or {}
            if tiles:
                name += f"@{tiles['block_q']}x{tiles['block_kv']}"
            schedule = (r.get("options") or {}).get("fp8_schedule")
            if schedule:
                name += "~" + schedule
            status = r["status"] if verified else "unverified"
            rows[(name, config["d"], config["causal"], config["N"])] = (tflops, status)
    return rows


def table(sides):
    """The lines of the table for [(label, rows), ...]."""
    labels = [label for label, _ in sides]
    head = f"{'row':>34} {'d':>4} {'causal':>6} {'N':>6} " + " ".join(f"{x[:9]:>9}" for x in labels)
    head += "".join(f" {(x[:6] + '/' + labels[0][:6]):>13}" for x in labels[1:])
    lines = [head]
    keys = sorted(set().union(*(rows.keys() for _, rows in sides)))
    for key in keys:
        cells = [rows.get(key, (None, "-")) for _, rows in sides]
        text = " ".join(f"{t:9.1f}" if t else f"{s[:9]:>9}" for t, s in cells)
        first = cells[0][0]
        for t, _ in cells[1:]:
            text += f" {t / first:13.3f}" if first and t else f" {'-':>13}"
        lines.append(f"{key[0]:>34} {key[1]:>4} {int(key[2]):>6} {key[3]:>6} {text}")
    return lines


def main(argv):
    if len(argv) < 2 or any("=" not in a for a in argv[1:]):
        print("usage: scripts/ab_table.py LABEL=RESULT.json [LABEL=RESULT.json ...]", file=sys.stderr)
        return 2
    sides = [(a.split("=", 1)[0], read_rows(a.split("=", 1)[1])) for a in argv[1:]]
    print("\n".join(table(sides)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
