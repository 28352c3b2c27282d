"""Tests of reports/schema.py (the fa-bench/2 and /1 reader and writer) and `python -m reports`."""

from __future__ import annotations

import copy
import json
import math
import random
import re
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import fa_bench_path

from reports import schema
from reports.schema import SchemaError, load_results, make_result, validate, write_results

REPO_ROOT = Path(__file__).resolve().parents[2]

B, H, N, D = 2, 3, 17, 64


def model(causal: bool = True) -> dict:
    return {
        "flops_matrix": 4.0 * B * H * N * N * D,
        "flops_convention": 4.0 * B * H * N * N * D * (0.5 if causal else 1.0),
        "flops_nonmatrix": 1.0e4,
        "bytes_read": 3.0 * B * H * N * D * 2,
        "bytes_written": 1.0 * B * H * N * D * 2,
        "bytes_compulsory": 4.0 * B * H * N * D * 2,
        "bytes_asymptotic": 1.0e5,
        "terms": [{"name": "Q read (once)", "write": False, "bytes": 1.0 * B * H * N * D * 2}],
    }


def verification(passed: bool) -> dict:
    return {"passed": passed, "all_finite": True, "nonfinite_count": 0,
            "max_abs_error": 0.004 if passed else 0.5, "rmse": 0.0004,
            "baseline_max_abs_error": 0.0078, "tolerance": 0.0166,
            "rows_checked": 17, "heads_checked": 4}


def good_doc() -> dict:
    doc = schema.new_document(
        "fa-bench --N 17",
        device={"index": 0, "name": "NVIDIA H200", "uuid": "GPU-0", "compute_capability": "9.0",
                "sm_count": 132, "memory_bytes": 150754820096, "l2_bytes": 62914560},
    )
    results = [
        make_result("fa2", algorithm="fa2", status="ok", tiles={"block_q": 128, "block_kv": 64},
                    verification=verification(True), samples_ms=[0.011, 0.0105, 0.0112],
                    model=model(), warmup=3),
        make_result("standard", algorithm="standard", status="failed",
                    reason="max_abs_error 0.5 > tolerance 0.0166",
                    verification=verification(False), model=model()),
        make_result("torch_sdpa", algorithm="fa2", status="skipped", peer=True,
                    reason="PyTorch is not installed", model=model()),
    ]
    doc["configs"].append(schema.make_config(B=B, H=H, N=N, d=D, causal=True, dtype="bf16",
                                             seed=1234, results=results))
    doc["configs"].append(schema.make_config(B=1, H=1, N=64, d=64, causal=False, dtype="fp16",
                                             seed=1234, results=[
        make_result("fa2", algorithm="fa2", status="model_only", model=model(False)),
    ]))
    return doc


# --------------------------------------------------------------------------------------------
# Round trip


def test_round_trip(tmp_path):
    doc = good_doc()
    path = tmp_path / "r.json"
    write_results(doc, path)
    assert load_results(path) == doc
    assert load_results(str(path)) == doc
    assert sorted(p.name for p in tmp_path.iterdir()) == ["r.json"]  # no temp file left over
    text = path.read_text()
    assert text.startswith('{\n "schema": "fa-bench/2"')  # indent=1


def test_write_refuses_invalid_and_keeps_old_file(tmp_path):
    path = tmp_path / "r.json"
    write_results(good_doc(), path)
    before = path.read_bytes()
    bad = good_doc()
    bad["configs"][0]["results"][0]["status"] = "bad"
    with pytest.raises(SchemaError, match=r"r\.json: configs\[0\]\.results\[0\]\.status"):
        write_results(bad, path)
    assert path.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["r.json"]


def test_write_refuses_nan(tmp_path):
    doc = good_doc()
    doc["configs"][0]["results"][0]["verification"]["rmse"] = float("nan")
    with pytest.raises(SchemaError, match=r"configs\[0\]\.results\[0\]\.verification\.rmse"):
        write_results(doc, tmp_path / "r.json")
    assert not (tmp_path / "r.json").exists()


def test_rows():
    rs = schema.rows(good_doc())
    assert len(rs) == 4
    first = rs[0]
    assert (first["variant"], first["B"], first["H"], first["N"], first["d"]) == ("fa2", B, H, N, D)
    assert first["causal"] is True and first["dtype"] == "bf16" and first["status"] == "ok"
    assert first["median_ms"] == pytest.approx(0.011)
    assert first["tflops_convention"] == pytest.approx(
        model()["flops_convention"] / 0.011e-3 / 1e12)
    assert first["max_abs_error"] == 0.004 and first["passed"] is True
    assert rs[1]["median_ms"] is None and rs[1]["passed"] is False
    assert rs[3]["N"] == 64 and rs[3]["config_index"] == 1 and rs[3]["result_index"] == 0


def v4_doc() -> dict:
    """good_doc as fa-bench/4: its two square configurations (H_kv = H, N_kv = N), a
    grouped-query one (H=32, H_kv=8) and a decode one (N=1, N_kv=4096), each on the file's GPU."""
    doc = good_doc()
    doc["schema"] = "fa-bench/4"
    gpu = {"uuid": "GPU-0", "name": "NVIDIA H200"}
    for c in doc["configs"]:
        c.update(H_kv=c["H"], N_kv=c["N"], gpu=gpu)
    for shape in ({"H_kv": 8, "N": 4096}, {"N": 1, "N_kv": 4096}):
        doc["configs"].append(schema.make_config(
            B=1, H=32, d=64, causal=False, dtype="bf16", seed=1234, gpu=gpu, version="fa-bench/4",
            results=[make_result("fa2", algorithm="fa2", status="model_only", model=model(False),
                                 version="fa-bench/4")], **shape))
    return doc


