#!/usr/bin/env python3
"""Check fa-bench's own counters (CUPTI) against Nsight Compute's, row by row.

fa-bench runs once with its counters (every variant, direction and shape asked for), then once
per (variant, direction) under ncu with the same metrics over the same span: with
--profiler-range fa-bench brackets each row's verification launch with cudaProfilerStart/Stop,
and ncu replays that range with the caches flushed before it (--cache-control all), as fa-bench
flushes the L2 before its counters' passes. Our variants get ncu's range replay; peers (cuDNN,
which sets kernel attributes on every call, an API range replay cannot capture) get its
application-range replay, which reruns the program once per pass instead of capturing.

Each (variant, direction) is profiled twice: the launch alone gives ncu's DRAM reads and tensor
operations; the launch followed by an L2 eviction inside the range (--profiler-range-write-back)
gives its DRAM writes, so the lines the launch left dirty in the L2 are counted, as fa-bench's own
write count has them (without that, ncu missed up to 10 MB of O's writes: 3-4.5% of fa2's bytes).

A row passes when its DRAM bytes (read + write) agree within 2%, or 3% where the row runs several
kernels (standard, the FP8 variants' quantisation pass, every backward row's pre- and
post-passes: lines one kernel dirties are written back during the next), and its tensor-pipe
operations are equal (up to ncu's printed digits). Prints a Markdown table; exits 1 on any failed
or missing row, 2 on bad usage.

Usage (on a GPU machine, ncu on PATH):
  scripts/ncu_compare.py --bin build/bin/fa-bench --N 2048,4096 --d 64,128 --direction both
"""

from __future__ import annotations

import argparse
import csv
import io
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from reports.schema import kv_cache_notes  # noqa: E402

DRAM = ("dram__bytes_read.sum", "dram__bytes_write.sum")
TENSOR = ("sm__ops_path_tensor_src_bf16_dst_fp32.sum", "sm__ops_path_tensor_src_fp16.sum",
          "sm__ops_path_tensor_src_fp8.sum")
METRICS = DRAM + TENSOR
VARIANTS = "standard,fa1,fa2,fa3,fp8,fp8-sm89,cudnn"
# Forward passes of more than one kernel: standard's GEMM, softmax, GEMM; the FP8 variants'
# quantisation pass before the attention. Every backward row has passes before and after its main
# kernel (dO . O, the dQ conversion).
MULTI_KERNEL_FORWARD = {"standard", "fp8", "fp8-sm89"}
DRAM_TOLERANCE = 0.02
DRAM_TOLERANCE_MULTI = 0.03
DIRECTIONS = {"fwd": ["forward"], "bwd": ["backward"], "both": ["forward", "backward"]}
FLAG = {"forward": "fwd", "backward": "bwd"}
NO_SUCH_PASS = re.compile(r"has no (forward|backward) pass")


SCALED_UNIT = re.compile(r"^[KMGTP](byte|inst|ops?)?$")
NUMBER = re.compile(r"[+-]?\d*(?:\.(\d*))?(?:[eE]([+-]?\d+))?")


class NcuOutputError(ValueError):
    """ncu's CSV is not what this script reads (no metric column, scaled units)."""


def printed_value(text: str) -> tuple[float, float]:
    """A value as ncu printed it ("68,719,476,736", "6.87195e+10") and half a unit of its last
    printed digit: how far the printed value may be from the count by formatting alone."""
    t = text.replace(",", "").strip()
    m = NUMBER.fullmatch(t)
    if not t or not m:
        raise ValueError(text)
    decimals, exponent = len(m.group(1) or ""), int(m.group(2) or 0)
    return float(t), 0.5 * 10.0 ** (exponent - decimals)


