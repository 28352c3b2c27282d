"""schema/fa-bench-result.schema.json, the one definition of the result file, run by jsonschema
(reports/json_schema.py): the C++ writer's output, the Python writer's output and every committed
result file validate against it; the gate's broken-on-purpose fixtures and mutated documents do
not, each refused at its key; and the leaf tests that speed the check up give jsonschema's own
verdict (the same errors) on every document here."""

from __future__ import annotations

import copy
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import test_schema as ts  # the fa-bench/1 document and its mutations (tests/python/test_schema.py)

from reports import json_schema, schema
from reports.schema import SchemaError, make_result, read_document, validate, write_results

REPO_ROOT = Path(__file__).resolve().parents[2]
DATA = REPO_ROOT / "tests" / "data"
V2, V3, V4, V5 = "fa-bench/2", "fa-bench/3", "fa-bench/4", "fa-bench/5"
GPU = {"uuid": "GPU-0", "name": "NVIDIA H200"}


def kc(bq=128, bk=64, stages=2, warpgroups=0, cluster=(1, 1, 1)) -> dict:
    return {"block_q": bq, "block_kv": bk, "stages": stages, "warpgroups": warpgroups,
            "cluster": list(cluster)}


def good_doc_v2() -> dict:
    """A fa-bench/2 document with every optional part: two rows of one variant told apart by
    their options, a peer without a kernel configuration, counters, measured, placement and a
    gate calibration."""
    doc = schema.new_document("fa-bench --N 17", device=ts.good_doc()["device"], version=V2)
    ok = dict(algorithm="fa2", status="ok", verification=ts.verification(True),
              samples_ms=[0.011, 0.0105, 0.0112], model=ts.model(), version=V2)
    r0 = make_result("fa2", **ok, kernel_config=kc(), options={"block_order": "blocks"})
    r0["counters"] = {"status": "ok", "reason": "", "collect_seconds": 0.2,
                      "values": {"dram__bytes_read.sum": 3e6},
                      "kernels": [{"name": "main", "values": {"dram__bytes_read.sum": 3e6}}]}
    r0["measured"] = {k: 1.0 for k in schema.MEASURED_NUMBERS}
    r0["placement"] = dict(ts.PLACEMENT)
    r1 = make_result("fa2", **ok, kernel_config=kc(), options={"block_order": "heads"})
    r2 = make_result("fa3", **{**ok, "algorithm": "fa2"},
                     kernel_config=kc(128, 128, 3, 2, (2, 1, 1)))
    r3 = make_result("cudnn", **ok, peer=True)  # kernel_config null: not ours to choose
    r4 = make_result("fa2", algorithm="fa2", status="unsupported", reason="no backward yet",
                     model=ts.model(), version=V2, direction="backward", kernel_config=kc(),
                     options={"block_order": "blocks"})
    doc["configs"].append(schema.make_config(B=2, H=3, N=17, d=64, causal=True, dtype="bf16",
                                             seed=1234, results=[r0, r1, r2, r3, r4]))
    doc["gate_calibration"] = {
        "schema": "fa-bench-gate-calibration/1", "rule": "tolerance = max(floor, 2 x ...)",
        "runs": ["a.json", "b.json"],
        "rows": [{"row": "fa2 B=2 H=3 N=17 d=64 causal=1 bf16",
                  "tolerances": {"time": 0.02, "dram_bytes": 0.02},
                  "observed": {"time": 0.004, "dram_bytes": 0.0}}]}
    return doc


def good_doc_v3() -> dict:
    """good_doc_v2 as fa-bench/3: its configuration says the GPU it ran on."""
    doc = good_doc_v2()
    doc["schema"] = V3
    doc["configs"][0]["gpu"] = dict(GPU)
    return doc


def good_doc_v4() -> dict:
    """fa-bench/4: good_doc_v3's configuration, square (H_kv = H, N_kv = N); a grouped-query one
    (H=32, H_kv=8); a decode one (N=1, N_kv=4096); each with a model-only fa2 row."""
    doc = good_doc_v3()
    doc["schema"] = V4
    square = doc["configs"][0]
    doc["configs"][0] = schema.make_config(
        **{k: square[k] for k in ("B", "H", "N", "d", "causal", "dtype", "seed", "results")},
        gpu=dict(GPU), version=V4)
    for shape in ({"B": 1, "H": 32, "H_kv": 8, "N": 4096}, {"B": 8, "H": 32, "N": 1, "N_kv": 4096}):
        row = make_result("fa2", algorithm="fa2", status="model_only", model=ts.model(),
                          version=V4, kernel_config=kc(), options={"block_order": "blocks"})
        doc["configs"].append(schema.make_config(**shape, d=128, causal=True, dtype="bf16",
                                                 seed=1234, gpu=dict(GPU), results=[row],
                                                 version=V4))
    return doc


