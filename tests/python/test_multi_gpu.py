"""Merged result files (``fa-bench merge``, ``--devices``; docs/multi-gpu.md) read by the Python
side: the gate and the reports take a merged file, several GPU models in one file sit side by
side, every configuration's GPU reaches the rows, and the JSON Schema holds fa-bench/3."""

from __future__ import annotations

import copy
import json
import subprocess
from pathlib import Path

import pytest
from conftest import fa_bench

from reports import json_schema, schema
from reports.data import Results, Run

REPO_ROOT = Path(__file__).resolve().parents[2]
DATA = REPO_ROOT / "tests" / "data"
BASE = DATA / "gate-same-build-a-h200.json"  # two configurations, counters, an H200


def run(*args) -> subprocess.CompletedProcess:
    return subprocess.run([str(fa_bench()), *map(str, args)], capture_output=True, text=True,
                          timeout=120)


def halves(tmp_path: Path, doc: dict) -> tuple[Path, Path]:
    """The file split as two shards would write it: the first configuration, then the rest."""
    paths = []
    for i, configs in enumerate((doc["configs"][:1], doc["configs"][1:])):
        part = copy.deepcopy(doc)
        part["configs"] = configs
        paths.append(tmp_path / f"part{i}.json")
        paths[-1].write_text(json.dumps(part))
    return paths[0], paths[1]


def test_gate_passes_a_merged_file_against_the_whole(tmp_path):
    a, b = halves(tmp_path, json.loads(BASE.read_text()))
    merged = tmp_path / "merged.json"
    out = run("merge", b, a, "-o", merged)
    assert out.returncode == 0, out.stderr
    doc = schema.load_results(merged)
    assert doc["schema"] == "fa-bench/5"
    assert json_schema.problems(doc) == []
    assert all(c["gpu"]["name"] == "NVIDIA H200" for c in doc["configs"])
    gate = run("gate", "--baseline", BASE, "--current", merged)
    assert gate.returncode == 0, gate.stdout + gate.stderr
    # The check can fail: a merged file missing a configuration does not pass.
    short = run("gate", "--baseline", BASE, "--current", a)
    assert short.returncode != 0


def two_models(tmp_path: Path) -> Path:
    doc = json.loads(BASE.read_text())
    other = copy.deepcopy(doc)
    other["device"]["name"] = "NVIDIA H100 80GB HBM3"
    other["device"]["uuid"] = "GPU-00000000-test-copy-of-the-h200-file"
    first, second = tmp_path / "h200.json", tmp_path / "h100.json"
    first.write_text(json.dumps(doc))
    second.write_text(json.dumps(other))
    merged = tmp_path / "both.json"
    out = run("merge", first, second, "-o", merged)
    assert out.returncode == 0, out.stderr
    assert "2 GPU(s)" in out.stdout
    return merged


def test_two_gpu_models_side_by_side(tmp_path):
    merged = two_models(tmp_path)
    doc = schema.load_results(merged)
    assert json_schema.problems(doc) == []
    assert [d["name"] for d in doc["devices"]] == ["NVIDIA H200", "NVIDIA H100 80GB HBM3"]
    assert len(doc["configs"]) == 4  # each shape on each GPU
    rows = schema.rows(doc)
    assert {r["gpu_name"] for r in rows} == {"NVIDIA H200", "NVIDIA H100 80GB HBM3"}
    assert all(r["gpu_uuid"] for r in rows)
    res = Results([Run(str(merged), doc)])
    assert res.devices() == ["NVIDIA H200", "NVIDIA H100 80GB HBM3"]
    assert {r["device_name"] for r in res.rows} == set(res.devices())
    # The reports render it.
    import reports.__main__ as cli

    assert cli.main([str(merged), "-o", str(tmp_path / "report")]) == 0
    text = (tmp_path / "report" / "report.md").read_text()
    assert "NVIDIA H200" in text and "NVIDIA H100 80GB HBM3" in text


def test_schema_requires_the_gpu_in_v3_and_refuses_a_configuration_twice(tmp_path):
    doc = schema.load_results(two_models(tmp_path))
    broken = copy.deepcopy(doc)
    del broken["configs"][0]["gpu"]
    assert json_schema.problems(broken)
    with pytest.raises(schema.SchemaError, match=r"configs\[0\]\.gpu: missing"):
        schema.validate(broken)
    twice = copy.deepcopy(doc)
    twice["configs"].append(copy.deepcopy(twice["configs"][0]))
    assert any("duplicate configuration" in m for _, m in json_schema.problems(twice))
    with pytest.raises(schema.SchemaError, match="duplicate configuration"):
        schema.validate(twice)
    # The same shape on another GPU is not a duplicate.
    other = copy.deepcopy(doc)
    other["configs"] = [c for c in other["configs"]
                        if c["gpu"]["uuid"] == doc["devices"][0]["uuid"]]
    other["configs"].append(copy.deepcopy(doc["configs"][1]))
    assert json_schema.problems(other) == []
    shard = copy.deepcopy(doc)
    shard["shard"] = {"index": 2, "count": 2}
    assert json_schema.problems(shard)
    with pytest.raises(schema.SchemaError, match="shard.index"):
        schema.validate(shard)
