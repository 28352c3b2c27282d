"""Derive the gate's test fixtures (tests/data/gate-*.json) from real H200 result files.

    python3 scripts/make_gate_fixtures.py            # rewrites tests/data/gate-*.json
    python3 scripts/make_gate_fixtures.py --check    # exit 1 if a committed fixture differs

Every fixture starts from a real fa-bench run on the H200 (tests/data/*-h200.json), keeps only
the N=4096, d=64 rows (both causal settings, all four variants) and applies one stated
transform: timing samples scaled, counters scaled, a row removed, a field changed. Each file
says so in a top-level "derived_from" key (the C++ and Python readers ignore unknown keys), so
no derived number passes for a measurement. Deterministic: a fixed seed for the jitter.
"""

from __future__ import annotations

import copy
import json
import random
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
DATA = REPO / "tests" / "data"
SOURCE = "counters-4variants-h200.json"  # has counters (CUPTI) for every row
OTHER_RUN = "sweep-4variants-h200.json"  # a second real run, same day, no counters
FA2_ORDER_RUN = "fa2-order-both-h200.json"  # same build as SOURCE, fa2 only, counters
FULL_RUN = "gate-same-build-a-h200.json"  # N=4096 d=64,128, all variants incl. the cudnn peer


def quantile(sorted_xs: list[float], q: float) -> float:
    """Type 7 (numpy's default), as profiler/stats.cpp."""
    pos = q * (len(sorted_xs) - 1)
    lo = int(pos)
    hi = min(lo + 1, len(sorted_xs) - 1)
    return sorted_xs[lo] + (sorted_xs[hi] - sorted_xs[lo]) * (pos - lo)


def restat(timing: dict) -> None:
    xs = sorted(timing["samples_ms"])
    n = len(xs)
    mean = sum(xs) / n
    var = sum((x - mean) ** 2 for x in xs) / (n - 1) if n > 1 else 0.0
    timing["median_ms"] = quantile(xs, 0.5)
    timing["q1_ms"] = quantile(xs, 0.25)
    timing["q3_ms"] = quantile(xs, 0.75)
    timing["min_ms"] = xs[0]
    timing["max_ms"] = xs[-1]
    timing["mean_ms"] = mean
    timing["stddev_ms"] = var**0.5
    timing["relative_iqr"] = (timing["q3_ms"] - timing["q1_ms"]) / timing["median_ms"]


def retime(row: dict, scale) -> None:
    """Multiply each sample by scale(i); keep derived throughput consistent with the median."""
    t = row["timing"]
    old = t["median_ms"]
    t["samples_ms"] = [s * scale(i) for i, s in enumerate(t["samples_ms"])]
    restat(t)
    ratio = old / t["median_ms"]
    d = row.get("derived")
    if d:
        for k in ("tflops_convention", "tflops_model", "effective_gbps"):
            d[k] *= ratio
        if d.get("roofline_attainable_tflops"):
            d["roofline_fraction"] = d["tflops_model"] / d["roofline_attainable_tflops"]


def scale_dram(row: dict, factor: float) -> None:
    vals = row["counters"]["values"]
    for k in ("dram__bytes_read.sum", "dram__bytes_write.sum"):
        vals[k] *= factor
    m = row["measured"]
    for k in ("dram_bytes", "dram_over_model", "dram_over_compulsory"):
        m[k] *= factor
    m["intensity_dram"] /= factor


def subset(doc: dict) -> dict:
    out = copy.deepcopy(doc)
    out["configs"] = [c for c in out["configs"] if c["N"] == 4096 and c["d"] == 64]
    assert len(out["configs"]) == 2 and all(len(c["results"]) == 4 for c in out["configs"])
    return out


def rows(doc: dict, variant: str | None = None):
    for c in doc["configs"]:
        for r in c["results"]:
            if variant is None or r["variant"] == variant:
                yield c, r


def scale_counters(row: dict, factor: float) -> None:
    """Every byte and work counter x factor (the raw values the gate reads)."""
    vals = row["counters"]["values"]
    for k in list(vals):
        if k.startswith(("dram__bytes", "lts__t_sectors", "sm__ops_path_tensor", "sm__inst")):
            vals[k] *= factor


def label(doc: dict, source: str, transform: str, rows: str = "N=4096 d=64 (causal off and on) only") -> dict:
    doc["derived_from"] = {
        "file": f"tests/data/{source}",
        "rows": rows,
        "transform": transform,
        "maker": "scripts/make_gate_fixtures.py",
    }
    return doc