def good_doc_v5() -> dict:
    """fa-bench/5: good_doc_v4's configurations, K/V contiguous and every sequence N_kv long
    (page_size 0, kv_lengths null), and a paged, ragged decode one (8 sequences of their own
    lengths up to 4096, pages of 64 rows), with a timed row launched from a CUDA graph."""
    doc = good_doc_v4()
    doc["schema"] = V5
    doc["settings"]["launch"] = "graph"
    for c in doc["configs"]:
        c.update(page_size=0, kv_lengths=None)
    row = make_result("fa2", algorithm="split_kv", status="ok", samples_ms=[0.02, 0.021],
                      model=ts.model(), verification=ts.verification(True), version=V5,
                      kernel_config=kc(), options={"block_order": "blocks"}, launch="graph")
    doc["configs"].append(schema.make_config(
        B=8, H=32, H_kv=8, N=1, N_kv=4096, page_size=64,
        kv_lengths=[512, 4096, 1024, 2048, 4096, 3000, 2712, 2512], d=128, causal=True,
        dtype="bf16", seed=1234, gpu=dict(GPU), results=[row], version=V5))
    return doc


def both(doc_text: str, tmp_path: Path) -> tuple[str | None, list[tuple[str, str]]]:
    """The reader's problem (None: valid) and every problem json_schema finds, for one file;
    and jsonschema alone (without the leaf tests) finds the same errors as the fast check."""
    path = tmp_path / "doc.json"
    path.write_text(doc_text)
    try:
        schema.load_results(path)
        first = None
    except SchemaError as e:
        first = e.path or "document"
    doc = read_document(path)
    if json_schema.version_problem(doc) is None:
        def errors(fast):
            return sorted((list(e.absolute_path), e.message)
                          for e in json_schema.validator((), fast).iter_errors(doc))
        assert errors(True) == errors(False)
    return first, json_schema.problems(doc)


# -- documents both must accept ----------------------------------------------------------------


def _v1_with_v2_keys(doc):
    r = doc["configs"][0]["results"][0]
    r.update(direction="forward", kernel_config=kc(), options={"order": "heads", "x": 1, "y": True})


def _v2_same_variant_other_direction(doc):
    r = copy.deepcopy(doc["configs"][0]["results"][1])
    r.update(direction="backward", status="skipped", reason="", timing=None, derived=None)
    r.pop("placement", None)
    doc["configs"][0]["results"].append(r)


def _v2_default_config(doc):
    rs = doc["configs"][0]["results"]
    rs[0]["default_config"] = True
    rs[1]["default_config"] = False


def _v2_default_options(doc):
    rs = doc["configs"][0]["results"]
    rs[0]["default_options"] = True
    rs[1]["default_options"] = False


def _calibration_without_observed(doc):
    del doc["gate_calibration"]["rows"][0]["observed"]


def _worst_row_minus_one(doc):
    doc["configs"][0]["results"][0]["verification"].update(worst_head=-1, worst_row=-1,
                                                            worst_row_ratio=None)


def _placement_compulsory(doc):
    doc["configs"][0]["results"][0]["placement"] = {**ts.PLACEMENT, "basis": "compulsory",
                                                    "intensity_l2": None}


def _v3_unknown_h_kv_key(doc):
    doc["configs"][0]["H_kv"] = "eight"  # an unknown key before fa-bench/4: anything goes


def _v4_other_h_kv(doc):
    other = copy.deepcopy(doc["configs"][1])  # the same shape but for its K/V heads
    other["H_kv"] = 4
    doc["configs"].append(other)


def _v4_other_n_kv(doc):
    other = copy.deepcopy(doc["configs"][2])  # the same shape but for its K/V length
    other["N_kv"] = 8192
    doc["configs"].append(other)


def _v4_multi_query(doc):
    doc["configs"][1]["H_kv"] = 1


def _v4_unknown_cache_keys(doc):
    doc["configs"][0].update(page_size=3, kv_lengths="many")  # unknown keys before fa-bench/5


def _v5_other_page_size(doc):
    other = copy.deepcopy(doc["configs"][3])  # the same shape and lengths but for its pages
    other["page_size"] = 128
    doc["configs"].append(other)