def ncu_results(text: str) -> list[dict]:
    """One entry per profiled result (a range, or a kernel) of ncu's `--csv --page raw` output:
    DRAM bytes and tensor operations in base units, and how far the printed tensor figure may be
    from the count (tensor_slack). Lines that are not CSV (the program's own output, ncu's
    ==PROF== lines) are skipped."""
    lines = [ln for ln in text.splitlines() if ln.startswith('"')]
    rows = list(csv.reader(io.StringIO("\n".join(lines))))
    if not rows:
        return []
    header = rows[0]
    col = {name: i for i, name in enumerate(header)}
    missing = [m for m in METRICS if m not in col]
    if "ID" not in col or len(missing) == len(METRICS):
        raise NcuOutputError(f"ncu CSV without an ID column or any of the metrics {', '.join(METRICS)}")
    out = []
    for row in rows[1:]:
        if len(row) < len(header):
            continue
        if not any(ch.isdigit() for ch in row[col["ID"]]):  # the units row
            for m in METRICS:
                unit = row[col[m]] if m in col else ""
                if SCALED_UNIT.match(unit):
                    raise NcuOutputError(f"ncu printed {m} in '{unit}', not base units "
                                         "(run ncu with --print-units base)")
            continue
        values, slack = {}, {}
        for m in METRICS:
            try:
                values[m], slack[m] = printed_value(row[col[m]]) if m in col else (0.0, 0.0)
            except ValueError:
                values[m], slack[m] = 0.0, 0.0  # "n/a": a metric this chip does not have
        out.append({"name": row[col["Kernel Name"]] if "Kernel Name" in col else "",
                    "dram": sum(values[m] for m in DRAM),
                    "dram_read": values[DRAM[0]], "dram_write": values[DRAM[1]],
                    "tensor": sum(values[m] for m in TENSOR),
                    "tensor_slack": sum(slack[m] for m in TENSOR)})
    return out


@dataclass
class Row:
    """One row of the result file, with fa-bench's counts and, once matched, ncu's."""
    variant: str
    direction: str
    N: int
    d: int
    causal: bool
    options: str  # the row's option values, as one sorted JSON text (identifies the row)
    status: str
    reason: str = ""
    peer: bool = False
    kernels: int = 0  # kernels fa-bench counted one by one (0: one kernel, or not broken down)
    dram: float | None = None
    tensor: float | None = None
    ncu: dict | None = None
    missing: str = ""  # why ncu has no figure for this row
    notes: list[str] = field(default_factory=list)
    kv: tuple[int, int] = (0, 0)  # (H_kv, N_kv) where they differ from H and N, else 0
    # (page_size, kv_lengths): 0 for a contiguous K/V cache, () where every sequence is N_kv long
    cache: tuple[int, tuple[int, ...]] = (0, ())
    N_kv: int = 0  # the K/V length (the cache's capacity with kv_lengths); 0: N

    @property
    def key(self) -> tuple:
        return (self.variant, self.direction, self.N, self.d, self.causal, self.options, self.kv,
                self.cache)

    @property
    def n_text(self) -> str:
        """N, and the K/V heads and length where they differ from H and N: "1 (N_kv 4096)"; a
        paged cache's pages, "1 (N_kv 4096, pages of 64)"; each sequence's length where they
        differ, "1 (N_kv ≤4096, lengths 100,4096)" (fa-bench's spelling of the lengths)."""
        h_kv, n_kv = self.kv
        page_size, lengths = self.cache
        notes = ([f"H_kv {h_kv}"] if h_kv else []) + kv_cache_notes(
            n_kv, self.N_kv or self.N, page_size, lengths)
        return str(self.N) + (f" ({', '.join(notes)})" if notes else "")


def kv_of(config: dict) -> tuple[int, int]:
    """A configuration's (H_kv, N_kv) where they differ from (H, N), 0 where not (fa-bench/4 on
    writes both; a record without them is square multi-head attention)."""
    h, n = config.get("H"), config["N"]
    h_kv, n_kv = config.get("H_kv", h), config.get("N_kv", n)
    return (h_kv if h_kv != h else 0, n_kv if n_kv != n else 0)


def cache_of(config: dict) -> tuple[int, tuple[int, ...]]:
    """A configuration's (page_size, kv_lengths as a tuple, () when null) (fa-bench/5 writes
    both; a record without them keeps K/V contiguous, every sequence N_kv long: (0, ()))."""
    return (int(config.get("page_size") or 0), tuple(config.get("kv_lengths") or ()))