def fixtures() -> dict[str, str]:
    src = json.loads((DATA / SOURCE).read_text())
    other = json.loads((DATA / OTHER_RUN).read_text())
    base = subset(src)
    out: dict[str, dict | str] = {}

    out["gate-h200-base.json"] = label(copy.deepcopy(base), SOURCE, "none (the real rows, subset)")
    out["gate-h200-other-run.json"] = label(subset(other), OTHER_RUN, "none (the real rows, subset)")

    # A second real run of the same build (same revision, 5 minutes later), fa2 rows only, with
    # counters: how much the counts move between runs.
    order = json.loads((DATA / FA2_ORDER_RUN).read_text())
    order["configs"] = [c for c in order["configs"] if c["N"] == 4096 and c["d"] == 64]
    assert len(order["configs"]) == 1 and order["tool"]["git_revision"] == src["tool"]["git_revision"]
    out["gate-h200-fa2-rerun.json"] = label(order, FA2_ORDER_RUN, "none (the real rows, subset)")
    out["gate-h200-fa2-rerun.json"]["derived_from"]["rows"] = "N=4096 d=64 (causal off) only"

    def variant(name: str, transform: str, edit) -> None:
        doc = copy.deepcopy(base)
        edit(doc)
        out[name] = label(doc, SOURCE, transform)

    def fa2_time(factor: float):
        return lambda doc: [retime(r, lambda i: factor) for _, r in rows(doc, "fa2")]

    def all_time(scale):
        return lambda doc: [retime(r, scale) for _, r in rows(doc)]

    variant("gate-time-fa2-x1.10.json", "fa2 timing samples x1.10 (a 10% slowdown)", fa2_time(1.10))
    variant("gate-time-all-x1.02.json", "every timing sample x1.02", all_time(lambda i: 1.02))
    variant("gate-time-all-x0.98.json", "every timing sample x0.98", all_time(lambda i: 0.98))
    rng = random.Random(7)
    jitter3 = [rng.uniform(0.97, 1.03) for _ in range(1000)]
    variant("gate-time-jitter3.json", "every timing sample x U(0.97, 1.03), seed 7",
            all_time(lambda i: jitter3[i]))
    rng = random.Random(11)
    jitter20 = [rng.uniform(0.80, 1.20) for _ in range(1000)]
    variant("gate-time-jitter20.json",
            "every timing sample x U(0.80, 1.20), seed 11 (a very noisy machine)",
            all_time(lambda i: jitter20[i]))

    def dram_up(doc: dict) -> None:
        for _, r in rows(doc, "fa2"):
            scale_dram(r, 1.05)

    variant("gate-dram-fa2-x1.05.json", "fa2 DRAM bytes (counters and measured) x1.05; time unchanged",
            dram_up)

    def improved(doc: dict) -> None:
        for _, r in rows(doc, "fa2"):
            retime(r, lambda i: 0.90)
            scale_dram(r, 0.95)

    variant("gate-improved-fa2.json", "fa2 timing samples x0.90 and DRAM bytes x0.95", improved)

    def clock_drop(doc: dict) -> None:
        for _, r in rows(doc, "fa2"):
            retime(r, lambda i: 1.10)
            r["timing"]["sm_clock_mhz"] = {"before": 1755, "after": 1755}

    variant("gate-clock-fa2.json",
            "fa2 timing samples x1.10 and its SM clock set to 1755 MHz (a throttled GPU)", clock_drop)

    def drop_row(doc: dict) -> None:
        causal = next(c for c in doc["configs"] if c["causal"])
        causal["results"] = [r for r in causal["results"] if r["variant"] != "fa2"]

    variant("gate-missing-row.json", "the fa2 row of the causal configuration removed", drop_row)

    def foreign(doc: dict) -> None:
        doc["device"]["name"] = "NVIDIA H100 80GB HBM3"

    variant("gate-foreign-gpu.json", "device.name replaced by another GPU model's name", foreign)

    def failed(doc: dict) -> None:
        c = next(c for c in doc["configs"] if not c["causal"])
        r = next(r for r in c["results"] if r["variant"] == "fa2")
        r["status"] = "failed"
        r["reason"] = "max_abs_error above tolerance (derived fixture)"
        r["verification"]["passed"] = False
        r["verification"]["max_abs_error"] = 10 * r["verification"]["tolerance"]
        for k in ("timing", "derived", "counters", "measured"):
            r[k] = None

    variant("gate-failed-variant.json", "fa2 (causal off) marked failed verification, its timing dropped",
            failed)

    def no_gpu(doc: dict) -> None:
        doc["device"] = None
        doc["no_gpu_reason"] = "no CUDA device (derived fixture)"
        doc["settings"]["model_only"] = True
        for _, r in rows(doc):
            r["status"] = "model_only"
            for k in ("verification", "timing", "derived", "counters", "measured"):
                r[k] = None

    variant("gate-no-gpu.json", "as a run on a machine without a GPU: device null, rows model_only",
            no_gpu)

    def schema_unknown(doc: dict) -> None:
        doc["schema"] = "fa-bench/99"  # a version no reader knows (fa-bench/2 is known)

    variant("gate-schema-unknown.json", "schema set to an unknown version", schema_unknown)

    # ---- the issue-12 cases: regressions the old rule passed, and what must not pass ----
    rng = random.Random(12)
    jitter6 = [rng.uniform(0.94, 1.06) for _ in range(1000)]
    variant("gate-time-fa2-x1.30-jitter6.json",
            "fa2 timing samples x1.30 x U(0.94, 1.06), seed 12 (30% slower on a jittery machine)",
            lambda doc: [retime(r, lambda i: 1.30 * jitter6[i]) for _, r in rows(doc, "fa2")])

    def clock6(doc: dict) -> None:
        for _, r in rows(doc, "fa2"):
            retime(r, lambda i: 1.10)
            clk = r["timing"]["sm_clock_mhz"]
            r["timing"]["sm_clock_mhz"] = {k: round(v * 0.94) for k, v in clk.items()}

    variant("gate-time-fa2-x1.10-clock-6.json",
            "fa2 timing samples x1.10 and its SM clock readings x0.94 (10% slower, clock 6% lower)",
            clock6)
    variant("gate-time-fa2-x1.15-3old.json",
            "fa2 timing samples x1.15 except the first 3, left at the old speed",
            lambda doc: [retime(r, lambda i: 1.0 if i < 3 else 1.15) for _, r in rows(doc, "fa2")])

    def fa1_nine(doc: dict) -> None:
        for _, r in rows(doc, "fa1"):
            r["timing"]["samples_ms"] = r["timing"]["samples_ms"][:9]
            retime(r, lambda i: 1.50)

    variant("gate-time-fa1-x1.50-9samples.json",
            "fa1 timing samples: the first 9 kept, x1.50 (as --min-time gives a slow row)", fa1_nine)

    def fa2_four(doc: dict) -> None:
        for _, r in rows(doc, "fa2"):
            r["timing"]["samples_ms"] = r["timing"]["samples_ms"][:4]
            restat(r["timing"])

    variant("gate-time-fa2-4samples.json", "fa2 timing samples: the first 4 kept (too few)", fa2_four)
    variant("gate-counters-fa2-x1.50.json", "fa2 byte and work counters (raw values) x1.50",
            lambda doc: [scale_counters(r, 1.50) for _, r in rows(doc, "fa2")])

    def no_counters(doc: dict) -> None:
        for _, r in rows(doc):
            r["counters"] = {"status": "skipped", "reason": "--no-counters (derived fixture)",
                             "values": {}, "collect_seconds": 0.0}
            r["measured"] = None

    variant("gate-no-counters.json", "every row's counters removed (as --no-counters)", no_counters)

    def duplicate(doc: dict) -> None:
        c = next(c for c in doc["configs"] if not c["causal"])
        c["results"].append(copy.deepcopy(next(r for r in c["results"] if r["variant"] == "fa2")))

    variant("gate-duplicate-row.json", "the fa2 row (causal off) appears twice", duplicate)

    def impossible(doc: dict) -> None:
        for _, r in rows(doc, "fa2"):
            r["timing"]["samples_ms"][5] = -r["timing"]["samples_ms"][5]

    variant("gate-negative-sample.json", "one fa2 timing sample made negative", impossible)

    full = json.loads((DATA / FULL_RUN).read_text())
    all_rows = "N=4096 d=64 and d=128, causal off, all variants (the real file)"

    def peer_slower(doc: dict) -> None:
        for _, r in rows(doc, "cudnn"):
            retime(r, lambda i: 1.20)
            scale_counters(r, 1.10)

    doc = copy.deepcopy(full)
    peer_slower(doc)
    out["gate-peer-cudnn-x1.20.json"] = label(
        doc, FULL_RUN, "cudnn (peer) timing samples x1.20 and its counters x1.10", all_rows)

    # Compact (no indentation), as every record in tests/data is stored.
    text = {k: json.dumps(v, sort_keys=True, separators=(",", ":")) + "\n" for k, v in out.items()}
    # A file cut short, as a killed copy leaves it.
    text["gate-truncated.json"] = text["gate-h200-base.json"][:6000]
    return text


def main() -> int:
    check = "--check" in sys.argv[1:]
    bad = 0
    for name, body in fixtures().items():
        path = DATA / name
        if check:
            if not path.exists() or path.read_text() != body:
                print(f"{path}: differs from what {Path(__file__).name} makes", file=sys.stderr)
                bad = 1
        else:
            path.write_text(body)
    return bad


if __name__ == "__main__":
    sys.exit(main())