def _v5_other_kv_lengths(doc):
    other = copy.deepcopy(doc["configs"][3])  # the same shape and pages but for its lengths
    other["kv_lengths"][0] = 513
    doc["configs"].append(other)


def _v5_full_lengths_page_1(doc):
    doc["configs"][3].update(page_size=1, kv_lengths=[4096] * 8)


GOOD = [
    ("v1", ts.good_doc, None),
    ("v1 with v2 keys", ts.good_doc, _v1_with_v2_keys),
    ("v1 null device", lambda: schema.new_document("fa-bench --model-only"), None),
    ("v2", good_doc_v2, None),
    ("v2 other direction", good_doc_v2, _v2_same_variant_other_direction),
    ("v2 default_config", good_doc_v2, _v2_default_config),
    ("v2 default_options", good_doc_v2, _v2_default_options),
    ("v2 calibration without observed", good_doc_v2, _calibration_without_observed),
    ("v2 worst row -1, null ratio", good_doc_v2, _worst_row_minus_one),
    ("v2 compulsory placement", good_doc_v2, _placement_compulsory),
    ("v3", good_doc_v3, None),
    ("v3 unknown H_kv key", good_doc_v3, _v3_unknown_h_kv_key),
    ("v4 square, GQA and decode", good_doc_v4, None),
    ("v4 other H_kv is another configuration", good_doc_v4, _v4_other_h_kv),
    ("v4 other N_kv is another configuration", good_doc_v4, _v4_other_n_kv),
    ("v4 multi-query", good_doc_v4, _v4_multi_query),
    ("v4 unknown page_size and kv_lengths keys", good_doc_v4, _v4_unknown_cache_keys),
    ("v5 contiguous, paged and ragged", good_doc_v5, None),
    ("v5 other page_size is another configuration", good_doc_v5, _v5_other_page_size),
    ("v5 other kv_lengths is another configuration", good_doc_v5, _v5_other_kv_lengths),
    ("v5 lengths all N_kv, page 1", good_doc_v5, _v5_full_lengths_page_1),
]


@pytest.mark.parametrize("make,change", [g[1:] for g in GOOD], ids=[g[0] for g in GOOD])
def test_both_accept(tmp_path, make, change):
    doc = make()
    if change:
        change(doc)
    first, problems = both(json.dumps(doc, indent=1), tmp_path)
    assert first is None and problems == [], (first, problems)


# -- documents both must refuse, at the same key ----------------------------------------------


def _r2(i, *keys):
    return ("configs", 0, "results", i, *keys)


def _v2_duplicate_identity(doc):
    rs = doc["configs"][0]["results"]
    rs[1]["options"] = dict(rs[0]["options"])


def _calibration_duplicate_row(doc):
    rows = doc["gate_calibration"]["rows"]
    rows.append(copy.deepcopy(rows[0]))


