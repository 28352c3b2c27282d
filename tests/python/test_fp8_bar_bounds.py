"""scripts/fp8_bar_bounds.py: the attention-alone speed fp8 needs to meet issue 16's bars when its
quantisation pass runs at the DRAM roof, and the verdict beside the measured speeds."""

import importlib.util
import json
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "fp8_bar_bounds.py"
spec = importlib.util.spec_from_file_location("fp8_bar_bounds", SCRIPT)
fp8_bar_bounds = importlib.util.module_from_spec(spec)
spec.loader.exec_module(fp8_bar_bounds)

FLOPS = 1e12  # per row: TFLOP/s x 1e-3 = 1/ms
PASS_BYTES = 4e8  # at a 4e12 B/s roof: 0.1 ms


def row(variant, tflops, passed=True, status="ok"):
    r = {"variant": variant, "status": status, "derived": {"tflops_convention": tflops}}
    r["verification"] = {"passed": passed}
    if variant == "fp8":
        r["model"] = {
            "flops_convention": FLOPS,
            "terms": [
                {"name": "Q, K, V read (quantise pass)", "bytes": PASS_BYTES * 2 / 3},
                {"name": "Q8, K8, V8^T written (quantise pass)", "bytes": PASS_BYTES / 3},
                {"name": "K read (once per query block)", "bytes": 1e9},
            ],
        }
    return r


def doc(configs, roof=4e12):
    return {
        "ceilings": {"dram_bytes_per_s": roof},
        "configs": [
            {"d": d, "causal": causal, "N": n, "results": results}
            for (d, causal, n), results in configs.items()
        ],
    }


def one(d, causal, fa3, fp8, fp8_pq, cudnn_pq=None, passed=True):
    pq = [row("fp8", fp8_pq)] + ([row("cudnn-fp8", cudnn_pq)] if cudnn_pq else [])
    timed = doc({(d, causal, 4096): [row("fa3", fa3), row("fp8", fp8, passed)]})
    (out,) = fp8_bar_bounds.bounds(timed, doc({(d, causal, 4096): pq})) or [None]
    return out


def test_needed_attention_leaves_the_pass_at_the_roof():
    r = one(128, False, fa3=500.0, fp8=600.0, fp8_pq=800.0, cudnn_pq=900.0)
    # Target 1.4 x 500 = 700 TFLOP/s: 1.4286 ms for 1e12 FLOPs, of which the pass takes 0.1 ms.
    assert r["target"] == pytest.approx(700.0)
    assert r["least_pass_ms"] == pytest.approx(0.1)
    assert r["needed"] == pytest.approx(1.0 / (1.0 / 700.0 - 1e-4))
    assert r["verdict"] == "fp8's attention suffices: the pass is the gap"


def test_verdicts():
    assert one(64, False, 500.0, 580.0, 600.0)["verdict"] == "met"  # 580 >= 1.15 x 500
    assert one(64, True, 500.0, 580.0, 600.0)["verdict"] == "needs attention faster than fp8's"
    faster_than_cudnn = one(128, False, 500.0, 600.0, 730.0, cudnn_pq=740.0)  # needs 752
    assert faster_than_cudnn["verdict"] == "needs attention faster than cudnn-fp8's"
    # A pass that alone takes the bar's whole time: nothing is fast enough.
    big = doc({(128, False, 4096): [row("fa3", 10000.0), row("fp8", 6000.0)]})
    (r,) = fp8_bar_bounds.bounds(big, doc({}))
    assert r["needed"] is None
    assert r["verdict"].startswith("impossible")


def test_failed_and_unrun_rows_are_left_out_and_the_default_wins():
    assert one(128, False, 500.0, 600.0, 800.0, passed=False) is None
    # No bar for d=256 non-causal: no row.
    assert one(256, False, 500.0, 600.0, 800.0) is None
    for change in ({"status": "unsupported"}, {"derived": {}}):
        fp8 = {**row("fp8", 600.0), **change}
        timed = doc({(128, False, 4096): [row("fa3", 500.0), fp8]})
        assert fp8_bar_bounds.bounds(timed, doc({})) == [], change
    # A named schedule beside the default: the default's speed is the one judged.
    named = {**row("fp8", 900.0), "default_options": False}
    timed = doc({(128, False, 4096): [row("fa3", 500.0), row("fp8", 600.0), named]})
    (r,) = fp8_bar_bounds.bounds(timed, doc({}))
    assert r["fp8"] == 600.0
    assert r["verdict"] == "no prequantized fp8 row to compare"


def test_prequantized_rows_count_though_their_option_is_not_the_default():
    timed = doc({(128, False, 4096): [row("fa3", 500.0), row("fp8", 600.0)]})
    pq = {**row("fp8", 800.0), "default_options": False}
    (r,) = fp8_bar_bounds.bounds(timed, doc({(128, False, 4096): [pq]}))
    assert r["fp8_pq"] == 800.0
    # Two schedules, neither the default: which one the bar means is unknown, so neither counts.
    other = {**row("fp8", 900.0), "default_options": False}
    (r,) = fp8_bar_bounds.bounds(timed, doc({(128, False, 4096): [pq, other]}))
    assert r["fp8_pq"] is None


def test_the_committed_h200_table_reads():
    data = Path(__file__).resolve().parents[1] / "data"
    timed = data / "h200-fp8-hopper-2026-11-26d.json"
    pq = data / "h200-fp8-hopper-prequantized-2026-11-26d.json"
    assert fp8_bar_bounds.main(["fp8_bar_bounds.py", str(timed), str(pq)]) == 0
    assert fp8_bar_bounds.main(["fp8_bar_bounds.py", str(timed)]) == 2
    # The figures docs/perf-notes.md quotes ("What the bars leave for the attention").
    rows = fp8_bar_bounds.bounds(json.loads(timed.read_text()), json.loads(pq.read_text()))
    by_shape = {(r["d"], r["causal"], r["N"]): r for r in rows}
    assert len(rows) == 20
    r = by_shape[(128, False, 4096)]
    assert round(r["needed"]) == 1009 and round(r["cudnn_fp8_pq"]) == 835
    assert r["verdict"] == "needs attention faster than cudnn-fp8's"
    assert by_shape[(64, False, 8192)]["verdict"] == "fp8's attention suffices: the pass is the gap"
    assert by_shape[(64, False, 16384)]["verdict"] == "met"
    assert round(by_shape[(64, True, 4096)]["needed"]) == 571
    assert round(by_shape[(64, True, 4096)]["fp8_pq"]) == 431
    assert by_shape[(64, True, 4096)]["verdict"] == "needs attention faster than fp8's"