def rows_of(record: dict) -> list[Row]:
    """Every row of a fa-bench result record, in the order fa-bench ran them."""
    out = []
    for config in record.get("configs", []):
        for r in config.get("results", []):
            counters = r.get("counters") or {}
            values = counters.get("values") or {}
            row = Row(variant=r["variant"], direction=r.get("direction", "forward"),
                      N=int(config["N"]), d=int(config["d"]), causal=bool(config.get("causal")),
                      options=json.dumps(r.get("options") or {}, sort_keys=True),
                      status=r.get("status", ""), reason=r.get("reason", ""),
                      peer=bool(r.get("peer")), kernels=len(counters.get("kernels") or []),
                      kv=kv_of(config), cache=cache_of(config),
                      N_kv=int(config.get("N_kv", config["N"])))
            if counters.get("status") == "ok":
                row.dram = sum(values.get(m, 0.0) for m in DRAM)
                row.tensor = sum(values.get(m, 0.0) for m in TENSOR)
            elif r.get("status") == "ok":
                row.notes.append(f"no fa-bench counters: {counters.get('status', 'none')} "
                                 f"{counters.get('reason', '')}".strip())
            out.append(row)
    return out


def applicable(row: Row) -> bool:
    """False for the rows of a pass the variant does not have (fa1 backward): nothing to check."""
    return not (row.status == "unsupported" and NO_SUCH_PASS.search(row.reason))


def multi_kernel(row: Row) -> bool:
    return row.direction == "backward" or row.variant in MULTI_KERNEL_FORWARD or row.kernels >= 2


def match_ranges(run_rows: list[Row], results: list[dict]) -> tuple[dict[tuple, dict], str]:
    """ncu's results of one run, in order, to the rows of that run that opened a range: those
    that verified (ok, failed), and those that errored when an error can have come from inside the
    range. Returns (result by row key, "" or why they cannot be matched)."""
    verified = [r for r in run_rows if r.status in ("ok", "failed")]
    errored = [r for r in run_rows if r.status in ("ok", "failed", "error")]
    for candidates in (verified, errored):
        if len(candidates) == len(results):
            return {r.key: res for r, res in zip(candidates, results)}, ""
    return {}, (f"ncu returned {len(results)} results for {len(verified)} verified rows "
                f"({len(errored) - len(verified)} errored)")


@dataclass
class Verdict:
    ok: bool
    dram_ratio: float | None
    tensor_ratio: float | None
    text: str


def judge(row: Row) -> Verdict:
    """The row's verdict: its DRAM bytes and tensor operations against ncu's."""
    if row.status != "ok":
        return Verdict(False, None, None, f"missing: {row.status}: {row.reason}"[:160])
    if row.dram is None or row.tensor is None:
        return Verdict(False, None, None, "missing: " + "; ".join(row.notes or ["no counters"]))
    if row.ncu is None:
        return Verdict(False, None, None, "missing: " + (row.missing or "no ncu result"))
    theirs_dram, theirs_tensor = row.ncu["dram"], row.ncu["tensor"]
    slack = row.ncu.get("tensor_slack", 0.0)
    dram_ratio = row.dram / theirs_dram if theirs_dram else None
    if theirs_tensor:
        tensor_ratio = row.tensor / theirs_tensor
    else:
        tensor_ratio = 1.0 if row.tensor == 0 else None
    tolerance = DRAM_TOLERANCE_MULTI if multi_kernel(row) else DRAM_TOLERANCE
    problems = []
    if dram_ratio is None or abs(dram_ratio - 1) > tolerance:
        off = "ncu counted no DRAM bytes" if dram_ratio is None else f"{dram_ratio - 1:+.2%}"
        problems.append(f"DRAM {off} (limit {tolerance:.0%})")
    # One hardware counter on both sides: equal, up to the digits ncu printed.
    if abs(row.tensor - theirs_tensor) > slack:
        off = "ncu counted none" if tensor_ratio is None else f"{tensor_ratio - 1:+.2e}"
        problems.append(f"tensor ops {off} (must be equal)")
    if problems:
        return Verdict(False, dram_ratio, tensor_ratio, "FAIL: " + "; ".join(problems))
    return Verdict(True, dram_ratio, tensor_ratio, f"pass (DRAM within {tolerance:.0%})")