V2_BAD = [
    (ts._del(*_r2(0, "direction")), "configs[0].results[0].direction"),
    (ts._set("sideways", *_r2(0, "direction")), "configs[0].results[0].direction"),
    (ts._del(*_r2(0, "kernel_config")), "configs[0].results[0].kernel_config"),
    (ts._del(*_r2(0, "options")), "configs[0].results[0].options"),
    (ts._set([], *_r2(0, "options")), "configs[0].results[0].options"),
    (ts._set({"order": None}, *_r2(0, "options")), "configs[0].results[0].options.order"),
    (ts._set({"order": [1]}, *_r2(0, "options")), "configs[0].results[0].options.order"),
    (ts._set("128x64", *_r2(0, "kernel_config")), "configs[0].results[0].kernel_config"),
    (ts._del(*_r2(0, "kernel_config", "stages")), "configs[0].results[0].kernel_config.stages"),
    (ts._set(0, *_r2(0, "kernel_config", "block_q")), "configs[0].results[0].kernel_config.block_q"),
    (ts._set(0, *_r2(0, "kernel_config", "stages")), "configs[0].results[0].kernel_config.stages"),
    (ts._set(-1, *_r2(0, "kernel_config", "warpgroups")),
     "configs[0].results[0].kernel_config.warpgroups"),
    (ts._set([1, 1], *_r2(0, "kernel_config", "cluster")),
     "configs[0].results[0].kernel_config.cluster"),
    (ts._set([1, 0, 1], *_r2(0, "kernel_config", "cluster")),
     "configs[0].results[0].kernel_config.cluster[1]"),
    (ts._set(2.0, *_r2(0, "kernel_config", "block_kv")),
     "configs[0].results[0].kernel_config.block_kv"),
    (_v2_duplicate_identity, "configs[0].results[1].variant"),
    (ts._set(1, *_r2(0, "default_config")), "configs[0].results[0].default_config"),
    (ts._set(None, *_r2(0, "default_config")), "configs[0].results[0].default_config"),
    (ts._set("yes", *_r2(0, "default_options")), "configs[0].results[0].default_options"),
    (ts._set(None, *_r2(0, "default_options")), "configs[0].results[0].default_options"),
    (ts._set("bad", *_r2(0, "counters", "status")), "configs[0].results[0].counters.status"),
    (ts._set(None, *_r2(0, "counters", "values", "dram__bytes_read.sum")),
     "configs[0].results[0].counters.values.dram__bytes_read.sum"),
    (ts._del(*_r2(0, "measured", "fp32_flops")), "configs[0].results[0].measured.fp32_flops"),
    (ts._set(-2, *_r2(0, "verification", "worst_head")),
     "configs[0].results[0].verification.worst_head"),
    (ts._set(-2, *_r2(0, "verification", "worst_row")), "configs[0].results[0].verification.worst_row"),
    (ts._set("x", *_r2(0, "verification", "max_abs_error")),
     "configs[0].results[0].verification.max_abs_error"),
    (ts._del(*_r2(0, "verification", "rmse")), "configs[0].results[0].verification.rmse"),
    (ts._set("rel", *_r2(0, "verification", "metric")), "configs[0].results[0].verification.metric"),
    (ts._del(*_r2(0, "timing", "q3_ms")), "configs[0].results[0].timing.q3_ms"),
    (ts._del(*_r2(0, "timing", "sm_clock_mhz")), "configs[0].results[0].timing.sm_clock_mhz"),
    (ts._set("hot", *_r2(0, "timing", "l2")), "configs[0].results[0].timing.l2"),
    (ts._set(-1.0, *_r2(0, "timing", "stddev_ms")), "configs[0].results[0].timing.stddev_ms"),
    (ts._set(-2, *_r2(0, "timing", "sm_clock_mhz", "before")),
     "configs[0].results[0].timing.sm_clock_mhz.before"),
    (ts._del(*_r2(0, "model", "flops_nonmatrix")), "configs[0].results[0].model.flops_nonmatrix"),
    (ts._del(*_r2(0, "model", "bytes_asymptotic")), "configs[0].results[0].model.bytes_asymptotic"),
    (ts._set(-1.0, *_r2(0, "model", "terms", 0, "bytes")),
     "configs[0].results[0].model.terms[0].bytes"),
    (ts._del(*_r2(0, "derived", "effective_gbps")), "configs[0].results[0].derived.effective_gbps"),
    (ts._set("x", *_r2(0, "derived", "bound")), "configs[0].results[0].derived.bound"),
    (ts._set("weird", *_r2(0, "block_order")), "configs[0].results[0].block_order"),
    (ts._set(1.0, "configs", 0, "seed"), "configs[0].seed"),
    (ts._del("device", "uuid"), "device.uuid"),
    (ts._set(-2, "device", "sm_clock_max_mhz"), "device.sm_clock_max_mhz"),
    (ts._set(1.0e3, "device", "index"), "device.index"),
    (ts._del("settings", "l2"), "settings.l2"),
    (ts._set("hot", "settings", "l2"), "settings.l2"),
    (ts._set(-1, "settings", "warmup"), "settings.warmup"),
    (ts._set("odd", "settings", "inputs"), "settings.inputs"),
    (ts._del("ceilings", "source"), "ceilings.source"),
    (ts._set(-1.0, "ceilings", "dram_bytes_per_s"), "ceilings.dram_bytes_per_s"),
    (ts._set(-1.0, "ceilings", "tensor_flops_per_s", "bf16"), "ceilings.tensor_flops_per_s.bf16"),
    (ts._set([], "gate_calibration"), "gate_calibration"),
    (ts._set("fa-bench-gate-calibration/3", "gate_calibration", "schema"),
     "gate_calibration.schema"),
    (ts._del("gate_calibration", "rows"), "gate_calibration.rows"),
    (ts._set("", "gate_calibration", "rows", 0, "row"), "gate_calibration.rows[0].row"),
    (ts._set({"speed": 0.1}, "gate_calibration", "rows", 0, "tolerances"),
     "gate_calibration.rows[0].tolerances.speed"),
    (ts._set({"time": 10.0}, "gate_calibration", "rows", 0, "tolerances"),
     "gate_calibration.rows[0].tolerances.time"),
    (ts._set({"time": -0.1}, "gate_calibration", "rows", 0, "observed"),
     "gate_calibration.rows[0].observed.time"),
    (_calibration_duplicate_row, "gate_calibration.rows[1].row"),
]