def test_v4_round_trip_and_rows(tmp_path):
    """A fa-bench/4 file with grouped-query and decode configurations writes, loads and flattens;
    older files' rows get H_kv = H and N_kv = N."""
    doc = v4_doc()
    path = tmp_path / "v4.json"
    write_results(doc, path)
    assert load_results(path) == doc
    gqa, decode = doc["configs"][2:]
    assert list(gqa)[:5] == ["B", "H", "H_kv", "N", "N_kv"]  # fa-bench's key order
    assert (gqa["H_kv"], gqa["N_kv"], decode["H_kv"], decode["N_kv"]) == (8, 4096, 32, 4096)
    rs = schema.rows(load_results(path))
    assert [(r["H"], r["H_kv"], r["N"], r["N_kv"]) for r in rs] == [
        (H, H, N, N)] * 3 + [(1, 1, 64, 64), (32, 8, 4096, 4096), (32, 32, 1, 4096)]
    assert all((r["H_kv"], r["N_kv"]) == (r["H"], r["N"]) for r in schema.rows(good_doc()))
    # a /3 file's unknown H_kv key does not make its configuration grouped-query
    v3 = good_doc()
    v3["schema"] = "fa-bench/3"
    for c in v3["configs"]:
        c.update(gpu=None, H_kv=1)
    assert all(r["H_kv"] == r["H"] for r in schema.rows(validate(v3)))


def test_make_config_writes_what_the_version_requires():
    kw = dict(B=2, H=8, N=128, d=64, causal=False, dtype="bf16", seed=1)
    assert "H_kv" not in schema.make_config(**kw) and "gpu" not in schema.make_config(**kw)
    v3 = schema.make_config(**kw, version="fa-bench/3")
    assert v3["gpu"] is None and "H_kv" not in v3
    v4 = schema.make_config(**kw, version="fa-bench/4")
    assert (v4["H_kv"], v4["N_kv"], v4["gpu"]) == (8, 128, None)
    gqa = schema.make_config(**kw, H_kv=2, N_kv=512, gpu={"uuid": "GPU-1", "name": "x"})
    assert (gqa["H_kv"], gqa["N_kv"], gqa["gpu"]["uuid"]) == (2, 512, "GPU-1")
    for version in ("fa-bench/3", "fa-bench/4"):
        doc = schema.new_document("fa-bench --N 128", version=version)
        doc["configs"].append(schema.make_config(**kw, version=version, results=[
            make_result("fa2", algorithm="fa2", status="model_only", model=model(False),
                        version=version)]))
        validate(doc)


def test_shape_text_is_fa_bench_s():
    """fa-bench's console text: H_kv after H and N_kv after N only where they differ."""
    c = {"B": 4, "H": 32, "N": 4096, "d": 128}
    assert schema.shape_text(c) == "B=4 H=32 N=4096 d=128"
    assert schema.shape_text({**c, "H_kv": 32, "N_kv": 4096}) == "B=4 H=32 N=4096 d=128"
    assert schema.shape_text({**c, "H_kv": 8}) == "B=4 H=32 H_kv=8 N=4096 d=128"
    assert schema.shape_text({**c, "H_kv": 8, "N_kv": 65536}) == (
        "B=4 H=32 H_kv=8 N=4096 N_kv=65536 d=128")
    assert schema.shape_text({**c, "H_kv": 8}, "fa-bench/3") == "B=4 H=32 N=4096 d=128"


def test_cli_table_names_kv_heads_and_length(tmp_path):
    path = tmp_path / "v4.json"
    write_results(v4_doc(), path)
    run = run_reports(str(path))
    assert run.returncode == 0, run.stderr
    lines = [line.split() for line in run.stdout.splitlines() if line.strip().startswith("fa2")]
    assert lines[0][1:5] == [str(B), str(H), str(N), str(D)]  # square: as ever
    assert lines[2][1:7] == ["1", "32", "(H_kv", "8)", "4096", "64"]
    assert lines[3][1:7] == ["1", "32", "1", "(N_kv", "4096)", "64"]


V5 = "fa-bench/5"
# A ragged batch of 8 sequences (fa-bench prints "512..4096/sum=20000" for more than four).
LENGTHS = [512, 4096, 1024, 2048, 4096, 3000, 2712, 2512]


def v5_doc() -> dict:
    """v4_doc as fa-bench/5: its configurations contiguous, every sequence N_kv long (page_size
    0, kv_lengths null), and a paged, ragged decode one (8 sequences of their own lengths up to
    4096 in pages of 64, grouped-query heads)."""
    doc = v4_doc()
    doc["schema"] = V5
    for c in doc["configs"]:
        c.update(page_size=0, kv_lengths=None)
    doc["configs"].append(schema.make_config(
        B=8, H=32, H_kv=8, N=1, N_kv=4096, page_size=64, kv_lengths=LENGTHS, d=64, causal=True,
        dtype="bf16", seed=1234, gpu={"uuid": "GPU-0", "name": "NVIDIA H200"}, version=V5,
        results=[make_result("fa2", algorithm="split_kv", status="model_only",
                             model=model(False), version=V5)]))
    return doc