def table(rows: list[Row]) -> tuple[list[str], int]:
    """The Markdown table and the number of rows that did not pass."""
    lines = ["| variant | direction | N | d | fa-bench DRAM | ncu DRAM | ratio | tensor ratio | verdict |",
             "|---|---|---|---|---|---|---|---|---|"]
    failures = 0
    labels = {}
    for r in rows:  # options in the label only where two rows would read the same
        labels.setdefault((r.variant, r.direction, r.N, r.kv, r.cache, r.d), set()).add(
            (r.causal, r.options))
    for r in rows:
        v = judge(r)
        failures += not v.ok
        name = r.variant
        if len(labels[(r.variant, r.direction, r.N, r.kv, r.cache, r.d)]) > 1:
            opts = ", ".join(f"{k}={val}" for k, val in json.loads(r.options).items())
            name += f" ({'causal, ' if r.causal else ''}{opts})"
        ours = f"{r.dram:.4g}" if r.dram is not None else ""
        theirs = f"{r.ncu['dram']:.4g}" if r.ncu else ""
        ratio = f"{v.dram_ratio:.4f}" if v.dram_ratio is not None else ""
        tensor = f"{v.tensor_ratio:.6f}" if v.tensor_ratio is not None else ""
        verdict = v.text.replace("|", "/")
        lines.append(f"| {name} | {r.direction} | {r.n_text} | {r.d} | {ours} | {theirs} | {ratio} | "
                     f"{tensor} | {verdict} |")
    return lines, failures


def fa_bench_command(args, variants: str, direction: str, out: Path, extra: list[str]) -> list[str]:
    return [args.bin, "--N", args.N, "--d", args.d, "--causal", args.causal, "--variants", variants,
            "--direction", direction, "--warmup", "0", "--repetitions", "1", "--datasheet-roofs",
            "--no-energy", "--cold", "--json", str(out)] + extra


def run(cmd: list[str], what: str) -> tuple[subprocess.CompletedProcess, str]:
    """Runs cmd; returns it and "" or why its output is not usable (fa-bench exits 0 or 1)."""
    start = time.monotonic()
    done = subprocess.run(cmd, capture_output=True, text=True, check=False, env=os.environ.copy())
    print(f"ncu_compare: {what}: {time.monotonic() - start:.0f} s, exit {done.returncode}",
          file=sys.stderr)
    if done.returncode in (0, 1):
        return done, ""
    tail = [ln for ln in (done.stdout + "\n" + done.stderr).splitlines() if ln.strip()][-3:]
    return done, f"{what} exited {done.returncode}: " + " / ".join(tail)[-300:]


def ncu_errors(done: subprocess.CompletedProcess) -> str:
    """ncu's own error lines (a capture it refused), shortened."""
    lines = [ln for ln in (done.stdout + "\n" + done.stderr).splitlines() if "==ERROR==" in ln]
    return " / ".join(dict.fromkeys(lines))[:300]