def _v4_duplicate_config(doc):
    doc["configs"].append(copy.deepcopy(doc["configs"][1]))


V4_BAD = [
    (ts._del("configs", 1, "H_kv"), "configs[1].H_kv"),
    (ts._del("configs", 2, "N_kv"), "configs[2].N_kv"),
    (ts._set(0, "configs", 1, "H_kv"), "configs[1].H_kv"),
    (ts._set(8.0, "configs", 1, "H_kv"), "configs[1].H_kv"),
    (ts._set("8", "configs", 1, "H_kv"), "configs[1].H_kv"),
    (ts._set(5, "configs", 1, "H_kv"), "configs[1].H_kv"),  # not a divisor of H = 32
    (ts._set(64, "configs", 1, "H_kv"), "configs[1].H_kv"),
    (ts._set(0, "configs", 2, "N_kv"), "configs[2].N_kv"),
    (ts._set(None, "configs", 2, "N_kv"), "configs[2].N_kv"),
    (ts._del("configs", 0, "gpu"), "configs[0].gpu"),
    (_v4_duplicate_config, "configs[3]"),
]

def _v5_duplicate_config(doc):
    doc["configs"].append(copy.deepcopy(doc["configs"][3]))


V5_BAD = [
    (ts._del("configs", 3, "page_size"), "configs[3].page_size"),
    (ts._del("configs", 0, "kv_lengths"), "configs[0].kv_lengths"),
    (ts._set(3, "configs", 3, "page_size"), "configs[3].page_size"),
    (ts._set(96, "configs", 3, "page_size"), "configs[3].page_size"),
    (ts._set(-64, "configs", 3, "page_size"), "configs[3].page_size"),
    (ts._set(64.0, "configs", 3, "page_size"), "configs[3].page_size"),
    (ts._set(None, "configs", 3, "page_size"), "configs[3].page_size"),
    (ts._set([4096] * 7, "configs", 3, "kv_lengths"), "configs[3].kv_lengths"),
    (ts._set([4096] * 9, "configs", 3, "kv_lengths"), "configs[3].kv_lengths"),
    (ts._set([], "configs", 3, "kv_lengths"), "configs[3].kv_lengths"),
    (ts._set(4097, "configs", 3, "kv_lengths", 5), "configs[3].kv_lengths[5]"),
    (ts._set(0, "configs", 3, "kv_lengths", 2), "configs[3].kv_lengths[2]"),
    (ts._set(-1, "configs", 3, "kv_lengths", 2), "configs[3].kv_lengths[2]"),
    (ts._set(100.0, "configs", 3, "kv_lengths", 2), "configs[3].kv_lengths[2]"),
    (ts._set(4096, "configs", 3, "kv_lengths"), "configs[3].kv_lengths"),
    (ts._set("replay", "configs", 3, "results", 0, "timing", "launch"),
     "configs[3].results[0].timing.launch"),
    (ts._set("eager", "settings", "launch"), "settings.launch"),
    (ts._del("configs", 2, "N_kv"), "configs[2].N_kv"),
    (_v5_duplicate_config, "configs[4]"),
]

BAD = ([(ts.good_doc, m, k, False) for m, k in ts.CASES]
       + [(ts.good_doc, m, k, i == 2)  # IMPOSSIBLE[2] writes 1e999
          for i, (m, k, _) in enumerate(ts.IMPOSSIBLE)]
       + [(good_doc_v2, m, k, False) for m, k in V2_BAD]
       + [(good_doc_v4, m, k, False) for m, k in V4_BAD]
       + [(good_doc_v5, m, k, False) for m, k in V5_BAD])


@pytest.mark.parametrize("make,mutate,key,inf", BAD, ids=[f"{i}:{b[2]}" for i, b in enumerate(BAD)])
def test_both_refuse_at_the_same_key(tmp_path, make, mutate, key, inf):
    doc = make()
    mutate(doc)
    text = json.dumps(doc, indent=1)
    if inf:
        text = text.replace("777777.5", "1e999")  # parses to inf: valid JSON, not a number here
    first, problems = both(text, tmp_path)
    assert first is not None, f"the reader accepted a document broken at {key}"
    assert first.startswith(key), (first, key)
    assert problems and problems[0][0] == first, (first, problems)