def test_v5_round_trip_and_rows(tmp_path):
    """A fa-bench/5 file with a paged, ragged configuration writes, loads and flattens: the rows
    carry page_size and kv_lengths (a tuple); older files' rows get 0 and None."""
    doc = v5_doc()
    path = tmp_path / "v5.json"
    write_results(doc, path)
    assert load_results(path) == doc
    paged = doc["configs"][-1]
    assert list(paged)[:7] == ["B", "H", "H_kv", "N", "N_kv", "page_size", "kv_lengths"]
    assert (paged["page_size"], paged["kv_lengths"]) == (64, LENGTHS)
    rs = schema.rows(load_results(path))
    assert [(r["page_size"], r["kv_lengths"]) for r in rs] == [(0, None)] * 6 + [
        (64, tuple(LENGTHS))]
    for old in (v4_doc(), good_doc()):  # /4 and /2 files: contiguous, every sequence N_kv long
        assert all((r["page_size"], r["kv_lengths"]) == (0, None) for r in schema.rows(old))
    # a /4 file's unknown page_size and kv_lengths keys do not make its cache paged or ragged
    v4 = v4_doc()
    v4["configs"][0].update(page_size=64, kv_lengths=[1, 2])
    assert all((r["page_size"], r["kv_lengths"]) == (0, None) for r in schema.rows(validate(v4)))
    assert schema.kv_cache(v4["configs"][0], "fa-bench/4") == (0, None)
    assert schema.kv_cache(v4["configs"][0], V5) == (64, (1, 2))


def test_v5_rows_say_how_they_were_launched():
    """settings.launch and timing.launch (optional, "stream" | "graph") are read; a row's
    ``launch`` is its timing's, "stream" where the file does not say, None when untimed."""
    doc = v5_doc()
    doc["settings"]["launch"] = "graph"
    ok = dict(algorithm="fa2", status="ok", samples_ms=[0.01, 0.011], model=model(), version=V5)
    results = doc["configs"][0]["results"]
    results.append(make_result("fa3", **ok, launch="graph"))
    results.append(make_result("fa1", **ok))
    assert results[-2]["timing"]["launch"] == "graph" and "launch" not in results[-1]["timing"]
    validate(doc)
    launch = {r["variant"]: r["launch"] for r in schema.rows(doc) if r["config_index"] == 0}
    assert launch == {"fa2": "stream", "standard": None, "torch_sdpa": None, "fa3": "graph",
                      "fa1": "stream"}
    for where in (doc["settings"], results[-2]["timing"]):
        where["launch"] = "replay"
        with pytest.raises(SchemaError, match=re.escape("launch: expected one of stream|graph")):
            validate(doc)
        where["launch"] = "stream"


def test_make_config_writes_what_v5_requires():
    kw = dict(B=2, H=8, N=128, d=64, causal=False, dtype="bf16", seed=1)
    v5 = schema.make_config(**kw, version=V5)
    assert (v5["H_kv"], v5["N_kv"], v5["page_size"], v5["kv_lengths"], v5["gpu"]) == (
        8, 128, 0, None, None)
    v4 = schema.make_config(**kw, version="fa-bench/4")
    assert "page_size" not in v4 and "kv_lengths" not in v4
    ragged = schema.make_config(**kw, N_kv=256, page_size=16, kv_lengths=(100, 256))
    assert (ragged["page_size"], ragged["kv_lengths"]) == (16, [100, 256])
    doc = schema.new_document("fa-bench --N 128", version=V5)
    doc["configs"].append(schema.make_config(**kw, version=V5, results=[
        make_result("fa2", algorithm="fa2", status="model_only", model=model(False),
                    version=V5)]))
    validate(doc)


def test_shape_text_names_pages_and_lengths():
    """fa-bench's console text: kv_lengths after N (N_kv), page after them, then d; the lengths
    listed for B <= 4, else MIN..MAX/sum=S."""
    c = {"B": 8, "H": 32, "H_kv": 8, "N": 1, "N_kv": 4096, "d": 128}
    assert schema.shape_text({**c, "page_size": 64, "kv_lengths": LENGTHS[:7] + [512]}) == (
        "B=8 H=32 H_kv=8 N=1 N_kv=4096 kv_lengths=512..4096/sum=18000 page=64 d=128")
    assert schema.shape_text({**c, "page_size": 64, "kv_lengths": LENGTHS}) == (
        "B=8 H=32 H_kv=8 N=1 N_kv=4096 kv_lengths=512..4096/sum=20000 page=64 d=128")
    two = {"B": 2, "H": 32, "N": 1, "N_kv": 4096, "d": 128}
    assert schema.shape_text({**two, "page_size": 0, "kv_lengths": [100, 4096]}) == (
        "B=2 H=32 N=1 N_kv=4096 kv_lengths=100,4096 d=128")
    assert schema.shape_text({**two, "page_size": 64, "kv_lengths": None}) == (
        "B=2 H=32 N=1 N_kv=4096 page=64 d=128")
    square = {"B": 4, "H": 32, "H_kv": 32, "N": 4096, "N_kv": 4096, "d": 128}
    assert schema.shape_text({**square, "page_size": 0, "kv_lengths": None}, V5) == (
        "B=4 H=32 N=4096 d=128")  # as in every version
    assert schema.shape_text({**square, "page_size": 64}, "fa-bench/4") == "B=4 H=32 N=4096 d=128"
    assert schema.kv_lengths_text([512, 4096, 1024, 2048, 4096]) == "512..4096/sum=11776"
    assert schema.kv_lengths_text([7]) == "7"


def test_identity_tells_pages_and_lengths_apart():
    """Two configurations that differ only by page_size or by kv_lengths are two; a /4
    configuration's key is its contiguous /5 counterpart's."""
    doc = v5_doc()
    base = doc["configs"][-1]
    keys = {schema.config_key(base, V5)}
    for change in ({"page_size": 0}, {"page_size": 128}, {"kv_lengths": None},
                   {"kv_lengths": [4096] * 8}, {"kv_lengths": LENGTHS[::-1]}):
        other = {**base, **change}
        key = schema.config_key(other, V5)
        assert key not in keys, change
        keys.add(key)
        doc["configs"].append(other)
    validate(doc)  # every one of them a configuration of its own
    assert schema.config_key(v4_doc()["configs"][2], "fa-bench/4") == schema.config_key(
        v5_doc()["configs"][2], V5)


