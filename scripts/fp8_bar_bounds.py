#!/usr/bin/env python3
"""Issue 16's speed bars against what a timed quantisation pass leaves for the attention.

For each (d, causal, N) of two fa-bench tables of the same shapes, one with fp8's pass timed (the
default) and one with --fp8-prequantized, it prints the attention-alone speed fp8 would need to
meet its bar if its pass ran at the measured DRAM roof, beside the attention-alone speeds
measured (fp8's and cudnn-fp8's).

    scripts/fp8_bar_bounds.py WITH_PASS.json PREQUANTIZED.json

The bars (issue 16, ratios to fa3 in the timed table): d=128 non-causal 1.4, d=64 non-causal
1.15, causal 1.25.
The pass's least time: the IO model's quantise-pass bytes (the fp8 row's model terms whose name
says "quantise pass") at the timed table's measured DRAM roof (ceilings.dram_bytes_per_s).
The attention needed: FLOPs / (FLOPs / (bar x fa3) - least pass time), in the tool's FLOP
convention (model.flops_convention).
A row that did not run, or failed its verification, counts as missing. Where a table has several
rows of one variant for a shape (a named tile or schedule beside the default), the default one
counts (default_config and default_options); where none of them is the default (every row of a
--fp8-prequantized run has a non-default option) and there are several, none counts.
"""

import json
import sys

NON_CAUSAL_BARS = {128: 1.4, 64: 1.15}  # by head dim
CAUSAL_BAR = 1.25


def bar_of(d, causal):
    return CAUSAL_BAR if causal else NON_CAUSAL_BARS.get(d)


def is_default(row):
    return row.get("default_config", True) and row.get("default_options", True)


def ok_rows(doc):
    """(variant, d, causal, N) -> result row that ran and passed verification: the variant's default
    row of the shape, or its only row."""
    found = {}
    for config in doc.get("configs", []):
        for r in config.get("results", []):
            verified = (r.get("verification") or {}).get("passed") is not False
            if r.get("status") == "ok" and verified and tflops(r):
                key = (r["variant"], config["d"], bool(config["causal"]), config["N"])
                found.setdefault(key, []).append(r)
    rows = {}
    for key, candidates in found.items():
        defaults = [r for r in candidates if is_default(r)]
        if len(defaults) == 1 or len(candidates) == 1:
            rows[key] = (defaults or candidates)[0]
    return rows


def tflops(row):
    return (row.get("derived") or {}).get("tflops_convention") if row else None


def pass_bytes(row):
    terms = (row.get("model") or {}).get("terms") or []
    return sum(t["bytes"] for t in terms if "quantise pass" in t["name"])


def bounds(with_doc, pq_doc):
    """One dict per (d, causal, N) that has both a verified fa3 and a verified fp8 row."""
    roof = (with_doc.get("ceilings") or {}).get("dram_bytes_per_s")
    timed, pre = ok_rows(with_doc), ok_rows(pq_doc)
    out = []
    for (variant, d, causal, n), fp8 in sorted(timed.items()):
        bar = bar_of(d, causal)
        fa3 = timed.get(("fa3", d, causal, n))
        if variant != "fp8" or fa3 is None or bar is None:
            continue
        flops = fp8["model"]["flops_convention"]
        target = bar * tflops(fa3)
        least_pass_s = pass_bytes(fp8) / roof if roof else None
        left_s = flops / (target * 1e12) - least_pass_s if least_pass_s is not None else None
        needed = flops / left_s / 1e12 if left_s and left_s > 0 else None
        pq_fp8 = tflops(pre.get(("fp8", d, causal, n)))
        pq_cudnn = tflops(pre.get(("cudnn-fp8", d, causal, n)))
        out.append(
            {
                "d": d,
                "causal": causal,
                "N": n,
                "fa3": tflops(fa3),
                "bar": bar,
                "target": target,
                "fp8": tflops(fp8),
                "least_pass_ms": least_pass_s * 1e3 if least_pass_s is not None else None,
                "needed": needed,
                "fp8_pq": pq_fp8,
                "cudnn_fp8_pq": pq_cudnn,
                "verdict": verdict(tflops(fp8), target, least_pass_s, needed, pq_fp8, pq_cudnn),
            }
        )
    return out


def verdict(fp8, target, least_pass_s, needed, pq_fp8, pq_cudnn):
    if fp8 >= target:
        return "met"
    if least_pass_s is None:
        return "no DRAM roof in the table"
    if needed is None:
        return "impossible: the pass at the roof alone takes the bar's time"
    if pq_cudnn is not None and needed > pq_cudnn:
        return "needs attention faster than cudnn-fp8's"
    if pq_fp8 is None:
        return "no prequantized fp8 row to compare"
    if needed > pq_fp8:
        return "needs attention faster than fp8's"
    return "fp8's attention suffices: the pass is the gap"


def table(rows):
    def cell(x, width=8):
        return f"{x:{width}.1f}" if x is not None else f"{'-':>{width}}"

    head = (
        f"{'d':>4} {'causal':>6} {'N':>6} {'fa3':>8} {'bar':>5} {'target':>8} {'fp8':>8} "
        f"{'pass>=ms':>9} {'needed':>8} {'fp8 pq':>8} {'cudnn pq':>8}  verdict"
    )
    lines = [head]
    for r in rows:
        least = f"{r['least_pass_ms']:9.3f}" if r["least_pass_ms"] is not None else f"{'-':>9}"
        lines.append(
            f"{r['d']:>4} {int(r['causal']):>6} {r['N']:>6} {cell(r['fa3'])} {r['bar']:5.2f} "
            f"{cell(r['target'])} {cell(r['fp8'])} {least} {cell(r['needed'])} "
            f"{cell(r['fp8_pq'])} {cell(r['cudnn_fp8_pq'])}  {r['verdict']}"
        )
    return lines


def main(argv):
    if len(argv) != 3:
        print("usage: scripts/fp8_bar_bounds.py WITH_PASS.json PREQUANTIZED.json", file=sys.stderr)
        return 2
    try:
        with open(argv[1]) as f:
            with_doc = json.load(f)
        with open(argv[2]) as f:
            pq_doc = json.load(f)
    except (OSError, ValueError) as e:
        print(f"fp8_bar_bounds: {e}", file=sys.stderr)
        return 2
    print("TFLOP/s (fa-bench median, FLOP convention); pass>=ms: the pass's bytes at the DRAM roof")
    print("\n".join(table(bounds(with_doc, pq_doc))))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