def parse_list(flag: str, text: str) -> str:
    items = [x.strip() for x in text.split(",")]
    if not items or not all(x.isdigit() and int(x) > 0 for x in items):
        raise SystemExit(f"ncu_compare: {flag}: '{text}' (accepted: positive integers, "
                         "comma-separated)")
    return ",".join(items)


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog="\n".join(__doc__.splitlines()[2:]))
    ap.add_argument("--bin", default="build/bin/fa-bench", help="fa-bench (default %(default)s)")
    ap.add_argument("--ncu", default="ncu", help="Nsight Compute's CLI (default %(default)s)")
    ap.add_argument("--N", default="2048,4096", help="sequence lengths (default %(default)s)")
    ap.add_argument("--d", default="64,128", help="head dims (default %(default)s)")
    ap.add_argument("--causal", default="off", choices=("off", "on", "both"))
    ap.add_argument("--variants", default=VARIANTS, help="comma list (default %(default)s)")
    ap.add_argument("--direction", default="both", choices=tuple(DIRECTIONS),
                    help="passes to check (default %(default)s)")
    ap.add_argument("--replay", default="auto", choices=("auto", "app-range"),
                    help="auto (default): range replay for our variants, application-range "
                         "replay for peers; app-range: application-range replay for every row")
    ap.add_argument("--raw", type=Path, help="also append ncu's output here (for debugging)")
    try:
        args = ap.parse_args(argv)
    except SystemExit as e:
        return 2 if e.code else 0
    try:
        args.N, args.d = parse_list("--N", args.N), parse_list("--d", args.d)
    except SystemExit as e:
        print(e, file=sys.stderr)
        return 2
    variants = [v.strip() for v in args.variants.split(",") if v.strip()]
    if not variants:
        print(f"ncu_compare: --variants: '{args.variants}' (accepted: a comma list such as "
              f"{VARIANTS})", file=sys.stderr)
        return 2
    if shutil.which(args.bin) is None and not Path(args.bin).is_file():
        print(f"ncu_compare: --bin: {args.bin} not found (build fa-bench first)", file=sys.stderr)
        return 2
    if shutil.which(args.ncu) is None:
        print(f"ncu_compare: --ncu: {args.ncu} not found on PATH", file=sys.stderr)
        return 2

    with tempfile.TemporaryDirectory() as tmp:
        ours_path = Path(tmp) / "ours.json"
        done, why = run(fa_bench_command(args, ",".join(variants), args.direction, ours_path, []),
                        "fa-bench with its own counters")
        if why or not ours_path.exists():
            print(f"ncu_compare: {why or 'fa-bench wrote no result file'}", file=sys.stderr)
            return 1
        rows = [r for r in rows_of(json.loads(ours_path.read_text())) if applicable(r)]
        for variant in variants:
            for direction in DIRECTIONS[args.direction]:
                group = [r for r in rows if r.variant == variant and r.direction == direction]
                if not group and direction == "forward":
                    rows.append(Row(variant, direction, 0, 0, False, "{}", "missing",
                                    "fa-bench returned no row"))
                if not any(r.status == "ok" for r in group):
                    continue  # each row says why (judge)
                peer = any(r.peer for r in group)
                mode = "app-range" if peer or args.replay == "app-range" else "range"
                # Two ranges per row, as fa-bench's own count: reads and tensor operations from
                # the launch alone; writes from the launch followed by an L2 eviction inside the
                # range, so the lines it left dirty are written back where ncu counts them.
                found: dict[str, dict] = {}
                reason = ""
                for part, extra in (("launch", []), ("write-back", ["--profiler-range-write-back"])):
                    out = Path(tmp) / f"ncu-{variant}-{direction}-{part}.json"
                    cmd = [args.ncu, "--replay-mode", mode, "--cache-control", "all",
                           "--clock-control", "none", "--print-units", "base", "--csv", "--page",
                           "raw", "--metrics", ",".join(METRICS)]
                    cmd += fa_bench_command(args, variant, FLAG[direction], out,
                                            ["--no-counters", "--profiler-range"] + extra)
                    done, why = run(cmd, f"{variant} {direction} under ncu ({mode} replay, {part})")
                    if args.raw:
                        with args.raw.open("a", encoding="utf-8") as f:
                            f.write(f"### {' '.join(cmd)}\n{done.stdout}\n{done.stderr}\n")
                    matched, why_not = {}, why
                    if not why:
                        try:
                            results = ncu_results(done.stdout)
                            run_rows = rows_of(json.loads(out.read_text())) if out.exists() else []
                            matched, why_not = match_ranges(run_rows, results)
                        except (NcuOutputError, json.JSONDecodeError) as e:
                            why_not = str(e)
                    if why_not and (errors := ncu_errors(done)):
                        why_not += f"; ncu: {errors}"
                    reason = reason or (f"{part} range: {why_not}" if why_not else "")
                    found[part] = matched
                for r in group:
                    launch, wb = found["launch"].get(r.key), found["write-back"].get(r.key)
                    if launch is None or wb is None:
                        r.missing = reason or "no ncu result for this row"
                        continue
                    r.ncu = dict(launch, dram=launch["dram_read"] + wb["dram_write"])

    lines, failures = table(rows)
    print("\n".join(lines))
    total = len(rows)
    print(f"\n{total - failures} of {total} rows agree"
          + (f"; {failures} failed or missing" if failures else ""))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