def test_flops_convention_sums_each_sequence():
    """4·H·d·Σ_b pairs(N, L_b), pairs = N·L (causal: N·L − N²/2); without lengths apart
    4·B·H·d·pairs(N, N_kv)."""
    kw = dict(B=2, H=4, N=16, d=8, N_kv=64)
    assert schema.flops_convention(**kw, causal=False) == 4.0 * 2 * 4 * 16 * 64 * 8
    assert schema.flops_convention(**kw, causal=True) == 4.0 * 2 * 4 * (16 * 64 - 128) * 8
    assert schema.flops_convention(**kw, causal=False, kv_lengths=[20, 64]) == (
        4.0 * 4 * 16 * (20 + 64) * 8)
    assert schema.flops_convention(**kw, causal=True, kv_lengths=[20, 64]) == (
        4.0 * 4 * ((16 * 20 - 128) + (16 * 64 - 128)) * 8)
    assert schema.flops_convention(B=1, H=1, N=4, d=2, causal=True) == 4.0 * (16 - 8) * 2


def test_cli_table_names_pages_and_lengths(tmp_path):
    path = tmp_path / "v5.json"
    write_results(v5_doc(), path)
    run = run_reports(str(path))
    assert run.returncode == 0, run.stderr
    lines = [line for line in run.stdout.splitlines() if line.strip().startswith("fa2")]
    assert lines[0].split()[1:5] == [str(B), str(H), str(N), str(D)]  # square: as ever
    assert lines[3].split()[1:7] == ["1", "32", "1", "(N_kv", "4096)", "64"]
    assert ("8  32 (H_kv 8)  1 (N_kv ≤4096, lengths 512..4096/sum=20000, pages of 64)  64"
            in lines[4]), lines[4]


# --------------------------------------------------------------------------------------------
# Validation errors: each case mutates a valid document; the message must name the file and
# the offending key path.

R0 = "configs[0].results[0]"  # ok
R1 = "configs[0].results[1]"  # failed
R2 = "configs[0].results[2]"  # skipped


def _del(*keys):
    def f(doc):
        obj = doc
        for k in keys[:-1]:
            obj = obj[k]
        del obj[keys[-1]]
    return f


def _set(value, *keys):
    def f(doc):
        obj = doc
        for k in keys[:-1]:
            obj = obj[k]
        obj[keys[-1]] = copy.deepcopy(value)
    return f


def _res(i, *keys):
    return ("configs", 0, "results", i, *keys)


def _cfg(*keys):
    return ("configs", 0, *keys)


CASES = [
    # top level
    (_set([], "configs", 0), "configs[0]"),
    (_del("schema"), "schema"),
    (_set("fa-bench/99", "schema"), "schema"),
    (_del("configs", 0, "results", 0, "direction"), f"{R0}.direction"),  # a /2 row says its direction
    (_del("tool"), "tool"),
    (_set("fa-bench", "tool"), "tool"),
    (_del("tool", "name"), "tool.name"),
    (_set(1, "tool", "version"), "tool.version"),
    (_del("tool", "git_revision"), "tool.git_revision"),
    (_del("created_utc"), "created_utc"),
    (_set(5, "command_line"), "command_line"),
    (_del("complete"), "complete"),
    (_set("yes", "complete"), "complete"),
    (_del("device"), "device"),
    (_set([], "device"), "device"),
    (_del("device", "name"), "device.name"),
    (_del("device", "compute_capability"), "device.compute_capability"),
    (_set(0, "device", "sm_count"), "device.sm_count"),
    (_set("sm_90", "device", "compute_capability"), "device.compute_capability"),
    (_set("132", "device", "sm_count"), "device.sm_count"),
    (_del("settings"), "settings"),
    (_set(None, "settings"), "settings"),
    (_del("ceilings"), "ceilings"),
    (_del("configs"), "configs"),
    (_set({}, "configs"), "configs"),
    # configurations
    (_set(0, *_cfg("B")), "configs[0].B"),
    (_set(-1, *_cfg("H")), "configs[0].H"),
    (_set("17", *_cfg("N")), "configs[0].N"),
    (_set(1.5, *_cfg("d")), "configs[0].d"),
    (_set(True, *_cfg("B")), "configs[0].B"),
    (_del(*_cfg("d")), "configs[0].d"),
    (_set("true", *_cfg("causal")), "configs[0].causal"),
    (_set("fp32", *_cfg("dtype")), "configs[0].dtype"),
    (_del(*_cfg("seed")), "configs[0].seed"),
    (_set("1234", *_cfg("seed")), "configs[0].seed"),
    (_del(*_cfg("results")), "configs[0].results"),
    (_set(None, *_cfg("results")), "configs[0].results"),
    # results
    (_set("fa2", *_cfg("results", 1)), R1),
    (_del(*_res(0, "variant")), f"{R0}.variant"),
    (_set(2, *_res(0, "variant")), f"{R0}.variant"),
    (_del(*_res(0, "algorithm")), f"{R0}.algorithm"),
    (_set("fa3", *_res(0, "algorithm")), f"{R0}.algorithm"),
    (_set("no", *_res(0, "peer")), f"{R0}.peer"),
    (_del(*_res(0, "peer")), f"{R0}.peer"),
    (_set("bad", *_res(0, "status")), f"{R0}.status"),
    (_del(*_res(0, "status")), f"{R0}.status"),
    (_del(*_res(1, "reason")), f"{R1}.reason"),
    (_set(None, *_res(1, "reason")), f"{R1}.reason"),
    (_del(*_res(0, "tiles")), f"{R0}.tiles"),
    (_set(-1, *_res(0, "tiles", "block_q")), f"{R0}.tiles.block_q"),
    (_del(*_res(0, "verification")), f"{R0}.verification"),
    (_set([], *_res(0, "verification")), f"{R0}.verification"),
    (_del(*_res(0, "verification", "passed")), f"{R0}.verification.passed"),
    (_del(*_res(0, "timing")), f"{R0}.timing"),
    (_set("fast", *_res(0, "timing")), f"{R0}.timing"),
    (_del(*_res(0, "timing", "samples_ms")), f"{R0}.timing.samples_ms"),
    (_set(0.5, *_res(0, "timing", "samples_ms")), f"{R0}.timing.samples_ms"),
    (_set([0.1, "x"], *_res(0, "timing", "samples_ms")), f"{R0}.timing.samples_ms[1]"),
    (_set([], *_res(0, "timing", "samples_ms")), f"{R0}.timing.samples_ms"),
    (_del(*_res(0, "timing", "median_ms")), f"{R0}.timing.median_ms"),
    (_set(None, *_res(0, "timing", "median_ms")), f"{R0}.timing.median_ms"),
    (_del(*_res(0, "model")), f"{R0}.model"),
    (_set(None, *_res(2, "model")), f"{R2}.model"),
    (_set("1e9", *_res(0, "model", "flops_matrix")), f"{R0}.model.flops_matrix"),
    *[(_del(*_res(1, "model", k)), f"{R1}.model.{k}") for k in schema.MODEL_NUMBERS],
    (_del(*_res(0, "derived")), f"{R0}.derived"),
    (_set(3, *_res(0, "derived")), f"{R0}.derived"),
    # rules
    (_set("fa2", *_res(1, "variant")), f"{R1}.variant"),
    (_set("torch_sdpa", *_res(1, "variant")), f"{R2}.variant"),
    (_set(None, *_res(0, "timing")), f"{R0}.timing"),
    (_set(None, *_res(0, "derived")), f"{R0}.derived"),
    (_set({"samples_ms": [1.0], "median_ms": 1.0}, *_res(1, "timing")), f"{R1}.timing"),
    (_set({"tflops_convention": 1.0}, *_res(2, "derived")), f"{R2}.derived"),
    (_set(False, *_res(0, "verification", "passed")), f"{R0}.verification.passed"),
    (_set(True, *_res(1, "verification", "passed")), f"{R1}.verification.passed"),
    (_set(None, *_res(1, "verification")), f"{R1}.verification"),
    (_set(verification(False), *_res(2, "verification")), f"{R2}.verification.passed"),
]

