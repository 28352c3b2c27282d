#!/usr/bin/env python3
"""Compare fa-bench's own CUPTI counts with Nsight Compute's, variant by variant.

For each (N, d): runs fa-bench once normally (its CUPTI counters in the result JSON), then once
under `ncu --cache-control all --clock-control none` with the same metrics. Range mode (default):
ncu replays each variant's verification launch as one range (fa-bench brackets it with
cudaProfilerStart/Stop under --profiler-range), the same span fa-bench's CUPTI range
counts. Kernel mode: ncu profiles each kernel alone and the script sums the kernels of each
variant's verification launch (between the two NaN-poison fills that precede it and the L2 flush
that precedes its timed launch). Prints a Markdown table
and exits 1 if DRAM bytes differ by more than 2% or tensor FLOPs by more than 0.1%.

Usage (on a GPU machine): scripts/ncu_compare.py [--bin build/bin/fa-bench] [--N 1024,4096] [--d 64,128]
"""

from __future__ import annotations

import argparse
import csv
import io
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

METRICS = {
    "dram__bytes_read.sum": "dram_read",
    "dram__bytes_write.sum": "dram_write",
    "sm__ops_path_tensor_src_bf16_dst_fp32.sum": "tensor",
    "sm__ops_path_tensor_src_fp16.sum": "tensor",
    "sm__ops_path_tensor_src_fp8.sum": "tensor",
}
HOUSEKEEPING = ("fill_normal_kernel", "fill_bits_kernel", "read_flush_kernel")


def run_fa_bench(binary: str, n: int, d: int, out: Path, extra: list[str], prefix: list[str],
                 env: dict | None = None) -> str:
    cmd = prefix + [binary, "--N", str(n), "--d", str(d), "--variants", "all", "--warmup", "0",
                    "--repetitions", "1", "--datasheet-roofs", "--json", str(out)] + extra
    done = subprocess.run(cmd, capture_output=True, text=True, check=False,
                          env={**os.environ, **(env or {})})
    if done.returncode not in (0, 1):
        sys.exit(f"error: {' '.join(cmd)} exited {done.returncode}:\n{done.stderr[-2000:]}")
    return done.stdout


def ncu_kernels(text: str) -> list[dict]:
    """Per-kernel rows of ncu's raw CSV page: name and the metric values."""
    lines = [ln for ln in text.splitlines() if ln.startswith('"')]
    rows = list(csv.DictReader(io.StringIO("\n".join(lines))))
    kernels = []
    for row in rows[1:] if rows and not row_is_data(rows[0]) else rows:  # skip the units row
        entry = {"name": row.get("Kernel Name", ""), "dram_read": 0.0, "dram_write": 0.0, "tensor": 0.0}
        for metric, key in METRICS.items():
            value = (row.get(metric) or "0").replace(",", "")
            try:
                entry[key] += float(value)
            except ValueError:
                pass
        kernels.append(entry)
    return kernels


def is_kernel(kernel: dict, function: str) -> bool:
    """ncu prints demangled names ("void fa::(anonymous namespace)::fill_bits_kernel<...>(...)")."""
    return f"{function}<" in kernel["name"] or f"{function}(" in kernel["name"] or kernel["name"] == function


def row_is_data(row: dict) -> bool:
    return any(ch.isdigit() for ch in row.get("ID", ""))