@pytest.mark.parametrize("mutate,words", [
    (ts._del("configs", 1, "H_kv"), "configs[1].H_kv: missing required key when schema is "
                                    "'fa-bench/4'"),
    (ts._del("configs", 2, "N_kv"), "configs[2].N_kv: missing required key when schema is "
                                    "'fa-bench/4'"),
    (ts._set(5, "configs", 1, "H_kv"), "configs[1].H_kv: expected a divisor of H (32), got 5"),
    (ts._set(0, "configs", 2, "N_kv"), "configs[2].N_kv: expected a positive integer, got 0"),
    (ts._set(8.0, "configs", 1, "H_kv"), "configs[1].H_kv: expected an integer, got number 8.0"),
    (_v4_duplicate_config, 'configs[3]: duplicate configuration (B=1, H=32, H_kv=8, N=4096, d=128, '
                           'causal=true, dtype="bf16", gpu GPU-0; also at configs[1])'),
])
def test_v4_configuration_problems_in_words(tmp_path, mutate, words):
    """A fa-bench/4 configuration without its K/V heads or length, or with impossible ones, is
    refused in words that say which key and why."""
    doc = good_doc_v4()
    mutate(doc)
    path = tmp_path / "v4.json"
    path.write_text(json.dumps(doc))
    with pytest.raises(SchemaError) as info:
        schema.load_results(path)
    assert str(info.value) == f"{path}: {words}"


_LONG = 'configs[3].kv_lengths'


@pytest.mark.parametrize("mutate,words", [
    (ts._del("configs", 3, "page_size"), "configs[3].page_size: missing required key when schema "
                                         "is 'fa-bench/5'"),
    (ts._del("configs", 0, "kv_lengths"), "configs[0].kv_lengths: missing required key when "
                                          "schema is 'fa-bench/5'"),
    (ts._set(3, "configs", 3, "page_size"), "configs[3].page_size: expected 0 or a power of two, "
                                            "got 3"),
    (ts._set(-64, "configs", 3, "page_size"), "configs[3].page_size: expected an integer >= 0, "
                                              "got -64"),
    (ts._set([4096] * 7, "configs", 3, "kv_lengths"),
     f"{_LONG}: expected B (8) lengths, one per sequence, got 7"),
    (ts._set(4097, "configs", 3, "kv_lengths", 5),
     f"{_LONG}[5]: expected a length from 1 to N_kv (4096), got 4097"),
    (ts._set(0, "configs", 3, "kv_lengths", 2), f"{_LONG}[2]: expected a positive integer, got 0"),
    (ts._set(4096, "configs", 3, "kv_lengths"),
     f"{_LONG}: expected a list or null, got number 4096"),
    (_v5_duplicate_config, 'configs[4]: duplicate configuration (B=8, H=32, H_kv=8, N=1, '
                           'N_kv=4096, d=128, causal=true, dtype="bf16", page_size=64, '
                           'kv_lengths=[512, 4096, 1024, 2048, 4096, 3000, 2712, 2512], gpu GPU-0; '
                           'also at configs[3])'),
])
def test_v5_configuration_problems_in_words(tmp_path, mutate, words):
    """A fa-bench/5 configuration without its page_size or kv_lengths, or with impossible ones
    (pages not a power of two, lengths not one per sequence or longer than N_kv), is refused in
    words that say which key and why."""
    doc = good_doc_v5()
    mutate(doc)
    path = tmp_path / "v5.json"
    path.write_text(json.dumps(doc))
    with pytest.raises(SchemaError) as info:
        schema.load_results(path)
    assert str(info.value) == f"{path}: {words}"


def test_v4_ignores_page_and_length_keys(tmp_path):
    """Before fa-bench/5 a configuration's K/V is contiguous and every sequence N_kv long,
    whatever unknown keys it carries: two that differ only by such keys are the same
    configuration, and a /4 configuration's key is its contiguous /5 counterpart's."""
    doc = good_doc_v4()
    other = copy.deepcopy(doc["configs"][2])
    other.update(page_size=64, kv_lengths=[1] * 8)
    doc["configs"].append(other)
    first, problems = both(json.dumps(doc), tmp_path)
    assert first == "configs[3]" and "duplicate configuration" in problems[0][1], problems
    v5 = good_doc_v5()
    assert schema.config_key(good_doc_v4()["configs"][2], V4) == schema.config_key(
        v5["configs"][2], V5)
    assert schema.config_key(other, V4) == schema.config_key(doc["configs"][2], V4)
    assert schema.config_key(other, V5) != schema.config_key(doc["configs"][2], V5)