# Impossible values (issue 13): each refused naming the file, the key and the problem.
PLACEMENT = {"basis": "counters", "intensity_dram": 500.0, "intensity_l2": 120.0,
             "attainable_tflops": 700.0, "fraction": 0.4, "bound": "compute"}


def _dup_config(doc):
    doc["configs"].append(copy.deepcopy(doc["configs"][0]))


def _counter(value):
    def f(doc):
        doc["configs"][0]["results"][0]["counters"] = {
            "status": "ok", "reason": "", "values": {"dram__bytes_read.sum": value}}
    return f


IMPOSSIBLE = [
    (_set([0.011, 0.0, 0.0112], *_res(0, "timing", "samples_ms")), f"{R0}.timing.samples_ms[1]",
     "expected a positive time, got 0.0"),
    (_set([0.011, -5.04], *_res(0, "timing", "samples_ms")), f"{R0}.timing.samples_ms[1]",
     "expected a positive time, got -5.04"),
    # 777777.5 is written as the literal 1e999 below: valid JSON syntax that parses to inf
    (_set([0.011, 777777.5], *_res(0, "timing", "samples_ms")), f"{R0}.timing.samples_ms[1]",
     "non-finite number inf"),
    (_set(-5.04, *_res(0, "timing", "median_ms")), f"{R0}.timing.median_ms",
     "expected a positive time, got -5.04"),
    (_set(0, *_res(0, "timing", "median_ms")), f"{R0}.timing.median_ms",
     "expected a positive time, got 0"),
    (_set(-1.0, *_res(0, "timing", "min_ms")), f"{R0}.timing.min_ms", "positive time"),
    (_set(-1.0, *_res(0, "model", "bytes_read")), f"{R0}.model.bytes_read", "a count >= 0"),
    (_set(-109.0, *_res(0, "derived", "tflops_convention")),
     f"{R0}.derived.tflops_convention", "a value >= 0"),
    (_counter(-2.0), f"{R0}.counters.values.dram__bytes_read.sum", "a counter value >= 0"),
    (_set({**dict.fromkeys(schema.MEASURED_NUMBERS, 1.0), "dram_bytes": -1.0}, *_res(0, "measured")),
     f"{R0}.measured.dram_bytes",
     "a measured value >= 0"),
    (_set(-0.1, *_res(0, "verification", "max_abs_error")), f"{R0}.verification.max_abs_error",
     ">= 0"),
    (_dup_config, "configs[2]", "duplicate configuration (B=2, H=3, N=17, d=64, causal=true, "
     'dtype="bf16"; also at configs[0])'),
    (_set({**PLACEMENT, "basis": "model"}, *_res(0, "placement")), f"{R0}.placement.basis",
     "expected one of counters|compulsory"),
    (_set({**PLACEMENT, "fraction": -0.1}, *_res(0, "placement")), f"{R0}.placement.fraction",
     ">= 0"),
    (_set({**PLACEMENT, "intensity_dram": 0.0}, *_res(0, "placement")),
     f"{R0}.placement.intensity_dram", "positive"),
    (_set({**PLACEMENT, "basis": "compulsory"}, *_res(0, "placement")),
     f"{R0}.placement.intensity_l2", "must be null when basis is 'compulsory'"),
    (_set({**PLACEMENT, "bound": "l2", "intensity_l2": None}, *_res(0, "placement")),
     f"{R0}.placement.intensity_l2", "must be a number when bound is 'l2', not null"),
    (_set({**PLACEMENT, "bound": "memory"}, *_res(0, "placement")), f"{R0}.placement.bound",
     "expected one of compute|dram|l2"),
    (_set(PLACEMENT, *_res(2, "placement")), f"{R2}.placement",
     "must be null when status is 'skipped', not an object"),
]


