"""scripts/compare_builds.py without a GPU: every argument mistake exits 2 with one line naming
the flag; the run order alternates the builds; a row's rounds combine into one; the table; and
whole comparisons with stand-in fa-bench binaries for the runs and the real fa-bench's merge and
gate for the verdict (a slower current build fails, the same build passes)."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import fa_bench

from reports import schema

REPO_ROOT = Path(__file__).resolve().parents[2]
SCRIPT = REPO_ROOT / "scripts" / "compare_builds.py"
spec = importlib.util.spec_from_file_location("compare_builds", SCRIPT)
cb = importlib.util.module_from_spec(spec)
spec.loader.exec_module(cb)

H200 = {
    "index": 0, "name": "NVIDIA H200", "uuid": "GPU-00000000-0000-0000-0000-000000000000",
    "pci_bus_id": "00000000:18:00.0", "compute_capability": "9.0", "sm_count": 132,
    "memory_bytes": 150754820096, "l2_bytes": 62914560, "smem_per_sm_bytes": 233472,
    "smem_per_block_optin_bytes": 232448, "memory_bus_bits": 6144, "sm_clock_max_mhz": 1980,
    "mem_clock_max_mhz": 3201, "driver_version": "580.159.04", "cuda_driver_version": 13000,
    "cuda_runtime_version": 13000,
}
VERIFIED = {"passed": True, "all_finite": True, "nonfinite_count": 0, "max_abs_error": 0.001,
            "rmse": 0.0001, "baseline_max_abs_error": 0.002, "tolerance": 0.004,
            "rows_checked": 64, "heads_checked": 2}


def row(variant: str, samples: list[float], *, status: str = "ok", clock: int = 1980) -> dict:
    """A timed, verified row of B=1 H=2 d=64 (FLOPs for the throughput figures)."""
    model = {"flops_matrix": 1e9, "flops_convention": 1e9, "bytes_read": 1e6,
             "bytes_written": 1e6, "bytes_compulsory": 2e6}
    verification = dict(VERIFIED, passed=status == "ok")
    r = schema.make_result(variant, algorithm=variant, status=status,
                           reason="" if status == "ok" else "max_abs_error 1 > tolerance 0.004",
                           verification=verification,
                           samples_ms=samples if status == "ok" else None, model=model)
    if r["timing"]:
        r["timing"]["sm_clock_mhz"] = {"before": clock, "after": clock}
    return r


def document(rows_by_n: dict, revision: str = "base", repetitions: int = 3) -> dict:
    doc = schema.new_document("fa-bench (stand-in)", device=H200,
                              settings={"repetitions": repetitions, "timing_engine": "stand-in"})
    doc["tool"]["git_revision"] = revision
    doc["created_utc"] = "2026-01-01T00:00:00Z"
    for n, rows in rows_by_n.items():
        doc["configs"].append(schema.make_config(B=1, H=2, N=n, d=64, causal=False, dtype="bf16",
                                                 seed=1234, results=rows))
    return doc


# ---- Arguments -------------------------------------------------------------------------------

EXE = sys.executable  # an executable file that is not the other side's


@pytest.mark.parametrize("argv, flag", [
    ([], "the two sides are the same build"),
    (["--base-cmake=-DX=1", "--current-cmake", "-DX=1"], "the two sides are the same build"),
    (["--base-cmake=-DX=1", "--rounds", "0"], "--rounds: 0"),
    (["--base-cmake=-DX=1", "--rounds", "two"], "--rounds: 'two'"),
    (["--base", "no-such-revision-anywhere"], "--base: 'no-such-revision-anywhere'"),
    (["--current", "HEAD~999999"], "--current: 'HEAD~999999'"),
    (["--base-cmake", "Release"], "--base-cmake: 'Release'"),
    (["--base-cmake", "-B elsewhere"], "--base-cmake: '-B'"),
    (["--current-cmake", "-DX='1"], "--current-cmake:"),
    (["--base-bin", EXE, "--base", "HEAD"], "--base-bin: a prebuilt binary takes no --base"),
    (["--base-bin", EXE, "--base-cmake=-DX=1"], "--base-bin: a prebuilt binary takes no"),
    (["--base-bin", "/no/such/fa-bench", "--current-bin", EXE], "--base-bin: '/no/such/fa-bench'"),
    (["--base-bin", EXE, "--current-bin", EXE], "--base-bin and --current-bin are the same"),
    (["--base-cmake=-DX=1", "--", "--json", "x.json"], "--json: set by the tool"),
    (["--base-cmake=-DX=1", "--", "--N", "128", "--shard=0/2"], "--shard: set by the tool"),
    (["--base-cmake=-DX=1", "--", "--devices", "all"], "--devices: set by the tool"),
    (["--base-cmake=-DX=1", "--", "--model-only"], "--model-only: set by the tool"),
    (["--base-cmake=-DX=1", "--", "gate"], "fa-bench argument 'gate'"),
    (["--base-cmake=-DX=1", "--gate-args", "--baseline old.json"], "--gate-args: --baseline"),
    (["--base-cmake=-DX=1", "--gate-args", "--strict '"], "--gate-args:"),
    (["--base-cmake=-DX=1", "--bogus"], "--bogus"),
])
def test_bad_arguments_exit_2_naming_the_flag(capsys, argv, flag):
    assert cb.main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("compare_builds: error: ") and flag in err
    assert len(err.strip().splitlines()) == 1


def test_defaults_and_what_the_tool_adds():
    o, bench = cb.parse_args(["--base-cmake", "-DFA_X=OFF -UFA_Y", "--current-cmake=-DFA_X=ON"])
    assert o.base_cmake == ["-DFA_X=OFF", "-UFA_Y"] and o.current_cmake == ["-DFA_X=ON"]
    assert o.base is None and o.current is None and o.rounds == 3
    assert bench == cb.DEFAULT_BENCH_ARGS + ["--repetitions", "30", "--require-gpu"]
    assert o.gate_args == []

    o, bench = cb.parse_args(["--base", "HEAD", "--rounds", "5", "--gate-args", "--strict",
                              "--", "--N", "128", "--min-time", "0.5", "--no-counters"])
    head = subprocess.run(["git", "-C", str(REPO_ROOT), "rev-parse", "HEAD"], capture_output=True,
                          text=True, check=True).stdout.strip()
    assert o.base == head and o.rounds == 5
    assert bench == ["--N", "128", "--min-time", "0.5", "--no-counters", "--require-gpu"]
    assert o.gate_args == ["--strict", "--time-only"]  # --no-counters: the gate judges time alone


def test_help_exits_0(capsys):
    assert cb.main(["--help"]) == 0
    assert "--base-cmake" in capsys.readouterr().out


# ---- Steps -----------------------------------------------------------------------------------


def test_runs_alternate_the_builds():
    assert cb.run_order(2, 2) == [
        (0, 0, "base"), (0, 0, "current"), (0, 1, "base"), (0, 1, "current"),
        (1, 0, "current"), (1, 0, "base"), (1, 1, "current"), (1, 1, "base")]


def test_rounds_combine_into_one_row():
    r0 = document({128: [row("fa2", [1.0, 1.1, 1.2], clock=1900), row("standard", [3.0, 3.0, 3.0])]})
    r1 = document({128: [row("fa2", [2.0, 2.1, 2.2], clock=1980),
                         row("standard", [], status="failed")]})
    out = cb.combine_rounds([r0, r1])
    fa2, standard = out["configs"][0]["results"]
    t = fa2["timing"]
    assert t["samples_ms"] == [1.0, 1.1, 1.2, 2.0, 2.1, 2.2]
    assert t["median_ms"] == pytest.approx(1.6) and t["min_ms"] == 1.0 and t["max_ms"] == 2.2
    assert t["sm_clock_mhz"] == {"before": 1940, "after": 1940}
    before = r0["configs"][0]["results"][0]["derived"]["tflops_convention"]
    assert fa2["derived"]["tflops_convention"] == pytest.approx(before * 1.1 / 1.6)
    assert standard["status"] == "failed"  # a failed round makes the row failed
    assert r0["configs"][0]["results"][0]["timing"]["median_ms"] == pytest.approx(1.1)  # untouched


def test_table_speed_and_its_range_over_rounds():
    base = [document({128: [row("fa2", [1.0] * 3)]}), document({128: [row("fa2", [1.0] * 3)]})]
    cur = [document({128: [row("fa2", [0.5] * 3)]}), document({128: [row("fa2", [0.4] * 3)]})]
    merged = {"base": cb.combine_rounds(base), "current": cb.combine_rounds(cur)}
    lines = cb.table({"base": base, "current": cur}, merged)
    fa2 = next(line for line in lines if " fa2 " in line)
    # medians 1.0 and 0.45 (0.5, 0.4 together): speed 2.222; the rounds 2.000 and 2.500
    assert "2.222" in fa2 and fa2.endswith("2.000-2.500")


def test_rounds_and_table_keep_kv_heads_apart():
    """fa-bench/4: two configurations that differ only by their K/V heads combine each with its
    own rounds, and the table names the grouped-query one (fa-bench's shape text)."""
    def doc4(mha_ms: float, gqa_ms: float) -> dict:
        doc = document({})
        doc["schema"] = "fa-bench/4"
        for h_kv, ms in ((2, mha_ms), (1, gqa_ms)):
            doc["configs"].append(schema.make_config(
                B=1, H=2, H_kv=h_kv, N=128, d=64, causal=False, dtype="bf16", seed=1234,
                version="fa-bench/4", results=[row("fa2", [ms] * 3)]))
        return schema.validate(doc)

    base = [doc4(1.0, 1.0), doc4(1.0, 1.0)]
    cur = [doc4(1.0, 0.5), doc4(1.0, 0.5)]
    merged = {"base": cb.combine_rounds(base), "current": cb.combine_rounds(cur)}
    mha, gqa = merged["current"]["configs"]
    assert mha["results"][0]["timing"]["samples_ms"] == [1.0] * 6
    assert gqa["results"][0]["timing"]["samples_ms"] == [0.5] * 6
    lines = [line for line in cb.table({"base": base, "current": cur}, merged) if " fa2 " in line]
    assert len(lines) == 2
    assert lines[0].startswith("B=1 H=2 N=128 d=64 full bf16 ") and "1.000" in lines[0]
    assert lines[1].startswith("B=1 H=2 H_kv=1 N=128 d=64 full bf16 ") and "2.000" in lines[1]


def test_rounds_and_table_keep_pages_and_lengths_apart():
    """fa-bench/5: configurations that differ only by their cache's pages or their sequences'
    lengths combine each with its own rounds, and the table names them (fa-bench's shape
    text)."""
    caches = ((0, None), (64, None), (64, [100, 128]))

    def doc5(*ms: float) -> dict:
        doc = document({})
        doc["schema"] = "fa-bench/5"
        for (page_size, lengths), t in zip(caches, ms):
            doc["configs"].append(schema.make_config(
                B=2, H=2, N=1, N_kv=128, page_size=page_size, kv_lengths=lengths, d=64,
                causal=False, dtype="bf16", seed=1234, version="fa-bench/5",
                results=[row("fa2", [t] * 3)]))
        return schema.validate(doc)

    base = [doc5(1.0, 1.0, 1.0), doc5(1.0, 1.0, 1.0)]
    cur = [doc5(1.0, 0.5, 0.25), doc5(1.0, 0.5, 0.25)]
    merged = {"base": cb.combine_rounds(base), "current": cb.combine_rounds(cur)}
    samples = [c["results"][0]["timing"]["samples_ms"] for c in merged["current"]["configs"]]
    assert samples == [[1.0] * 6, [0.5] * 6, [0.25] * 6]
    lines = [line for line in cb.table({"base": base, "current": cur}, merged) if " fa2 " in line]
    assert len(lines) == 3
    assert lines[0].startswith("B=2 H=2 N=1 N_kv=128 d=64 full bf16 ") and "1.000" in lines[0]
    assert lines[1].startswith("B=2 H=2 N=1 N_kv=128 page=64 d=64 full bf16 ") and "2.000" in lines[1]
    assert lines[2].startswith("B=2 H=2 N=1 N_kv=128 kv_lengths=100,128 page=64 d=64 full bf16 ")
    assert "4.000" in lines[2]


def test_table_shows_a_failed_row_without_a_ratio():
    base = [document({128: [row("fa2", [1.0] * 3)]})]
    cur = [document({128: [row("fa2", [], status="failed")]})]
    merged = {"base": cb.combine_rounds(base), "current": cb.combine_rounds(cur)}
    fa2 = next(line for line in cb.table({"base": base, "current": cur}, merged) if " fa2 " in line)
    assert "unverified" in fa2 and fa2.rstrip().endswith("-")


# ---- Whole comparisons: stand-in runs, the real merge and gate ---------------------------------

STAND_IN = """#!{python}
# A stand-in fa-bench: configurations N=128 and N=256 (d=64), rows fa2 and standard, every sample
# {factor} x a fixed time; merge and gate are the real fa-bench's.
import json, os, sys
sys.path.insert(0, {repo!r})
args = sys.argv[1:]
if args[:1] in (["merge"], ["gate"]):
    os.execv({real!r}, [{real!r}, *args])
if {mode!r} == "refuse":
    print("error: --N: 'x' is not a list of positive integers", file=sys.stderr)
    sys.exit(2)
if {mode!r} == "no-gpu" and "--model-only" not in args:
    print("error: --require-gpu: no usable GPU", file=sys.stderr)
    sys.exit(3)
sys.path.insert(0, {tests!r})
from test_compare_builds import document, row
value = lambda flag, default: args[args.index(flag) + 1] if flag in args else default
reps = int(value("--repetitions", "3"))
configs = [128, 256]
if "--shard" in args:
    i, n = map(int, value("--shard", "").split("/"))
    configs = [configs[i]]
with open({log!r}, "a") as f:
    f.write({name!r} + " " + value("--shard", "-") + ("" if "--model-only" in args else " run") + "\\n")
def samples(ms):
    return [{factor} * ms * (1 + 0.002 * ((k * 7) % 5)) for k in range(reps)]
doc = document({{n: [row("fa2", samples(n / 128)), row("standard", samples(3 * n / 128))]
                for n in configs}}, revision={name!r}, repetitions=reps)
json.dump(doc, open(value("--json", ""), "w"))
"""


def stand_in(folder: Path, name: str, factor: float, log: Path, mode: str = "ok") -> Path:
    """A stand-in fa-bench. mode "refuse": it refuses the arguments (exit 2); "no-gpu": its runs
    find no GPU (exit 3); either way no real fa-bench is needed for merge and gate."""
    path = folder / name / "fa-bench"
    path.parent.mkdir(parents=True)
    real = "/no/fa-bench/needed" if mode != "ok" else str(fa_bench())
    path.write_text(STAND_IN.format(python=sys.executable, repo=str(REPO_ROOT),
                                    tests=str(Path(__file__).parent), real=real,
                                    name=name, factor=factor, log=str(log), mode=mode))
    path.chmod(0o755)
    return path


def compare(tmp_path, factor: float, *extra: str):
    log = tmp_path / "calls.log"
    argv = ["--base-bin", str(stand_in(tmp_path, "base", 1.0, log)),
            "--current-bin", str(stand_in(tmp_path, "current", factor, log)),
            "--rounds", "2", "--out", str(tmp_path / "out"),
            "--", "--N", "128,256", "--no-counters", "--repetitions", "12", *extra]
    return cb.main(argv), log.read_text().splitlines()


def test_a_slower_current_build_fails_the_gate(tmp_path, capfd):
    rc, calls = compare(tmp_path, 1.2)
    out = capfd.readouterr().out  # the gate's own output too
    assert rc == 1, out
    # the plan, then each configuration on both builds back to back, the order flipping per round
    assert calls == ["current -", "base 0/2 run", "current 0/2 run", "base 1/2 run",
                     "current 1/2 run", "current 0/2 run", "base 0/2 run", "current 1/2 run",
                     "base 1/2 run"]
    ours, gate = out.split("fa-bench gate:")
    fa2 = [line for line in ours.splitlines() if " fa2 " in line]
    assert len(fa2) == 2 and all(line.endswith("0.833  0.833-0.833") for line in fa2)
    base = json.loads((tmp_path / "out" / "base.json").read_text())
    assert [c["N"] for c in base["configs"]] == [128, 256]
    assert all(len(r["timing"]["samples_ms"]) == 24 for c in base["configs"] for r in c["results"])
    assert "+20.0% slower" in gate and "FAIL (exit 1): 4 regressed" in gate


def test_the_same_build_passes_the_gate(tmp_path, capfd):
    rc, _ = compare(tmp_path, 1.0)
    out = capfd.readouterr().out
    assert rc == 0, out
    ours, gate = out.split("fa-bench gate:")
    assert all(line.endswith("1.000  1.000-1.000") for line in ours.splitlines() if " fa2 " in line)
    assert "4 rows, 4 pass" in gate and "PASS (exit 0)" in gate


@pytest.mark.parametrize("mode, code, message", [
    ("refuse", 2, "fa-bench refused the arguments (exit 2"),
    ("no-gpu", 3, "the base fa-bench run failed (exit 3"),
])
def test_a_refused_or_failed_run_stops_the_comparison(tmp_path, capfd, mode, code, message):
    log = tmp_path / "calls.log"
    rc = cb.main(["--base-bin", str(stand_in(tmp_path, "base", 1.0, log, mode)),
                  "--current-bin", str(stand_in(tmp_path, "current", 1.0, log, mode)),
                  "--out", str(tmp_path / "out"), "--", "--N", "128"])
    err = capfd.readouterr().err
    assert rc == code and message in err
    assert "no usable GPU" in err or "not a list" in err  # fa-bench's own line, from its log