def split_by_variant(kernels: list[dict], variants: list[str]) -> dict[str, dict]:
    """The verification launch of each variant: after its two poison fills, up to the next flush."""
    sums, i, k = {}, 0, 0
    while i < len(kernels) and k < len(variants):
        if is_kernel(kernels[i], "fill_bits_kernel") and i + 1 < len(kernels) and \
                is_kernel(kernels[i + 1], "fill_bits_kernel"):
            i += 2
            total = {"dram_read": 0.0, "dram_write": 0.0, "tensor": 0.0, "kernels": 0}
            while i < len(kernels) and not any(is_kernel(kernels[i], h) for h in HOUSEKEEPING):
                for key in ("dram_read", "dram_write", "tensor"):
                    total[key] += kernels[i][key]
                total["kernels"] += 1
                i += 1
            sums[variants[k]] = total
            k += 1
        else:
            i += 1
    return sums


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bin", default="build/bin/fa-bench")
    ap.add_argument("--N", default="1024,4096")
    ap.add_argument("--d", default="64,128")
    ap.add_argument("--raw", help="also write ncu's raw output here (for debugging the matching)")
    ap.add_argument("--mode", choices=("range", "kernel"), default="range",
                    help="range (default): ncu replays each variant's verification launch as one range "
                         "(fa-bench marks it with cudaProfilerStart/Stop), as fa-bench's own counters do; "
                         "kernel: ncu profiles kernel by kernel (caches flushed before each) and the "
                         "variant's kernels are summed")
    args = ap.parse_args()
    failures = 0
    print("| N | d | variant | DRAM fa-bench | DRAM ncu | diff | tensor FLOPs fa-bench | tensor FLOPs ncu | diff |")
    print("|---|---|---|---|---|---|---|---|---|")
    with tempfile.TemporaryDirectory() as tmp:
        for n in (int(x) for x in args.N.split(",")):
            for d in (int(x) for x in args.d.split(",")):
                ours_path = Path(tmp) / f"ours-{n}-{d}.json"
                run_fa_bench(args.bin, n, d, ours_path, ["--cold"], [])
                ours = json.loads(ours_path.read_text())
                rows = [r for r in ours["configs"][0]["results"] if r["status"] == "ok"]
                ncu = ["ncu", "--cache-control", "all", "--clock-control", "none", "--csv", "--page", "raw",
                       "--metrics", ",".join(METRICS)]
                if args.mode == "range":
                    ncu += ["--replay-mode", "range"]
                ranges = ["--profiler-range"] if args.mode == "range" else []
                ncu_out = run_fa_bench(args.bin, n, d, Path(tmp) / "under-ncu.json",
                                       ["--no-counters", *ranges], ncu)
                if args.raw:
                    with open(args.raw, "a", encoding="utf-8") as f:
                        f.write(ncu_out)
                measured = ncu_kernels(ncu_out)
                if args.mode == "range":  # one ncu result per range, in the order the variants ran
                    # Peers get no range (cuDNN sets kernel attributes on every call, which ncu's
                    # capture refuses): compare them with --mode kernel.
                    rows = [r for r in rows if not r.get("peer")]
                    theirs = {r["variant"]: m for r, m in zip(rows, measured)}
                    if len(measured) != len(rows):
                        print(f"| {n} | {d} | (ncu returned {len(measured)} ranges for {len(rows)} variants) "
                              "| | | | | | |")
                        failures += 1
                else:
                    theirs = split_by_variant(measured, [r["variant"] for r in rows])
                for r in rows:
                    counters = r.get("counters") or {}
                    if counters.get("status") != "ok":
                        print(f"| {n} | {d} | {r['variant']} | no counters: {counters.get('reason', '')[:80]} "
                              "| | | | | |")
                        failures += 1
                        continue
                    v = counters["values"]
                    our_dram = v["dram__bytes_read.sum"] + v["dram__bytes_write.sum"]
                    our_tc = sum(v.get(m, 0.0) for m in METRICS if METRICS[m] == "tensor")
                    t = theirs.get(r["variant"])
                    if t is None:
                        print(f"| {n} | {d} | {r['variant']} | {our_dram:.4g} | not found | | | | |")
                        failures += 1
                        continue
                    their_dram = t["dram_read"] + t["dram_write"]
                    dd = our_dram / their_dram - 1 if their_dram else float("nan")
                    dt = our_tc / t["tensor"] - 1 if t["tensor"] else float("nan")
                    bad = not (abs(dd) <= 0.02 and abs(dt) <= 0.001)
                    failures += bad
                    print(f"| {n} | {d} | {r['variant']} | {our_dram:.4g} | {their_dram:.4g} | {dd:+.2%} | "
                          f"{our_tc:.6g} | {t['tensor']:.6g} | {dt:+.3%} |{' **over**' if bad else ''}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