@pytest.mark.parametrize("mutate,key_path,problem", IMPOSSIBLE,
                         ids=[f"{i}:{c[1]}" for i, c in enumerate(IMPOSSIBLE)])
def test_impossible_values_refused(tmp_path, mutate, key_path, problem):
    doc = good_doc()
    mutate(doc)
    path = tmp_path / "impossible.json"
    path.write_text(json.dumps(doc, indent=1).replace("777777.5", "1e999"))
    with pytest.raises(SchemaError) as info:
        load_results(path)
    assert str(info.value).startswith(f"{path}: {key_path}: "), str(info.value)
    assert problem in str(info.value)
    run = run_reports(str(path))
    assert run.returncode == 2 and run.stderr.count("\n") == 1 and "Traceback" not in run.stderr


def test_placement_and_zero_counters_accepted(tmp_path):
    """The checks are not too strict: a valid placement (and a compulsory one with a null L2
    intensity), zero counters and errors, and a second configuration differing in one field."""
    doc = good_doc()
    doc["configs"][0]["results"][0]["placement"] = PLACEMENT
    doc["configs"][0]["results"][0]["counters"] = {
        "status": "ok", "reason": "", "values": {"sm__ops_path_tensor_src_fp8.sum": 0.0}}
    other = copy.deepcopy(doc["configs"][0])
    other["causal"] = False
    other["results"][0]["placement"] = {**PLACEMENT, "basis": "compulsory", "intensity_l2": None}
    doc["configs"].append(other)
    path = tmp_path / "fine.json"
    path.write_text(json.dumps(doc))
    assert load_results(path)["configs"][2]["results"][0]["placement"]["basis"] == "compulsory"


# The gate's fixtures that are broken on purpose, with what the reader must say about each.
BROKEN_FIXTURES = {
    "gate-truncated.json": "invalid JSON",
    "gate-schema-unknown.json": "unknown version",
    "gate-duplicate-row.json": "appears twice",
    "gate-negative-sample.json": r"samples_ms\[5\]",
}
# Fixtures in tests/data that are not result files (scripts/spill_check.py's budget).
NOT_RESULT_FILES = {"spill-budget.json"}


@pytest.mark.parametrize("name", sorted(p.name for p in (REPO_ROOT / "tests" / "data").glob("*.json")
                                        if p.name not in set(BROKEN_FIXTURES) | NOT_RESULT_FILES))
def test_committed_files_still_load(name):
    load_results(REPO_ROOT / "tests" / "data" / name)


@pytest.mark.parametrize("name,says", sorted(BROKEN_FIXTURES.items()))
def test_broken_fixtures_are_refused(name, says):
    with pytest.raises(SchemaError, match=says):
        load_results(REPO_ROOT / "tests" / "data" / name)


@pytest.mark.parametrize("mutate,key_path", CASES, ids=[f"{i}:{c[1]}" for i, c in enumerate(CASES)])
def test_validation_error_names_file_and_key(tmp_path, mutate, key_path):
    doc = good_doc()
    mutate(doc)
    path = tmp_path / "bad_result.json"
    path.write_text(json.dumps(doc, indent=1))
    with pytest.raises(SchemaError) as info:
        load_results(path)
    message = str(info.value)
    assert message.startswith(f"{path}: "), message
    assert key_path in message, message
    assert info.value.path.startswith(key_path), message
    # validate() without a file names the source it is given.
    with pytest.raises(SchemaError, match="^mydoc: "):
        validate(doc, source="mydoc")


def test_status_message_lists_allowed_values(tmp_path):
    doc = good_doc()
    doc["configs"][0]["results"][0]["status"] = "bad"
    path = tmp_path / "r.json"
    path.write_text(json.dumps(doc))
    with pytest.raises(SchemaError) as info:
        load_results(path)
    assert str(info.value) == (
        f"{path}: configs[0].results[0].status: expected one of "
        "ok|failed|skipped|unsupported|error|model_only|interrupted, got 'bad'"
    )


def test_unknown_keys_allowed(tmp_path):
    doc = good_doc()
    doc["future_top_level"] = {"x": 1}
    doc["configs"][0]["layout"] = "bhsd"
    doc["configs"][0]["results"][0]["timing"]["power_w"] = 500.0
    doc["configs"][0]["results"][0]["model"]["bytes_l2"] = 1.0
    path = tmp_path / "r.json"
    write_results(doc, path)
    assert load_results(path) == doc


def test_null_device_allowed(tmp_path):
    doc = schema.new_document("fa-bench --model-only")
    assert doc["device"] is None and doc["no_gpu_reason"]
    path = tmp_path / "r.json"
    write_results(doc, path)
    assert load_results(path)["device"] is None


@pytest.mark.parametrize("version", ["fa-bench/6", "fa-bench/0", "", None, 1])
def test_unknown_schema_version_refused(tmp_path, version):
    doc = good_doc()
    doc["schema"] = version
    path = tmp_path / "future.json"
    path.write_text(json.dumps(doc))
    with pytest.raises(SchemaError) as info:
        load_results(path)
    message = str(info.value)
    assert "future.json" in message and "schema" in message and "fa-bench/1" in message


def test_unknown_schema_checked_before_structure(tmp_path):
    path = tmp_path / "future.json"
    path.write_text(json.dumps({"schema": "fa-bench/6", "runs": []}))
    with pytest.raises(SchemaError, match=r"future\.json: schema: unknown version 'fa-bench/6'"):
        load_results(path)