def test_v3_duplicates_ignore_an_h_kv_key(tmp_path):
    """Before fa-bench/4 a configuration is square multi-head attention, whatever unknown keys
    it carries (the C++ reader ignores them too): two that differ only by an H_kv key are the
    same configuration, and a /3 configuration's key is its square /4 counterpart's."""
    doc = good_doc_v3()
    other = copy.deepcopy(doc["configs"][0])
    other["H_kv"] = 1
    doc["configs"].append(other)
    first, problems = both(json.dumps(doc), tmp_path)
    assert first == "configs[1]" and "duplicate configuration" in problems[0][1], problems
    v4 = good_doc_v4()
    assert (schema.config_key(good_doc_v3()["configs"][0], V3)
            == schema.config_key(v4["configs"][0], V4)
            == schema.config_key(good_doc_v3()["configs"][0]))  # no version: H_kv, N_kv absent
    assert schema.config_key(other, V3) == schema.config_key(doc["configs"][0], V3)
    assert schema.config_key(other, V4) != schema.config_key(doc["configs"][0], V4)


def test_integers_are_integers_and_numbers_finite(tmp_path):
    """What plain JSON Schema would let through and the readers refuse: 64.0 for an integer."""
    doc = ts.good_doc()
    doc["configs"][0]["d"] = 64.0
    first, problems = both(json.dumps(doc), tmp_path)
    assert first == "configs[0].d"
    assert problems == [("configs[0].d", "expected an integer, got number 64.0")]


# -- the files: committed, C++ writer, Python writer -------------------------------------------

BROKEN = ts.BROKEN_FIXTURES


@pytest.mark.parametrize("name", sorted(p.name for p in DATA.glob("*.json")
                                        if p.name not in set(BROKEN) | ts.NOT_RESULT_FILES))
def test_committed_file_validates(name):
    assert json_schema.check_file(DATA / name) == []


@pytest.mark.parametrize("name,rule", [
    ("gate-truncated.json", "invalid JSON"),
    ("gate-schema-unknown.json", "schema: unknown version 'fa-bench/99'; this reader understands"),
    ("gate-duplicate-row.json", "configs[0].results[4].variant: variant 'fa2' appears twice"),
    ("gate-negative-sample.json", "timing.samples_ms[5]: expected a positive time, got -2.129"),
])
def test_broken_fixtures_fail_the_schema(name, rule):
    assert name in BROKEN
    lines = json_schema.check_file(DATA / name)
    assert lines and any(rule in line for line in lines), lines
    assert set(BROKEN) == {"gate-truncated.json", "gate-schema-unknown.json",
                           "gate-duplicate-row.json", "gate-negative-sample.json"}


def test_python_writer_output_validates(tmp_path):
    for name, make in (("v1.json", ts.good_doc), ("v2.json", good_doc_v2),
                       ("v3.json", good_doc_v3), ("v4.json", good_doc_v4),
                       ("v5.json", good_doc_v5)):
        write_results(make(), tmp_path / name)
        assert json_schema.check_file(tmp_path / name) == []
    out = tmp_path / "fixture.json"
    subprocess.run([sys.executable, str(REPO_ROOT / "scripts" / "make_python_fixture.py"), str(out)],
                   check=True, cwd=tmp_path)
    assert json_schema.check_file(out) == []


def build_binary(name: str) -> Path | None:
    env = os.environ.get("FA_BENCH_BIN")
    folder = Path(env).parent if env else REPO_ROOT / "build" / "bin"
    path = folder / name
    return path if path.is_file() and os.access(path, os.X_OK) else None


def require_binary(name: str) -> Path:
    binary = build_binary(name)
    if binary is None:
        if os.environ.get("FA_BENCH_BIN"):  # CI (scripts/test.sh) builds it: missing is a failure
            pytest.fail(f"{name} not next to $FA_BENCH_BIN")
        pytest.skip(f"{name} not built (looked next to $FA_BENCH_BIN, then build/bin)")
    return binary