def test_truncated_json_refused(tmp_path):
    full = json.dumps(good_doc(), indent=1)
    path = tmp_path / "truncated.json"
    path.write_text(full[: len(full) // 2])
    with pytest.raises(SchemaError) as info:
        load_results(path)
    message = str(info.value)
    assert message.startswith(f"{path}: invalid JSON at line ")
    assert "column" in message


@pytest.mark.parametrize("content", [b"", b"[1, 2", b'{"schema": NaN}', b"\xff\xfe{}"])
def test_malformed_files_refused(tmp_path, content):
    path = tmp_path / "broken.json"
    path.write_bytes(content)
    with pytest.raises(SchemaError, match=r"broken\.json: "):
        load_results(path)


def test_not_an_object(tmp_path):
    path = tmp_path / "list.json"
    path.write_text("[]")
    with pytest.raises(SchemaError, match=r"list\.json: document: expected an object"):
        load_results(path)


def test_nan_in_memory_refused_by_validate():
    doc = good_doc()
    doc["configs"][0]["results"][0]["timing"]["samples_ms"][1] = float("inf")
    with pytest.raises(SchemaError, match=r"configs\[0\]\.results\[0\]\.timing\.samples_ms\[1\]"):
        validate(doc)


# --------------------------------------------------------------------------------------------
# Writer helpers


def test_make_result_statistics_match_numpy():
    np = pytest.importorskip("numpy")
    rng = random.Random(1234)
    for n in [1, 2, 3, 4, 5, 7, 10, 64, 101, 1000]:
        samples = [rng.lognormvariate(0.0, 0.3) for _ in range(n)]
        r = make_result("fa2", algorithm="fa2", status="ok", samples_ms=samples, model=model(),
                        l2="warm", warmup=7)
        t = r["timing"]
        assert t["samples_ms"] == samples  # launch order kept, not sorted
        assert t["l2"] == "warm" and t["warmup"] == 7
        a = np.asarray(samples)
        q1, median, q3 = np.quantile(a, [0.25, 0.5, 0.75])  # type 7, linear
        assert t["median_ms"] == pytest.approx(median, rel=1e-12, abs=0)
        assert t["q1_ms"] == pytest.approx(q1, rel=1e-12, abs=0)
        assert t["q3_ms"] == pytest.approx(q3, rel=1e-12, abs=0)
        assert t["min_ms"] == a.min() and t["max_ms"] == a.max()
        assert t["mean_ms"] == pytest.approx(a.mean(), rel=1e-12)
        stddev = a.std(ddof=1) if n > 1 else 0.0
        assert t["stddev_ms"] == pytest.approx(stddev, rel=1e-9, abs=1e-15)
        assert t["relative_iqr"] == pytest.approx((q3 - q1) / median, rel=1e-9, abs=1e-15)
        d = r["derived"]
        assert d["tflops_convention"] == pytest.approx(
            model()["flops_convention"] / (t["median_ms"] * 1e-3) / 1e12)
        assert d["bound"] == "" and d["roofline_attainable_tflops"] == 0.0


def test_summarize_small_cases():
    s = schema.summarize([3.0, 1.0, 2.0, 4.0])
    assert (s["min_ms"], s["q1_ms"], s["median_ms"], s["q3_ms"], s["max_ms"]) == (
        1.0, 1.75, 2.5, 3.25, 4.0)
    assert s["mean_ms"] == 2.5
    assert s["stddev_ms"] == pytest.approx(math.sqrt(5.0 / 3.0))
    assert s["relative_iqr"] == pytest.approx(1.5 / 2.5)
    one = schema.summarize([0.5])
    assert one["stddev_ms"] == 0.0 and one["relative_iqr"] == 0.0 and one["median_ms"] == 0.5


def test_derive_roofline():
    m = model()
    d = schema.derive(m, 0.01, peak_flops_per_s=989.4e12, bandwidth_bytes_per_s=4.8e12)
    nbytes = m["bytes_read"] + m["bytes_written"]
    intensity = m["flops_matrix"] / nbytes
    assert d["arithmetic_intensity"] == pytest.approx(intensity)
    assert d["effective_gbps"] == pytest.approx(nbytes / 1e-5 / 1e9)
    assert d["roofline_attainable_tflops"] == pytest.approx(min(989.4, intensity * 4.8))
    assert d["bound"] == ("memory" if intensity * 4.8e12 < 989.4e12 else "compute")
    assert d["roofline_fraction"] == pytest.approx(
        d["tflops_model"] / d["roofline_attainable_tflops"])


def test_make_result_fills_model_defaults():
    r = make_result("x", algorithm="fa2", status="skipped", model={"flops_matrix": 5.0})
    assert r["model"]["flops_matrix"] == 5.0
    for key in (*schema.MODEL_NUMBERS[1:], "flops_nonmatrix", "bytes_asymptotic"):
        assert r["model"][key] == 0.0
    assert r["model"]["terms"] == []
    assert r["tiles"] == {"block_q": 0, "block_kv": 0}
    assert r["verification"] is None and r["timing"] is None and r["derived"] is None


def test_make_result_refuses_rule_breaks():
    with pytest.raises(SchemaError, match="timing"):
        make_result("fa2", algorithm="fa2", status="ok", model=model())  # no samples
    with pytest.raises(SchemaError, match="timing"):
        make_result("fa2", algorithm="fa2", status="skipped", samples_ms=[1.0], model=model())
    with pytest.raises(SchemaError, match="verification"):
        make_result("fa2", algorithm="fa2", status="failed", model=model())
    with pytest.raises(SchemaError, match="status"):
        make_result("fa2", algorithm="fa2", status="great", model=model())


def test_python_fixture_script(tmp_path):
    out = tmp_path / "python_fixture.json"
    run = subprocess.run([sys.executable, str(REPO_ROOT / "scripts" / "make_python_fixture.py"),
                          str(out)], capture_output=True, text=True, cwd=tmp_path)
    assert run.returncode == 0, run.stderr
    doc = load_results(out)
    assert doc["device"]["name"] == "NVIDIA H200"
    [config] = doc["configs"]
    assert (config["B"], config["H"], config["N"], config["d"]) == (2, 3, 17, 64)
    assert config["causal"] is True and config["dtype"] == "bf16"
    assert [r["status"] for r in config["results"]] == ["ok", "failed", "skipped"]
    assert len(config["results"][0]["timing"]["samples_ms"]) >= 3
    # Deterministic: a second run writes the same bytes.
    out2 = tmp_path / "again.json"
    subprocess.run([sys.executable, str(REPO_ROOT / "scripts" / "make_python_fixture.py"),
                    str(out2)], check=True, cwd=tmp_path)
    assert out.read_bytes() == out2.read_bytes()


# --------------------------------------------------------------------------------------------
# python -m reports


def run_reports(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "reports", *args], cwd=REPO_ROOT,
                          capture_output=True, text=True)


def test_cli_valid_file(tmp_path):
    path = tmp_path / "good.json"
    write_results(good_doc(), path)
    run = run_reports(str(path))
    assert run.returncode == 0, run.stderr
    assert run.stderr == ""
    for text in ("variant", "median_ms", "fa2", "standard", "torch_sdpa", "NVIDIA H200"):
        assert text in run.stdout


def test_cli_bad_file(tmp_path):
    good = tmp_path / "good.json"
    write_results(good_doc(), good)
    bad = tmp_path / "bad.json"
    doc = good_doc()
    doc["configs"][0]["results"][0]["status"] = "bad"
    bad.write_text(json.dumps(doc))
    run = run_reports(str(good), str(bad))
    assert run.returncode == 2
    lines = run.stderr.splitlines()
    assert len(lines) == 1
    assert lines[0].startswith(f"error: {bad}: configs[0].results[0].status: ")
    assert "fa2" in run.stdout  # the good file is still reported


def test_cli_missing_and_truncated_files(tmp_path):
    trunc = tmp_path / "trunc.json"
    trunc.write_text('{"schema": "fa-bench/1", ')
    run = run_reports(str(tmp_path / "absent.json"), str(trunc))
    assert run.returncode == 2
    lines = run.stderr.splitlines()
    assert len(lines) == 2
    assert lines[0].startswith(f"error: {tmp_path / 'absent.json'}: ")
    assert lines[1].startswith(f"error: {trunc}: invalid JSON")


def test_cli_no_arguments():
    assert run_reports().returncode == 2


# --------------------------------------------------------------------------------------------
# The C++ writer's output


def test_reads_cpp_output(tmp_path):
    binary = fa_bench_path()
    if binary is None:
        pytest.skip("fa-bench binary not built: looked for $FA_BENCH_BIN, then "
                    f"{REPO_ROOT / 'build' / 'bin' / 'fa-bench'}")
    out = tmp_path / "cpp.json"
    run = subprocess.run([str(binary), "--model-only", "--N", "128,256", "--d", "64",
                          "--variants", "all", "--json", str(out)],
                         capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, f"fa-bench failed ({run.returncode}):\n{run.stdout}\n{run.stderr}"
    doc = load_results(out)
    assert doc["schema"] == "fa-bench/5" and doc["tool"]["name"] == "fa-bench"
    assert doc["complete"] is True
    assert sorted({c["N"] for c in doc["configs"]}) == [128, 256]
    variants = set()
    for config in doc["configs"]:
        assert config["d"] == 64
        b, h, n, d = config["B"], config["H"], config["N"], config["d"]
        expected = 4.0 * b * h * n * n * d * (0.5 if config["causal"] else 1.0)
        for result in config["results"]:
            variants.add(result["variant"])
            assert result["status"] != "ok"  # nothing is timed in a model-only run
            assert result["timing"] is None and result["derived"] is None
            if result["peer"]:
                continue
            m = result["model"]
            assert m["flops_convention"] == pytest.approx(expected, rel=1e-12)
            if result["status"] == "model_only":
                assert m["flops_matrix"] > 0
                assert m["bytes_read"] + m["bytes_written"] >= m["bytes_compulsory"] > 0
    assert {"standard", "fa2"} <= variants
    assert run_reports(str(out)).returncode == 0


@pytest.mark.parametrize(
    "name, rows_expected",
    [
        ("sweep-standard-fa2-h200.json", 24),
        ("sweep-4variants-h200.json", 48),
        ("outlier-inputs-h200.json", 12),
        ("counters-4variants-h200.json", 32),
        ("fa2-order-both-h200.json", 8),
    ],
)
def test_reads_real_h200_results(name, rows_expected):
    """Real fa-bench runs on the H200 (committed fixtures) validate, and their numbers hang together."""
    path = Path(__file__).resolve().parents[1] / "data" / name
    doc = schema.load_results(path)
    assert doc["device"]["name"] == "NVIDIA H200"
    flat = schema.rows(doc)
    assert len(flat) == rows_expected
    for row in flat:
        assert row["status"] == "ok"
        factor = 0.5 if row["causal"] else 1.0
        expected = 4 * row["B"] * row["H"] * row["N"] ** 2 * row["d"] * factor
        assert row["model"]["flops_convention"] == expected
        # The stored derived throughput is the convention FLOPs over the stored median.
        tflops = expected / (row["timing"]["median_ms"] * 1e-3) * 1e-12
        assert abs(row["derived"]["tflops_convention"] - tflops) < 1e-6 * tflops
        ver = row["verification"]
        measured = ver["rmse"] if ver.get("metric") == "rmse" else ver["max_abs_error"]
        assert measured <= ver["tolerance"]