def test_cpp_model_only_output_validates(tmp_path):
    """The C++ writer without a GPU: every variant, both masks, two head dims."""
    out = tmp_path / "model-only.json"
    run = subprocess.run([str(require_binary("fa-bench")), "--model-only", "--N", "128,1000",
                          "--d", "64,128", "--causal", "both", "--variants", "all",
                          "--json", str(out)], capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr
    doc = read_document(out)
    assert doc["schema"] in schema.UNDERSTOOD_VERSIONS
    assert json_schema.check_file(out) == []


def test_cpp_full_record_validates(tmp_path):
    """The C++ writer with every key it emits (tests/test_result_json.cpp dumps the record)."""
    out = tmp_path / "full-record.json"
    run = subprocess.run([str(require_binary("fa_tests_cpu")),
                          "--gtest_filter=ResultJson.FullRecordReadsBackAndDumps"],
                         capture_output=True, text=True, timeout=120,
                         env={**os.environ, "FA_RESULT_DUMP": str(out)})
    assert run.returncode == 0, run.stdout[-2000:]
    doc = read_document(out)
    row = doc["configs"][0]["results"][0]
    for key in ("placement", "counters", "measured"):
        assert row[key] is not None, key
    for key in ("worst_row_ratio", "worst_head", "worst_row", "lse_worst_row_ratio",
                "relative_rmse", "baseline_relative_rmse", "inputs_unchanged"):
        assert key in row["verification"], key
    assert "onchip_budget_bytes" in row["model"] and "best_peer" in row["derived"]
    assert row["default_config"] is True
    assert json_schema.check_file(out) == []
    validate(doc)


# -- scripts/validate_results.py ---------------------------------------------------------------


def run_script(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(REPO_ROOT / "scripts" / "validate_results.py"), *args],
                          capture_output=True, text=True)


def test_script_exit_codes(tmp_path):
    good = tmp_path / "good.json"
    write_results(good_doc_v2(), good)
    run = run_script(str(good), str(DATA / "sweep-standard-fa2-h200.json"))
    assert run.returncode == 0 and run.stderr == "", run.stderr
    assert "2 of 2 files valid" in run.stdout
    bad = tmp_path / "bad.json"
    doc = good_doc_v2()
    doc["configs"][0]["results"][0]["direction"] = "up"
    bad.write_text(json.dumps(doc))
    run = run_script(str(good), str(bad), str(tmp_path / "absent.json"))
    assert run.returncode == 1
    lines = run.stderr.splitlines()
    assert lines[0] == f"{bad}: configs[0].results[0].direction: expected one of forward|backward, got 'up'"
    assert lines[1].startswith(f"{tmp_path / 'absent.json'}: cannot read")
    assert len(lines) == 2 and "1 of 3 files valid" in run.stdout
    assert run_script().returncode == 2


def test_script_checks_v4_configurations(tmp_path):
    good, bad = tmp_path / "gqa.json", tmp_path / "bad-gqa.json"
    write_results(good_doc_v4(), good)
    doc = good_doc_v4()
    doc["configs"][1]["H_kv"] = 5
    doc["configs"].append(copy.deepcopy(doc["configs"][2]))
    bad.write_text(json.dumps(doc))
    run = run_script(str(good), str(bad))
    assert run.returncode == 1 and "1 of 2 files valid" in run.stdout
    assert run.stderr.splitlines() == [
        f"{bad}: configs[1].H_kv: expected a divisor of H (32), got 5",
        f'{bad}: configs[3]: duplicate configuration (B=8, H=32, N=1, N_kv=4096, d=128, '
        f'causal=true, dtype="bf16", gpu GPU-0; also at configs[2])']


def test_script_checks_v5_configurations(tmp_path):
    good, bad = tmp_path / "paged.json", tmp_path / "bad-paged.json"
    write_results(good_doc_v5(), good)
    doc = good_doc_v5()
    doc["configs"][3]["page_size"] = 48
    doc["configs"][3]["kv_lengths"][7] = 5000
    doc["configs"][2]["kv_lengths"] = [4096, 4096]
    bad.write_text(json.dumps(doc))
    run = run_script(str(good), str(bad))
    assert run.returncode == 1 and "1 of 2 files valid" in run.stdout
    assert run.stderr.splitlines() == [
        f"{bad}: configs[2].kv_lengths: expected B (8) lengths, one per sequence, got 2",
        f"{bad}: configs[3].page_size: expected 0 or a power of two, got 48",
        f"{bad}: configs[3].kv_lengths[7]: expected a length from 1 to N_kv (4096), got 5000"]
