"""Tests of the report (reports/data.py, plots.py, report.py, ``python -m reports -o``) on the
real H200 result files in tests/data/. Plots are checked through matplotlib's objects (artists
tagged with a gid), tables through their cells, the HTML in headless Chromium.

Every test runs twice: on the committed fa-bench/1 files, and on the same files as fa-bench/2
(tests/python/v2_docs.py: the rows get the specs the C++ reader gives /1 rows, their variant
the plain name), read through the same readers and the same ``python -m reports``.

Documents built in this file (block-size sweep, peers, per-kernel counters) are synthetic and
say so in their device name; they exercise code paths the H200 fixtures do not reach yet.
"""

from __future__ import annotations

import copy
import math
import os
import time
import json
import shutil
import subprocess
import sys
from pathlib import Path

import matplotlib.image
import numpy as np
import pytest

from v2_docs import as_v2, as_v2_file

from reports import schema
from reports.data import Results, Run
from reports.plots import (
    all_plots,
    plot_block_size,
    plot_fp8_accuracy,
    plot_io_scaling,
    plot_roofline,
    plot_throughput,
)
from reports.report import fmt_pct, roofline_reading, tables

REPO_ROOT = Path(__file__).resolve().parents[2]
DATA = REPO_ROOT / "tests" / "data"
COUNTERS = DATA / "counters-4variants-h200.json"
SWEEP4 = DATA / "sweep-4variants-h200.json"
OUTLIERS = DATA / "outlier-inputs-h200.json"
H200 = "NVIDIA H200"


V1, V2 = "fa-bench/1", "fa-bench/2"
VERSION = V1  # of the files the tests read (set by the `version` fixture)


@pytest.fixture(scope="module", params=[V1, V2], autouse=True)
def version(request):
    """Runs the module on the committed /1 files, then on them as /2: every read of a result
    file (schema.read_document) gives the /2 document."""
    global VERSION
    VERSION = request.param
    if request.param == V1:
        yield V1
        return
    mp = pytest.MonkeyPatch()
    original = schema.read_document
    mp.setattr(schema, "read_document", lambda path: as_v2(original(path)))
    yield V2
    mp.undo()
    VERSION = V1


def raw(path: Path) -> dict:
    """A committed file's document as JSON, in the version under test."""
    doc = json.loads(path.read_text())
    return as_v2(doc) if VERSION == V2 else doc


def load(*paths: Path) -> Results:
    return Results.load([str(p) for p in paths])


def lines(ax, prefix: str):
    return [ln for ln in ax.get_lines() if (ln.get_gid() or "").startswith(prefix)]


def bars(ax, gid: str):
    return [c for c in ax.containers
            if getattr(c, "patches", None) and c.patches[0].get_gid() == gid]


def ok_rows(path: Path) -> list[dict]:
    return [r for r in schema.rows(schema.load_results(path)) if r["status"] == "ok"]


@pytest.fixture(scope="module")
def counters(version) -> Results:
    return load(COUNTERS)


# -- roofline ------------------------------------------------------------------------------------


def all_lines(fig, prefix: str):
    return [ln for ax in fig.axes for ln in lines(ax, prefix)]


def points(fig, prefix: str) -> list[tuple[float, float]]:
    return sorted((x, y) for ln in all_lines(fig, prefix)
                  for x, y in zip(ln.get_xdata(), ln.get_ydata()))


def formula_placement(r: dict, ceilings: dict) -> dict:
    """The placement rule written out again (issue 11), for files without ``placement``."""
    flops = r["model"]["flops_matrix"]
    prec = "fp8" if r["algorithm"] == "fp8" else r["dtype"]
    m = r.get("measured") or {}
    if m.get("dram_bytes"):
        i_dram, i_l2 = flops / m["dram_bytes"], flops / m["l2_bytes"]
    else:
        i_dram, i_l2 = flops / r["model"]["bytes_compulsory"], None
    roofs = {"compute": ceilings["tensor_flops_per_s"][prec],
             "dram": i_dram * ceilings["dram_bytes_per_s"]}
    if i_l2 and ceilings.get("l2_bytes_per_s"):
        roofs["l2"] = i_l2 * ceilings["l2_bytes_per_s"]
    bound = min(roofs, key=roofs.get)
    attained = flops / (r["median_ms"] * 1e-3)
    return {"intensity_dram": i_dram, "intensity_l2": i_l2, "bound": bound,
            "fraction": attained / roofs[bound]}


def test_roofline_points_at_the_placement_and_roofs_from_counters(counters):
    plot = plot_roofline(counters, H200)
    assert plot.figure is not None, plot.skipped
    axes = [ax for ax in plot.figure.axes if ax.get_visible()]
    # one panel per precision: bf16 rows, fp8 rows (each with its own tensor roof)
    assert [ax.get_title(loc="left") for ax in axes] == ["bf16 rows", "fp8 rows"]
    for ax in axes:
        assert (ax.get_xscale(), ax.get_yscale()) == ("log", "log")
        assert "FLOP/byte" in ax.get_xlabel() and "TFLOP/s" in ax.get_ylabel()
    title = plot.figure.get_suptitle()
    for part in ("NVIDIA H200", "bf16", "B·H = 64–512", "2026-11-21"):
        assert part in title

    rows = ok_rows(COUNTERS)
    ceilings = raw(COUNTERS)["ceilings"]
    assert len(points(plot.figure, "point-dram-")) == len(points(plot.figure, "point-l2-")) == 32
    assert not all_lines(plot.figure, "point-compulsory-")
    # every row at (matrix FLOPs / measured DRAM bytes, matrix FLOPs / median time)
    want = sorted((formula_placement(r, ceilings)["intensity_dram"],
                   r["model"]["flops_matrix"] / (r["median_ms"] * 1e-3) / 1e12) for r in rows)
    np.testing.assert_allclose(points(plot.figure, "point-dram-"), want, rtol=1e-12)
    want = sorted((formula_placement(r, ceilings)["intensity_l2"],
                   r["model"]["flops_matrix"] / (r["median_ms"] * 1e-3) / 1e12) for r in rows)
    np.testing.assert_allclose(points(plot.figure, "point-l2-"), want, rtol=1e-12)
    # fp8 rows only in the fp8 panel
    assert {ln.get_gid() for ln in lines(axes[1], "point-dram-")} == {"point-dram-fp8"}
    # one marker per variant, the same colour for DRAM and L2 points of a variant
    by_variant = {}
    for ln in all_lines(plot.figure, "point-dram-") + all_lines(plot.figure, "point-l2-"):
        v = ln.get_gid().split("-", 2)[2]
        by_variant.setdefault(v, set()).add((ln.get_marker(), ln.get_color()))
    assert set(by_variant) == {"standard", "fa1", "fa2", "fp8"}
    assert all(len(s) == 1 for s in by_variant.values())
    assert len({next(iter(s)) for s in by_variant.values()}) == 4

    for ax, prec in zip(axes, ("bf16", "fp8")):
        (peak,) = lines(ax, "roof-peak-")
        assert peak.get_ydata()[0] == pytest.approx(ceilings["tensor_flops_per_s"][prec] / 1e12)
        (sheet,) = lines(ax, "roof-sheet-")
        assert sheet.get_ydata()[0] == pytest.approx(
            ceilings["datasheet"][f"tensor_flops_per_s_{prec}"] / 1e12)
        assert sheet.get_linestyle() == "--"
        for label, key in (("DRAM", "dram_bytes_per_s"), ("L2", "l2_bytes_per_s")):
            (roof,) = [ln for ln in ax.get_lines() if ln.get_gid() == f"roof-bw-{label}"]
            x, y = roof.get_data()
            assert y[0] / x[0] == pytest.approx(ceilings[key] / 1e12)
            assert roof.get_linestyle() == "-"
        (sheet_bw,) = lines(ax, "roof-bw-DRAM datasheet")
        assert sheet_bw.get_linestyle() == "--"
    # the roof labels quote the measured values
    texts = " ".join(t.get_text() for ax in axes for t in ax.texts)
    assert "DRAM 3.90 TB/s (measured)" in texts and "bf16 tensor 790 TFLOP/s" in texts
    assert "fp8 tensor 1452 TFLOP/s" in texts


def test_roofline_lines_end_at_their_ridge_points(counters):
    """Each roof is min(ceiling, bandwidth × intensity): a bandwidth line ends at its ridge
    (ceiling / bandwidth, ceiling), marked; the flat roof starts at the leftmost ridge."""
    plot = plot_roofline(counters, H200)
    ceilings = raw(COUNTERS)["ceilings"]
    sheet = ceilings["datasheet"]
    for ax, prec in zip(plot.figure.axes, ("bf16", "fp8")):
        peak = ceilings["tensor_flops_per_s"][prec]
        expect = {"DRAM": (ceilings["dram_bytes_per_s"], peak),
                  "L2": (ceilings["l2_bytes_per_s"], peak),
                  "DRAM datasheet": (sheet["dram_bytes_per_s"],
                                     sheet[f"tensor_flops_per_s_{prec}"])}
        for label, (bw, ceiling) in expect.items():
            (roof,) = [ln for ln in ax.get_lines() if ln.get_gid() == f"roof-bw-{label}"]
            x, y = roof.get_data()
            assert x[-1] == pytest.approx(ceiling / bw) and y[-1] == pytest.approx(ceiling / 1e12)
            assert max(y) == pytest.approx(ceiling / 1e12)  # never above its ceiling
            (ridge,) = [ln for ln in ax.get_lines() if ln.get_gid() == f"ridge-{label}"]
            assert (ridge.get_xdata()[0], ridge.get_ydata()[0]) == pytest.approx(
                (ceiling / bw, ceiling / 1e12))
        (flat,) = lines(ax, "roof-peak-")
        assert flat.get_xdata()[0] == pytest.approx(peak / ceilings["l2_bytes_per_s"])
        (flat_sheet,) = lines(ax, "roof-sheet-")
        assert flat_sheet.get_xdata()[0] == pytest.approx(
            sheet[f"tensor_flops_per_s_{prec}"] / sheet["dram_bytes_per_s"])
        # labels sit above every marker, inside the axes, on a white box
        top = max(ln.get_zorder() for ln in lines(ax, "point-"))
        (dram_label,) = [t for t in ax.texts if t.get_gid() == "label-DRAM"]
        assert dram_label.get_zorder() > top and dram_label.get_bbox_patch() is not None
        x, y = dram_label.xy
        (x0, x1), (y0, y1) = ax.get_xlim(), ax.get_ylim()
        assert x0 <= x <= x1 and y0 <= y <= y1
        assert all(t.get_fontsize() >= 8 for t in ax.texts)


def test_roofline_without_counters_places_rows_on_compulsory_bytes():
    plot = plot_roofline(load(SWEEP4), H200)
    rows = ok_rows(SWEEP4)
    got = points(plot.figure, "point-compulsory-")
    assert len(got) == len(rows) == 48 and not all_lines(plot.figure, "point-dram-")
    assert [x for x, _ in got] == pytest.approx(sorted(
        r["model"]["flops_matrix"] / r["model"]["bytes_compulsory"] for r in rows))
    assert all(ln.get_fillstyle() == "left" for ln in all_lines(plot.figure, "point-compulsory-"))
    assert not all_lines(plot.figure, "roof-sheet-")  # the roofs are the datasheet's already
    assert all(ln.get_linestyle() == "--" for ln in all_lines(plot.figure, "roof-"))
    assert any("compulsory" in n for n in plot.notes)
    # placed on the compulsory bytes, a row is never above its roof
    res = load(SWEEP4)
    assert all(r["place"]["fraction"] <= 1.0 for r in res.ok())


def test_roofline_splits_crowded_precisions_and_keeps_series_apart():
    res = load(DATA / "sweep-all-variants-h200.json")
    plot = plot_roofline(res, H200)
    titles = [ax.get_title(loc="left") for ax in plot.figure.axes if ax.get_visible()]
    # 80 bf16 rows: one panel per (d, causal); 20 fp8 rows: one panel
    assert titles == ["bf16 rows, d = 64, non-causal", "bf16 rows, d = 64, causal",
                      "bf16 rows, d = 128, non-causal", "bf16 rows, d = 128, causal", "fp8 rows"]
    assert len(points(plot.figure, "point-dram-")) == 100


def test_palette_keeps_13_and_more_series_apart():
    from reports.data import _styles

    names = ["standard", "fa1", "fa2", "fp8", "cudnn", "cudnn-fp8", "torch-flash",
             "torch-efficient", "torch-cudnn", "torch-math"] + [f"fa2@{b}x64" for b in
                                                               (16, 32, 64, 256, 512, 1024)]
    colours, markers = _styles(names, {n for n in names if n.startswith(("cudnn", "torch"))})
    assert len(set(colours.values())) == len(names) == 16
    assert len({(colours[n], markers[n]) for n in names}) == len(names)


# -- IO scaling, throughput, fp8 accuracy, block size -----------------------------------------


def test_io_scaling_measured_points_model_lines_and_floor(counters):
    plot = plot_io_scaling(counters, H200)
    axes = plot.figure.axes
    assert len(axes) == 4  # d = 64, 128 x DRAM, L2
    assert all(ax.get_yscale() == "log" and ax.get_xscale() == "log" for ax in axes)
    rows = [r for r in ok_rows(COUNTERS) if not r["causal"]]
    for ax, d, key in ((axes[0], 64, "dram_bytes"), (axes[1], 64, "l2_bytes"),
                       (axes[2], 128, "dram_bytes"), (axes[3], 128, "l2_bytes")):
        assert f"d = {d}" in ax.get_title(loc="left")
        for v in ("standard", "fa1", "fa2", "fp8"):
            vrows = sorted((r for r in rows if r["d"] == d and r["variant"] == v),
                           key=lambda r: r["N"])
            (pts,) = lines(ax, f"measured-{v}")
            assert list(pts.get_ydata()) == pytest.approx(
                [r["measured"][key] / (r["B"] * r["H"]) for r in vrows])
            (model,) = lines(ax, f"model-{v}")
            assert list(model.get_xdata()) == [1024, 4096]
            assert list(model.get_ydata()) == pytest.approx(
                [(r["model"]["bytes_read"] + r["model"]["bytes_written"]) / (r["B"] * r["H"])
                 for r in vrows])
        (floor,) = lines(ax, "compulsory")
        assert min(floor.get_ydata()) > 0
    # standard's model bytes per head grow as N^2: x4 in N gives x16 (within the O(N) terms)
    std = lines(axes[0], "model-standard")[0].get_ydata()
    assert 12 < std[1] / std[0] <= 16


def test_throughput_one_panel_per_d_causal_dashed():
    plot = plot_throughput(load(SWEEP4), H200)
    axes = plot.figure.axes
    assert [ax.get_title(loc="left") for ax in axes] == ["d = 64", "d = 128"]
    rows = ok_rows(SWEEP4)
    for ax, d in zip(axes, (64, 128)):
        assert len(lines(ax, "tput-")) == 8  # 4 variants x (non-causal, causal)
        (fa2c,) = lines(ax, "tput-fa2-causal")
        assert fa2c.get_linestyle() == "--"
        assert lines(ax, "tput-fa2-full")[0].get_linestyle() == "-"
        want = sorted((r["N"], r["tflops_convention"]) for r in rows
                      if r["variant"] == "fa2" and r["d"] == d and r["causal"])
        assert list(zip(fa2c.get_xdata(), fa2c.get_ydata())) == pytest.approx(want)
    top = max(r["tflops_convention"] for r in rows)
    assert axes[1].get_ylim()[1] >= top  # nothing clipped


def test_fp8_accuracy_bars_per_distribution():
    plot = plot_fp8_accuracy(load(SWEEP4, OUTLIERS), H200)
    axes = plot.figure.axes
    assert [ax.get_title(loc="left") for ax in axes] == ["inputs: normal, N = 4096",
                                               "inputs: outliers, N = 4096"]
    outliers = {(r["d"], r["causal"]): r for r in ok_rows(OUTLIERS) if r["variant"] == "fp8"}
    ax = axes[1]
    assert ax.get_yscale() == "log"
    (fp8,) = bars(ax, "bars-fp8")
    heights = [b.get_height() for b in fp8]
    order = [(64, False), (64, True), (128, False), (128, True)]
    assert heights == pytest.approx([outliers[k]["verification"]["rmse"] for k in order])
    (plain,) = bars(ax, "bars-plain-fp8")
    assert [b.get_height() for b in plain] == pytest.approx(
        [outliers[k]["verification"]["baseline_rmse"] for k in order])
    assert not bars(ax, "bars-fa1")  # no fa1 in that run


def test_plots_without_data_are_skipped_with_a_reason(counters):
    plot = plot_block_size(counters, H200)
    assert plot.figure is None and "tile shapes" in plot.skipped
    no_fp8 = load(DATA / "sweep-standard-fa2-h200.json")
    assert "no verified fp8 rows" in plot_fp8_accuracy(no_fp8, H200).skipped


def synthetic_doc(device: str = "synthetic test device (not a measurement)",
                  version: str = V2) -> dict:
    """A block-size sweep made up for the test: fa2 and fa1 at three tile shapes, the first
    the default. fa-bench/2: rows named fa2 told apart by kernel_config (default_config says
    which is the default); fa-bench/1: the non-default rows named fa2@64x64 ..."""
    doc = schema.new_document(
        "synthetic", device={"index": 0, "name": device, "uuid": "", "compute_capability": "9.0",
                                 "sm_count": 1, "memory_bytes": 0, "l2_bytes": 0},
        ceilings={"source": "datasheet (made up)", "dram_bytes_per_s": 1e12,
                  "tensor_flops_per_s": {"bf16": 1e14, "fp16": 1e14}}, version=version)
    results = []
    for alg, base in (("fa2", 1.0), ("fa1", 3.0)):
        for i, (bq, bk) in enumerate(((128, 64), (64, 64), (128, 128))):
            model = {"flops_matrix": 1e12, "flops_convention": 1e12,
                     "bytes_read": 1e9 * (i + 1), "bytes_written": 1e8,
                     "bytes_compulsory": 1e8}
            if version == V1:
                spec = {"variant": alg if i == 0 else f"{alg}@{bq}x{bk}"}
            else:
                spec = {"variant": alg, "kernel_config": kc(bq, bk), "default_config": i == 0,
                        "options": {"block_order": "blocks"} if alg == "fa2" else {}}
            name = spec.pop("variant")
            results.append(schema.make_result(
                name, algorithm=alg, status="ok", tiles={"block_q": bq, "block_kv": bk},
                samples_ms=[base + i, base + i], model=model, version=version, **spec))
    doc["configs"].append(schema.make_config(B=1, H=8, N=4096, d=64, causal=False,
                                             dtype="bf16", seed=1, results=results))
    return schema.validate(doc)


def kc(bq: int = 128, bk: int = 64, stages: int = 2, warpgroups: int = 0,
       cluster: tuple = (1, 1, 1)) -> dict:
    return {"block_q": bq, "block_kv": bk, "stages": stages, "warpgroups": warpgroups,
            "cluster": list(cluster)}


def test_block_size_plot_on_a_synthetic_tile_sweep(version):
    res = Results([Run("synthetic.json", synthetic_doc(version=version))])
    device = res.devices()[0]
    plot = plot_block_size(res, device)
    assert plot.figure is not None, plot.skipped
    hbm, l2, time = plot.figure.axes
    labels = [t.get_text() for t in time.get_xticklabels()]
    assert labels == ["64×64", "128×64", "128×128"]  # ordered by tile area
    (fa2,) = lines(time, "time-fa2-")
    assert list(fa2.get_ydata()) == pytest.approx([2.0, 1.0, 3.0])
    (model,) = lines(hbm, "model-fa2-")
    assert list(model.get_ydata()) == pytest.approx([2.1e9, 1.1e9, 3.1e9])
    assert not lines(l2, "l2-")  # no counters: said in the panel instead
    assert any("no hardware counters" in t.get_text() for t in l2.texts)
    # tile rows are kept out of the throughput plot; the default rows are the variants' series,
    # named as the variant in both versions (the default tile is an attribute of the point)
    tput = plot_throughput(res, device).figure.axes[0]
    assert {ln.get_gid() for ln in lines(tput, "tput-")} == {"tput-fa2-full", "tput-fa1-full"}


# -- tables and generated text -------------------------------------------------------------------


def table(tabs, key):
    return next(t for t in tabs if t.key == key)


def test_tables_carry_the_numbers(counters):
    tabs = tables(counters)
    time = table(tabs, "time")
    assert time.columns[:5] == ["N", "d", "mask", "dtype", "B×H"]
    rows = ok_rows(COUNTERS)
    fa2 = next(r for r in rows if (r["variant"], r["N"], r["d"], r["causal"])
               == ("fa2", 4096, 128, False))
    line = next(x for x in time.rows if x[:3] == ["4096", "128", "non-causal"])
    assert line[time.columns.index("fa2")] == f"**{fa2['median_ms']:.3f}**"  # fastest: bold
    tf = table(tabs, "tflops")
    line = next(x for x in tf.rows if x[:3] == ["4096", "128", "non-causal"])
    assert line[tf.columns.index("fa2")] == f"**{fa2['tflops_convention']:.1f}**"

    by = table(tabs, "bytes")
    line = next(x for x in by.rows if x[:3] == ["4096", "128", "non-causal"] and x[5] == "fa2")
    assert line[by.columns.index("DRAM measured")] == f"{fa2['measured']['dram_bytes'] / 1e6:.2f} MB"
    assert line[by.columns.index("L2 / model")] == f"{fa2['measured']['l2_over_model']:.2f}"

    roof = table(tabs, "roofline")
    ceilings = raw(COUNTERS)["ceilings"]
    for r in rows:
        line = next(x for x in roof.rows if x[:3] == [str(r["N"]), str(r["d"]),
                                                     "non-causal" if not r["causal"] else "causal"]
                    and x[5] == r["variant"])
        want = formula_placement(r, ceilings)
        assert line[roof.columns.index("bound")] == {"compute": "compute", "dram": "DRAM",
                                                     "l2": "L2"}[want["bound"]]
        assert line[roof.columns.index("of attainable")] == fmt_pct(want["fraction"])
        assert line[roof.columns.index("basis")] == "counters"
        assert line[roof.columns.index("placed by")] == "computed"
    assert "come from files without a `placement` object" in roof.note

    err = table(tabs, "errors")
    fp8 = next(r for r in rows if (r["variant"], r["N"], r["d"], r["causal"])
               == ("fp8", 1024, 64, True))
    line = next(x for x in err.rows if x[:3] == ["1024", "64", "causal"] and x[5] == "fp8")
    assert line[6:] == ["rmse", f"{fp8['verification']['max_abs_error']:.2e}",
                        f"{fp8['verification']['rmse']:.2e}",
                        f"{fp8['verification']['baseline_rmse']:.2e}",
                        f"{fp8['verification']['tolerance']:.2e}", "pass"]
    assert len(err.rows) == 32


def test_roofline_reading_is_computed_from_the_rows(counters):
    reading = roofline_reading(counters)
    rows = ok_rows(COUNTERS)
    std = next(r for r in rows if (r["variant"], r["N"], r["d"], r["causal"])
               == ("standard", 4096, 64, False))
    ceilings = raw(COUNTERS)["ceilings"]
    assert formula_placement(std, ceilings)["bound"] == "dram"
    pct = fmt_pct(formula_placement(std, ceilings)["fraction"])
    assert any(s.startswith("standard is DRAM-bound at d=64, N=4096") and pct in s
               for s in reading)
    fa2 = next(r for r in rows if (r["variant"], r["N"], r["d"], r["causal"])
               == ("fa2", 4096, 128, False))
    peak = raw(COUNTERS)["ceilings"]["tensor_flops_per_s"]["bf16"]
    want = fmt_pct(fa2["model"]["flops_matrix"] / (fa2["median_ms"] * 1e-3) / peak)
    assert f"fa2 reaches {want} of the measured bf16 tensor roof" in " ".join(reading)


def test_peers_and_per_kernel_counters_when_present():
    """Peer rows, derived.best_peer and counters.kernels (added to a copy of a real file; the
    peer's numbers are made up for the test)."""
    doc = raw(COUNTERS)
    for config in doc["configs"]:
        fa2 = next(r for r in config["results"] if r["variant"] == "fa2")
        peer = copy.deepcopy(fa2)
        peer.update(variant="cudnn", peer=True)
        peer.pop("counters")
        peer.pop("measured")
        peer["timing"]["median_ms"] = fa2["timing"]["median_ms"] / 2
        config["results"].append(peer)
        fa2["derived"]["best_peer"] = "cudnn"
        fa2["derived"]["speed_vs_best_peer"] = 0.5
        fa2["counters"]["kernels"] = [{"name": "fa2_kernel", "values": {
            "dram__bytes_read.sum": 1e6, "dram__bytes_write.sum": 1e6,
            "gpu__time_duration.sum": 2e6}}]
    schema.validate(doc)
    res = Results([Run("with-peers.json", doc)])
    tabs = tables(res)
    assert "cudnn (peer)" in table(tabs, "time").columns
    assert table(tabs, "kernels").rows[0][-4:] == ["fa2_kernel", "2.00 MB", "-", "2.000"]
    plot = plot_roofline(res, H200)
    (peer_point,) = {ln.get_marker() for ln in all_lines(plot.figure, "point-compulsory-cudnn")}
    assert peer_point not in {"s", "^", "o", "D"}
    legend = [t.get_text() for t in plot.figure.legends[0].texts]
    from reports.report import fastest_summary

    summary = " ".join(fastest_summary(res))
    assert "cudnn (peer) is fastest" in summary
    assert "0.50× the speed of the best bf16 peer (cudnn)" in summary
    assert legend  # the fill legend exists; the variant legend is the first artist
    # absent keys never break anything
    assert plot_roofline(load(SWEEP4), H200).figure is not None


# -- the command ----------------------------------------------------------------------------------


def run_cli(*args: str, cwd: Path = REPO_ROOT) -> subprocess.CompletedProcess:
    """``python -m reports`` on the files given (valid /1 files written as /2 first when the
    version under test is /2)."""
    if VERSION == V2:
        args = tuple(str(as_v2_file(a)) if a.endswith(".json") else a for a in args)
    return subprocess.run([sys.executable, "-m", "reports", *args], cwd=cwd, capture_output=True,
                          text=True, timeout=300)


@pytest.fixture(scope="module")
def report_dir(tmp_path_factory, version) -> Path:
    out = tmp_path_factory.mktemp("report")
    p = run_cli(str(COUNTERS), str(OUTLIERS), "-o", str(out))
    assert p.returncode == 0, p.stderr
    assert "skipped plot block-size" in p.stdout
    return out


def test_report_files(report_dir):
    for name in ("roofline", "io-scaling", "bytes-vs-d", "throughput", "fp8-accuracy"):
        png = report_dir / f"{name}.png"
        assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        assert (report_dir / f"{name}.svg").read_text().lstrip().startswith("<?xml")
    assert not (report_dir / "block-size.png").exists()
    md = (report_dir / "report.md").read_text()
    assert "![" in md and "(roofline.png)" in md
    assert "Skipped: needs fa1/fa2 rows at two or more tile shapes" in md
    for heading in ("## Who is fastest where", "## Reading the roofline", "### Median time [ms]",
                    "### IO model against measured bytes", "### Roofline placement",
                    "### Errors against the fp64 reference", "### Roofs"):
        assert heading in md
    html = (report_dir / "report.html").read_text()
    assert html.count('src="data:image/png;base64,') == 5  # self-contained
    assert not [p for p in report_dir.iterdir() if p.name.startswith(".")]  # no staging left


@pytest.mark.parametrize("content, problem", [
    (b"{not json", "invalid JSON at line 1"),
    (b'{"hello": 1}', "schema: missing"),
    (b'{"schema": "other/2"}', "schema: unknown version 'other/2'"),
])
def test_bad_input_is_refused_naming_the_file(tmp_path, content, problem):
    bad = tmp_path / "bad.json"
    bad.write_bytes(content)
    out = tmp_path / "out"
    p = run_cli(str(COUNTERS), str(bad), "-o", str(out))
    assert p.returncode == 2
    assert f"error: {bad}: {problem}" in p.stderr
    assert "no report written" in p.stderr
    assert not (out / "report.html").exists()


def test_bad_row_and_missing_file_and_arguments(tmp_path):
    doc = raw(COUNTERS)
    doc["configs"][1]["results"][2]["status"] = "great"
    bad = tmp_path / "row.json"
    bad.write_text(json.dumps(doc))
    p = run_cli(str(bad), "-o", str(tmp_path / "o"))
    assert p.returncode == 2
    assert f"{bad}: configs[1].results[2].status: expected one of ok|" in p.stderr
    p = run_cli(str(tmp_path / "absent.json"), "-o", str(tmp_path / "o"))
    assert p.returncode == 2 and "absent.json: cannot read" in p.stderr
    p = run_cli(str(COUNTERS), "-o")
    assert p.returncode == 2 and "-o needs a directory" in p.stderr
    p = run_cli(str(COUNTERS), "--frobnicate")
    assert p.returncode == 2 and "unknown option --frobnicate" in p.stderr


def test_two_devices_side_by_side(version):
    res = Results([Run(str(SWEEP4), schema.load_results(SWEEP4)),
                   Run("synthetic.json", synthetic_doc("Synthetic GPU", version))])
    names = {p.name for p in all_plots(res) if p.figure is not None}
    assert {"roofline-nvidia-h200", "roofline-synthetic-gpu", "throughput-nvidia-h200",
            "block-size-synthetic-gpu"} <= names
    time = table(tables(res), "time")
    assert time.columns[0] == "device"
    assert {line[0] for line in time.rows} == {"NVIDIA H200", "Synthetic GPU"}


# -- the HTML in a real browser -------------------------------------------------------------------


def chromium() -> str | None:
    for name in ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable"):
        path = shutil.which(name)
        if path:
            return path
    return None


def test_html_opens_in_headless_chromium_with_all_images(report_dir, tmp_path):
    browser = chromium()
    if browser is None:
        pytest.skip("chromium is not installed (scripts/setup.sh installs it)")
    flags = [browser, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
             "--no-first-run", "--disable-dev-shm-usage", "--virtual-time-budget=5000"]
    # 1. images: a copy of the page with a probe that records, after load, how many <img>
    #    decoded (naturalWidth > 0); --dump-dom prints the DOM after the scripts ran.
    probe = tmp_path / "probe.html"
    html = (report_dir / "report.html").read_text()
    script = ("<script>window.addEventListener('load', () => {"
              "const imgs = [...document.images];"
              "const ok = imgs.filter(i => i.complete && i.naturalWidth > 0).length;"
              "const p = document.createElement('p'); p.id = 'probe';"
              "p.textContent = 'loaded ' + ok + ' of ' + imgs.length;"
              "document.body.appendChild(p);});</script>")
    probe.write_text(html.replace("</body>", script + "</body>"))
    p = subprocess.run([*flags, "--dump-dom", probe.as_uri()], capture_output=True, text=True,
                       timeout=120)
    assert 'id="probe">loaded 5 of 5<' in p.stdout, p.stderr[-2000:]
    # 2. a screenshot of the report itself, which must not be blank
    shot = tmp_path / "shot.png"
    p = subprocess.run([*flags, f"--screenshot={shot}", "--window-size=1280,3000",
                        (report_dir / "report.html").as_uri()], capture_output=True, text=True,
                       timeout=120)
    assert shot.exists(), p.stderr[-2000:]
    img = matplotlib.image.imread(str(shot))[..., :3]
    assert img.shape[:2] == (3000, 1280)
    not_white = (img < 0.95).any(axis=2).mean()
    assert not_white > 0.02  # text, tables and plots, not an empty page
    # the plots' colours reach the screen: some clearly coloured (not grey) pixels
    saturation = img.max(axis=2) - img.min(axis=2)
    assert (saturation > 0.3).mean() > 0.001


# -- issue 13: plots that a paper would print -----------------------------------------------------

SWEEP_ALL = DATA / "sweep-all-variants-h200.json"
TILES = DATA / "tiles-fa1-fa2-h200.json"
OUTLIERS_FULL = DATA / "outlier-inputs-sweep-h200.json"


def test_io_scaling_keeps_coinciding_series_apart():
    plot = plot_io_scaling(load(SWEEP_ALL), H200)
    ax = plot.figure.axes[0]
    (fa2,) = lines(ax, "measured-fa2")
    (cudnn,) = lines(ax, "measured-cudnn")
    # the same bytes at the same N: the markers are nudged apart, the values are unchanged
    assert list(cudnn.get_ydata()) == pytest.approx(list(fa2.get_ydata()), rel=0.05)
    assert all(c > f * 1.02 for c, f in zip(cudnn.get_xdata(), fa2.get_xdata()))
    # the peer's model line is dashed over ours, so both stay visible
    assert lines(ax, "model-fa2")[0].get_linestyle() == "-"
    assert lines(ax, "model-cudnn")[0].get_linestyle() == "--"
    assert "markers measured" in plot.figure.get_suptitle()


def test_io_scaling_model_only_title_and_no_l2_panels_without_l2_data():
    plot = plot_io_scaling(load(SWEEP4), H200)
    assert len(plot.figure.axes) == 2  # DRAM only, d = 64 and 128
    assert all("DRAM" in ax.get_title(loc="left") for ax in plot.figure.axes)
    title = plot.figure.get_suptitle()
    assert "IO model only" in title and "markers measured" not in title
    # the tile-model lines are labelled as what they are, not as the paper's N²d²/M
    legend = " ".join(t.get_text() for t in plot.figure.legends[0].texts)
    assert "K/V re-read N/Br times ∝ N²d/Br" in legend and "N²d²/M" not in legend
    assert any("predate model.onchip_budget_bytes" in n for n in plot.notes)


def test_block_size_axes_go_log_when_values_span_decades(version):
    plot = plot_block_size(load(TILES), H200)
    hbm, l2, time = plot.figure.axes
    assert hbm.get_yscale() == "log"  # fa2 0.26 GB beside fa1 87 GB
    ys = [y for ln in hbm.get_lines() for y in ln.get_ydata()]
    assert hbm.get_ylim()[0] <= min(ys) and hbm.get_ylim()[1] >= max(ys)
    assert time.get_yscale() == "log"
    # a panel whose values stay within a decade keeps the linear axis from 0
    res = Results([Run("synthetic.json", synthetic_doc(version=version))])
    hbm, _, time = plot_block_size(res, res.devices()[0]).figure.axes
    assert time.get_yscale() == "linear" and time.get_ylim()[0] == 0


def _all_texts(fig):
    out = list(fig.texts) + [fig._suptitle] if fig._suptitle else list(fig.texts)
    for ax in fig.axes:
        out += [ax.title, ax._left_title, ax.xaxis.label, ax.yaxis.label, *ax.texts,
                *ax.get_xticklabels(), *ax.get_yticklabels()]
    for leg in fig.legends:
        out += leg.texts
    return [t for t in out if t.get_text()]


@pytest.mark.parametrize("files", [[SWEEP_ALL], [SWEEP_ALL, OUTLIERS_FULL], [SWEEP4, OUTLIERS]])
def test_fp8_accuracy_is_readable(files):
    plot = plot_fp8_accuracy(load(*files), H200)
    fig = plot.figure
    width, height = fig.get_size_inches()
    assert width <= 12 and height <= 16  # no 17-inch strip
    assert min(t.get_fontsize() for t in _all_texts(fig)) >= 8
    for ax in fig.axes:
        slots = len(ax.get_xticks())
        filled = {round(b.get_x() + b.get_width() / 2) for c in ax.containers
                  for b in getattr(c, "patches", ()) if b.get_height() > 0}
        assert len(filled) == slots  # every group of every panel has bars
        assert slots >= min(4, slots) and ax.get_xlim()[1] - ax.get_xlim()[0] <= 8.2


def budget_doc() -> dict:
    """The sweep with the fields the C++ side adds (model.onchip_budget_bytes and the paper's
    law in bytes_asymptotic), filled in here with made-up budgets: synthetic."""
    doc = raw(SWEEP_ALL)
    for c in doc["configs"]:
        for r in c["results"]:
            if r["algorithm"] == "standard" or r["peer"]:
                continue
            e = 1.0 if r["algorithm"] == "fp8" else 2.0
            m = 4 * 64 * 128 * e  # budget with Br = M/(4d) = 64 at d = 128
            r["model"]["onchip_budget_bytes"] = m
            r["model"]["bytes_asymptotic"] = (8.0 * c["N"] ** 2 * c["d"] ** 2 * e / m
                                              * c["B"] * c["H"])
    return schema.validate(doc)


def test_bytes_against_d_shows_both_slopes():
    from reports.plots import plot_bytes_vs_d

    plot = plot_bytes_vs_d(load(SWEEP_ALL), H200)
    ax = plot.figure.axes[0]
    assert (ax.get_xscale(), ax.get_yscale()) == ("log", "log")
    assert "N = 16384" in plot.figure.get_suptitle()
    (fa2,) = lines(ax, "model-fa2")
    x, y = fa2.get_data()
    assert list(x) == [64, 128]
    assert math.log(y[1] / y[0], 2) == pytest.approx(1.0, abs=0.05)  # ∝ d with fixed tiles
    for gid, k in (("guide-d1", 1), ("guide-d2", 2)):
        (g,) = lines(ax, gid)
        gx, gy = g.get_data()
        assert math.log(gy[-1] / gy[0], 2) == pytest.approx(k)
    assert not lines(ax, "law-") and any("predate" in n for n in plot.notes)
    assert "fa2: model ∝ d^1.00." in plot.notes

    res = Results([Run("budget.json", budget_doc())])
    ax = plot_bytes_vs_d(res, H200).figure.axes[0]
    (law,) = lines(ax, "law-fa2")
    lx, ly = law.get_data()
    assert math.log(ly[1] / ly[0], 2) == pytest.approx(2.0)  # the paper's law ∝ d²
    assert not lines(ax, "law-standard")

    one_d = Results([Run("synthetic.json", synthetic_doc())])
    assert "two or more head dimensions" in plot_bytes_vs_d(one_d, one_d.devices()[0]).skipped


def test_bytes_against_tile_size_shows_which_law_holds():
    from reports.plots import plot_bytes_vs_tile

    plot = plot_bytes_vs_tile(load(TILES), H200)
    fa1_ax, fa2_ax = plot.figure.axes
    assert "Bc" in fa1_ax.get_xlabel() and "Br" in fa2_ax.get_xlabel()
    (model,) = lines(fa2_ax, "model-fa2-64")
    assert set(model.get_xdata()) == {64, 128}
    (dram,) = lines(fa2_ax, "dram-fa2-64")
    (l2,) = lines(fa2_ax, "l2-fa2-64")
    rows = [r for r in ok_rows(TILES) if r["algorithm"] == "fa2" and r["d"] == 64
            and not r["causal"] and r["N"] == 16384]
    assert sorted(dram.get_ydata()) == pytest.approx(sorted(
        r["measured"]["dram_bytes"] / (r["B"] * r["H"]) for r in rows))
    # the notes say which law holds: the model and L2 fall as 1/Br, DRAM stays flat (L2 hits)
    note = next(n for n in plot.notes if n.startswith("fa2 d=64"))
    assert "model ∝ Br^-0.99" in note and "measured DRAM ∝ Br^0.00" in note
    assert lines(fa2_ax, "guide-fa2-64") and lines(fa2_ax, "compulsory-fa2-64")
    assert "two or more tile sizes" in plot_bytes_vs_tile(load(COUNTERS), H200).skipped


# -- issue 11: one placement per row, same-precision peers ----------------------------------------


def placement_doc() -> dict:
    """A small synthetic file with fa-bench's ``placement`` objects; the values are made up and
    differ from what the Python formula would give, so the test sees which one is used."""
    doc = schema.new_document(
        "synthetic placement", device={"index": 0, "name": "synthetic GPU (not a measurement)",
                                       "uuid": "", "compute_capability": "9.0", "sm_count": 1,
                                       "memory_bytes": 0, "l2_bytes": 0},
        ceilings={"source": "measured (made up)", "dram_bytes_per_s": 1e12, "l2_bytes_per_s": 4e12,
                  "tensor_flops_per_s": {"bf16": 1e14, "fp16": 1e14, "fp8": 2e14}})
    model = {"flops_matrix": 1e12, "flops_convention": 1e12, "bytes_read": 1e9,
             "bytes_written": 1e8, "bytes_compulsory": 1e8}
    fa2 = schema.make_result("fa2", algorithm="fa2", status="ok", samples_ms=[20.0, 20.0],
                             model=model)
    fa2["placement"] = {"basis": "counters", "intensity_dram": 900.0, "intensity_l2": 15.0,
                        "attainable_tflops": 60.0, "fraction": 0.8333, "bound": "l2"}
    std = schema.make_result("standard", algorithm="standard", status="ok",
                             samples_ms=[40.0], model=model)
    std["placement"] = {"basis": "compulsory", "intensity_dram": 10000.0, "intensity_l2": None,
                        "attainable_tflops": 100.0, "fraction": 0.25, "bound": "compute"}
    doc["configs"].append(schema.make_config(B=1, H=8, N=4096, d=64, causal=False,
                                             dtype="bf16", seed=1, results=[fa2, std]))
    return schema.validate(doc)


def test_one_row_same_bound_and_fraction_in_json_table_plot_and_text(tmp_path):
    path = tmp_path / "placement.json"
    schema.write_results(placement_doc(), path)
    res = load(path)
    device = res.devices()[0]
    roof = table(tables(res), "roofline")
    line = next(x for x in roof.rows if x[5] == "fa2")
    assert line[roof.columns.index("bound")] == "L2"
    assert line[roof.columns.index("of attainable")] == "83%"
    assert line[roof.columns.index("attainable [TFLOP/s]")] == "60.0"
    assert line[roof.columns.index("intensity DRAM [FLOP/B]")] == "900.0"
    assert line[roof.columns.index("placed by")] == "file"
    line = next(x for x in roof.rows if x[5] == "standard")
    assert line[roof.columns.index("basis")] == "compulsory bytes"
    assert line[roof.columns.index("bound")] == "compute"
    assert line[roof.columns.index("of attainable")] == "25%"
    plot = plot_roofline(res, device)
    assert points(plot.figure, "point-dram-fa2") == [(900.0, 50.0)]
    assert points(plot.figure, "point-l2-fa2") == [(15.0, 50.0)]
    assert points(plot.figure, "point-compulsory-standard") == [(10000.0, 25.0)]
    reading = " ".join(roofline_reading(res))
    assert "fa2 is L2-bound at d=64, N=4096: 83% of the measured L2 bandwidth" in reading
    # the markdown and the console table quote the same
    out = tmp_path / "out"
    p = run_cli(str(path), "-o", str(out))
    assert p.returncode == 0, p.stderr
    md = (out / "report.md").read_text()
    assert "| fa2 | counters | 900.0 | 15.0 | 50.0 | 60.0 | L2 | 83% |" in md
    p = run_cli(str(path))
    fa2_line = next(x for x in p.stdout.splitlines() if x.strip().startswith("fa2"))
    assert fa2_line.split()[-2:] == ["l2", "83%"]


def test_vs_peer_is_against_the_same_precision():
    doc = raw(COUNTERS)
    for config in doc["configs"]:
        by = {r["variant"]: r for r in config["results"]}
        for name, src, factor in (("cudnn", "fa2", 0.5), ("cudnn-fp8", "fp8", 0.25)):
            peer = copy.deepcopy(by[src])
            peer.update(variant=name, peer=True)
            peer.pop("counters")
            peer.pop("measured")
            peer["timing"]["median_ms"] = by[src]["timing"]["median_ms"] * factor
            config["results"].append(peer)
    res = Results([Run("peers.json", schema.validate(doc))])
    from reports.report import fastest_summary

    summary = " ".join(fastest_summary(res))
    # bf16 rows against cudnn (not the faster cudnn-fp8), fp8 rows against cudnn-fp8
    assert "bf16 rows: best of ours (fa2) runs at 2.00× the speed of the best bf16 peer (cudnn)" \
        not in summary  # fa2 is not 2x faster: the ratio is cudnn's time / fa2's
    assert "bf16 rows: best of ours (fa2) runs at 0.50× the speed of the best bf16 peer (cudnn)" \
        in summary
    assert "fp8 rows: best of ours (fp8) runs at 0.25× the speed of the best fp8 peer " \
        "(cudnn-fp8)" in summary


# -- issue 13: reports at scale and on error ------------------------------------------------------


FA3_DEFAULT = {64: (kc(192, 128, warpgroups=4), "no-pingpong"),
               128: (kc(128, 128, warpgroups=3), "full")}
FP8_DEFAULT = {64: "tiles", 128: "persistent-tma-store"}


def sweep_doc(ns=range(1000, 2000), ds=(64, 128), variants=("standard", "fa2", "fa3", "fp8",
                                                             "cudnn"), extra=()) -> dict:
    """A fa-bench/3 record of a sweep, made up (a synthetic device; numbers that pass the
    schema): every N of ``ns`` at every d of ``ds``, both masks, one row per variant, as
    fa-bench marks them: fa3 and fp8 at their per-shape default tile and schedule
    (default_config/default_options true). ``extra``: (variant, options) rows the user chose
    on top (default_options false)."""
    dev = {"index": 0, "name": "synthetic sweep (not a measurement)", "uuid": "GPU-synthetic",
           "compute_capability": "9.0", "sm_count": 132, "memory_bytes": 1, "l2_bytes": 1}
    doc = schema.new_document("fa-bench (synthetic sweep)", device=dev, version=V2, ceilings={
        "source": "measured (made up)", "dram_bytes_per_s": 4.5e12, "l2_bytes_per_s": 1e13,
        "tensor_flops_per_s": {"bf16": 8e14, "fp16": 8e14, "fp8": 1.6e15}})
    doc["schema"] = "fa-bench/3"
    ver = {"passed": True, "all_finite": True, "nonfinite_count": 0, "max_abs_error": 0.004,
           "rmse": 0.0004, "baseline_max_abs_error": 0.008, "tolerance": 0.02,
           "rows_checked": 64, "heads_checked": 4}
    template = json.dumps(schema.make_result(
        "x", algorithm="fa2", status="ok", samples_ms=[1.0, 1.0, 1.0], verification=ver,
        version=V2, kernel_config=kc(), options={}, default_config=True, default_options=True))
    speed = {"standard": 0.2, "fa2": 0.45, "fa3": 0.65, "fp8": 0.9, "cudnn": 0.63}
    algorithm = {"standard": "standard", "fa2": "fa2", "fa3": "fa2", "fp8": "fp8", "cudnn": "fa2"}
    wobble = [1.0, 1.03, 0.98, 1.05, 0.96, 1.01, 0.99]
    i = 0
    for n in ns:
        for d in ds:
            for causal in (False, True):
                B, H = 4, 16
                flops = 4.0 * B * H * n * n * d * (0.5 if causal else 1.0)
                comp = 4.0 * B * H * n * d * 2
                results = []
                for name, chosen in [(v, None) for v in variants] + list(extra):
                    i += 1
                    r = json.loads(template)
                    ms = flops / (speed[name] * 1e15 * wobble[i % 7]) * 1e3
                    xs = [ms, ms * 1.01, ms * 0.99]
                    r["timing"].update(samples_ms=xs, **schema.summarize(xs))
                    total = comp * (n / 32 if name == "standard" else 1.3)
                    r["model"].update(flops_matrix=flops, flops_convention=flops,
                                      bytes_read=0.8 * total, bytes_written=0.2 * total,
                                      bytes_compulsory=comp)
                    r["derived"] = schema.derive(r["model"], ms)
                    r.update(variant=name, algorithm=algorithm[name], peer=name == "cudnn")
                    if name == "fa3":
                        config, schedule = FA3_DEFAULT[d]
                        r.update(kernel_config=config, options={"schedule": schedule})
                    elif name == "fp8":
                        r.update(kernel_config=FA3_DEFAULT[d][0], options={
                            "fp8_scale": "block", "fp8_schedule": FP8_DEFAULT[d],
                            "prequantized": False})
                        r["verification"] = {**ver, "metric": "rmse",
                                             "rmse": 0.01 * wobble[i % 7],
                                             "baseline_rmse": 0.02 * wobble[(i + 3) % 7],
                                             "tolerance": 0.05}
                    elif name == "fa2":
                        r["options"] = {"block_order": "blocks"}
                    else:
                        r["kernel_config"] = None
                    if chosen:
                        r["options"].update(chosen)
                        r["default_options"] = all(
                            r["options"].get(k) == v for k, v in (
                                {"schedule": FA3_DEFAULT[d][1]} if name == "fa3" else
                                {"fp8_schedule": FP8_DEFAULT[d], "prequantized": False}).items())
                        if r["default_options"]:
                            continue  # the default row is there already
                    results.append(r)
                c = schema.make_config(B=B, H=H, N=n, d=d, causal=causal, dtype="bf16", seed=1,
                                       results=results)
                c["gpu"] = {"uuid": dev["uuid"], "name": dev["name"]}
                doc["configs"].append(c)
    return doc


def test_a_default_schedule_is_an_attribute_of_the_point_not_a_series():
    """fa3 and fp8 pick their tile and schedule per shape: one series each, with what ran at
    each shape in the kernel table; a schedule the user chose is a series of its own."""
    doc = sweep_doc(ns=(1024, 2048, 4096), extra=[("fa3", {"schedule": "full"}),
                                                  ("fp8", {"prequantized": True})])
    res = Results([Run("sweep.json", schema.validate(doc))])
    assert sorted({r["label"] for r in res.rows}) == [
        "cudnn", "fa2", "fa3", "fa3~full", "fp8", "fp8~prequantized=true", "standard"]
    # at d=128 "full" is fa3's default: that row is fa3's point there, not fa3~full's
    full = {(r["d"], r["label"]) for r in res.rows if r["options"].get("schedule") == "full"}
    assert full == {(64, "fa3~full"), (128, "fa3")}
    tput = plot_throughput(res, res.devices()[0]).figure
    legend = [t.get_text() for t in tput.axes[-1].get_legend().texts]
    assert legend[:7] == ["standard", "fa2", "fa3", "fp8", "cudnn (peer)", "fa3~full",
                          "fp8~prequantized=true"]
    # one line per series and mask in each panel: the per-shape defaults do not break it
    for ax in tput.axes:
        assert len(lines(ax, "tput-fa3-full")) == 1 and len(lines(ax, "tput-fp8-full")) == 1
    configs = table(tables(res), "kernel-configs")
    fa3 = [row for row in configs.rows if row[0] == "fa3"]
    assert [row[1:] for row in fa3] == [
        ["128×128, 2 stages, 3 warpgroups; schedule full",
         "d=128 non-causal N=1024–4096 (3 sizes); d=128 causal N=1024–4096 (3 sizes)"],
        ["192×128, 2 stages, 4 warpgroups; schedule no-pingpong",
         "d=64 non-causal N=1024–4096 (3 sizes); d=64 causal N=1024–4096 (3 sizes)"]]


def test_io_scaling_says_each_law_once_and_titles_fit():
    res = Results([Run("sweep.json", schema.validate(sweep_doc(ns=(1024, 2048, 4096))))])
    plot = plot_io_scaling(res, res.devices()[0])
    fig = plot.figure
    laws = [t.get_text() for t in fig.legends[0].texts]
    assert sum("K/V re-read" in t for t in laws) == 1  # fa2, fa3, fp8 and cudnn: one entry
    assert any(t.startswith("IO model of fa2, fa3, fp8, cudnn (peer)") for t in laws)
    fig.draw_without_rendering()
    width = fig.bbox.width
    for text in (fig._suptitle, *fig.legends[0].texts):
        box = text.get_window_extent()
        assert box.x0 >= 0 and box.x1 <= width, text.get_text()


def test_a_sweep_of_4000_configurations_reports_within_a_minute(tmp_path):
    """A 20,000-row record (all variants at N = 1000-1999, d 64 and 128, both masks) reports
    in under a minute of CPU: plots summarise (N ticks, FP8 bars per (d, mask) over N, tables
    sampled), so the report's size does not grow with the sweep."""
    if VERSION == V2:
        pytest.skip("the record is fa-bench/3 already: once is enough")
    path = tmp_path / "sweep.json"
    path.write_text(json.dumps(sweep_doc()))
    out = tmp_path / "out"
    before = os.times()
    start = time.monotonic()
    p = subprocess.run([sys.executable, "-m", "reports", str(path), "-o", str(out)],
                       cwd=REPO_ROOT, capture_output=True, text=True, timeout=600)
    wall = time.monotonic() - start
    after = os.times()
    cpu = (after.children_user - before.children_user) + (
        after.children_system - before.children_system)
    assert p.returncode == 0, p.stderr
    print(f"4,000 configurations: {cpu:.1f} s CPU, {wall:.1f} s wall")
    assert cpu < 60, f"{cpu:.1f} s CPU ({wall:.1f} s wall)"
    md = (out / "report.md").read_text()
    assert "20000 rows, 20000 timed" in md
    assert "configurations shown (evenly spaced)" in md
    assert (out / "report.md").stat().st_size < 1_000_000
    assert (out / "report.html").stat().st_size < 8_000_000
    for png in out.glob("*.png"):
        h, w = matplotlib.image.imread(png).shape[:2]
        assert h * w < 12e6, (png.name, w, h)
    assert sum(f.stat().st_size for f in out.iterdir()) < 12_000_000


def test_output_path_that_is_a_file_is_refused(tmp_path):
    target = tmp_path / "a-file"
    target.write_text("keep me")
    for out in (target, target / "sub"):
        p = run_cli(str(COUNTERS), "-o", str(out))
        assert p.returncode == 2
        assert p.stderr.count("\n") == 1 and "Traceback" not in p.stderr
        assert p.stderr.startswith(f"error: {out}: ") and "no report written" in p.stderr
    assert target.read_text() == "keep me"
    assert sorted(x.name for x in tmp_path.iterdir()) == ["a-file"]


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into read-only folders")
def test_read_only_output_folder_is_refused(tmp_path):
    ro = tmp_path / "ro"
    ro.mkdir()
    ro.chmod(0o555)
    try:
        for out in (ro, ro / "new"):
            p = run_cli(str(COUNTERS), "-o", str(out))
            assert p.returncode == 2 and p.stderr.count("\n") == 1, p.stderr
            assert "not writable" in p.stderr and "Traceback" not in p.stderr
        assert not list(ro.iterdir())
    finally:
        ro.chmod(0o755)


def test_a_failure_while_writing_leaves_nothing_behind(tmp_path, monkeypatch, capsys):
    """Disk full after some files were written: exit 2, one line, no half-written folder."""
    import reports.__main__ as cli
    import reports.plots

    real_save = reports.plots.save
    calls = []

    def failing_save(plot, outdir):
        calls.append(plot.name)
        if len(calls) == 2:  # one plot written (each save draws its figure: ~2 s here)
            raise OSError(28, "No space left on device")
        real_save(plot, outdir)

    monkeypatch.setattr(reports.plots, "save", failing_save)
    monkeypatch.setattr("reports.report.save", failing_save)
    new = tmp_path / "new"
    assert cli.main([str(COUNTERS), "-o", str(new)]) == 2
    err = capsys.readouterr().err
    assert err == f"error: {new}: cannot write the report: No space left on device; no report written\n"
    assert not new.exists() and not list(tmp_path.iterdir())
    old = tmp_path / "old"
    old.mkdir()
    (old / "report.md").write_text("the previous report")
    calls.clear()
    assert cli.main([str(COUNTERS), "-o", str(old)]) == 2
    assert [x.name for x in old.iterdir()] == ["report.md"]
    assert (old / "report.md").read_text() == "the previous report"


# -- both versions -------------------------------------------------------------------------------


def test_files_are_read_in_the_version_under_test(version):
    """The module really runs on /2 documents the second time, and names and marks their rows
    as it does the /1 ones (fa-bench/2: the default rows are the variant, the other tiles
    named by what differs from it; fa2's block order when both orders ran and the file does
    not say which is the default)."""
    assert schema.load_results(TILES)["schema"] == version
    res = load(TILES)
    assert sorted({r["label"] for r in res.rows}) == sorted(
        ["fa1", "fa1@128x128", "fa1@64x64", "fa2", "fa2@128x128", "fa2@128x32", "fa2@64x64"])
    assert {r["variant"] for r in res.rows} == (
        {"fa1", "fa2"} if version == V2 else {r["label"] for r in res.rows})
    assert sum(r["tile_variant"] for r in res.rows) == 16
    assert all(r["tile_variant"] == ("@" in r["label"]) for r in res.rows)
    order = load(DATA / "fa2-order-both-h200.json")
    assert sorted({r["label"] for r in order.rows}) == (
        ["fa2", "fa2~heads"] if version == V1 else ["fa2~blocks", "fa2~heads"])
    assert not any(r["tile_variant"] for r in order.rows)
    tput = plot_throughput(order, H200).figure
    legend = [t.get_text() for t in tput.axes[-1].get_legend().texts]
    assert legend[:2] == (["fa2", "fa2~heads"] if version == V1 else ["fa2~blocks", "fa2~heads"])


# -- grouped-query and non-square configurations (fa-bench/4) ----------------------------------


LENGTHS = [512, 4096, 1024, 2048, 4096, 3000, 2712, 2512]  # "512..4096/sum=20000"
KV_SHAPES = {"square": {"B": 1, "H": 32, "N": 4096}, "gqa": {"B": 1, "H": 32, "H_kv": 8, "N": 4096},
             "decode": {"B": 8, "H": 32, "N": 1, "N_kv": 4096},
             "paged": {"B": 8, "H": 32, "N": 1, "N_kv": 4096, "page_size": 64},
             "ragged": {"B": 8, "H": 32, "N": 1, "N_kv": 4096, "kv_lengths": LENGTHS},
             "paged-ragged": {"B": 8, "H": 32, "N": 1, "N_kv": 4096, "page_size": 64,
                              "kv_lengths": LENGTHS},
             "paged-prefill": {"B": 1, "H": 32, "N": 4096, "page_size": 64}}
KV_KEYS = {"fa-bench/3": (), "fa-bench/4": ("H_kv", "N_kv"),
           "fa-bench/5": ("H_kv", "N_kv", "page_size", "kv_lengths")}


def kv_doc(version: str = "fa-bench/4", kinds=("square", "gqa", "decode")) -> dict:
    """A made-up record (a synthetic device): fa2 and standard timed at d=128, non-causal, on
    each of ``kinds``: square multi-head attention (B=1, H=32, N=4096), grouped-query (H_kv=8),
    decode (B=8, N=1, N_kv=4096); fa-bench/5 also a paged cache (pages of 64) and sequences of
    their own lengths, at decode and at N=4096. fa-bench/3: written without H_kv and N_kv, as /3
    files are."""
    dev = {"index": 0, "name": "synthetic GQA device (not a measurement)", "uuid": "GPU-kv",
           "compute_capability": "9.0", "sm_count": 132, "memory_bytes": 1, "l2_bytes": 1}
    doc = schema.new_document("fa-bench (synthetic GQA and decode)", device=dev, version=version,
                              ceilings={"source": "measured (made up)", "dram_bytes_per_s": 4.5e12,
                                        "tensor_flops_per_s": {"bf16": 8e14, "fp16": 8e14}})
    doc["created_utc"] = "2026-11-21T10:00:00Z"
    for kind in kinds:
        shape = KV_SHAPES[kind]
        b, h, n = shape["B"], shape["H"], shape["N"]
        n_kv = shape.get("N_kv", n)
        flops = schema.flops_convention(B=b, H=h, N=n, N_kv=n_kv, d=128, causal=False,
                                        kv_lengths=shape.get("kv_lengths"))
        results = []
        for name, speed in (("fa2", 0.5), ("standard", 0.2)):
            ms = flops / (speed * 1e15) * 1e3 * (3 if kind == "decode" else 1)
            model = {"flops_matrix": flops, "flops_convention": flops, "bytes_read": 1e8,
                     "bytes_written": 1e7, "bytes_compulsory": 5e7}
            results.append(schema.make_result(
                name, algorithm=name, status="ok", samples_ms=[ms, ms * 1.01, ms * 0.99],
                model=model, version=version, default_config=True, default_options=True,
                kernel_config=kc() if name == "fa2" else None,
                options={"block_order": "blocks"} if name == "fa2" else {}))
        kv = {k: v for k, v in shape.items() if k in KV_KEYS[version]}
        doc["configs"].append(schema.make_config(
            B=b, H=h, N=n, d=128, causal=False, dtype="bf16", seed=1, results=results,
            gpu={"uuid": dev["uuid"], "name": dev["name"]}, version=version, **kv))
    return schema.validate(doc)


def test_gqa_and_decode_rows_are_configurations_of_their_own_and_say_so():
    """Grouped-query and decode rows get a table row each, named by what differs ("1×32 (H_kv
    8)", "1 (N_kv 4096)"); they race among their own kind in the summary; the throughput plot
    gives grouped-query rows their own panel and leaves N_kv ≠ N rows to the tables."""
    if VERSION == V2:
        pytest.skip("the record is fa-bench/4 already: once is enough")
    from reports.report import fastest_summary

    res = Results([Run("kv.json", kv_doc())])
    tabs = tables(res)
    time = table(tabs, "time")
    assert [row[:5] for row in time.rows] == [
        ["1 (N_kv 4096)", "128", "non-causal", "bf16", "8×32"],
        ["4096", "128", "non-causal", "bf16", "1×32"],
        ["4096", "128", "non-causal", "bf16", "1×32 (H_kv 8)"]]
    for key in ("bytes", "roofline"):
        cells = sorted(tuple(row[:5]) for row in table(tabs, key).rows)
        assert len(cells) == 6 and len(set(cells)) == 3, (key, cells)
    assert "N·N_kv" in table(tabs, "tflops").title
    summary = fastest_summary(res)
    assert [s.split(":")[0] for s in summary] == [
        "bf16, d=128, non-causal", "bf16, d=128, non-causal, N_kv 4096",
        "bf16, d=128, non-causal, H_kv 8"]
    assert all("fa2 is fastest at N = " in s for s in summary), summary
    plot = plot_throughput(res, res.devices()[0])
    assert [ax.get_title(loc="left") for ax in plot.figure.axes] == ["d = 128", "d = 128, H_kv = 8"]
    for ax in plot.figure.axes:
        assert [len(ln.get_xdata()) for ln in lines(ax, "tput-")] == [1, 1]  # fa2, standard
    assert any("2 row(s) whose K/V length differs from N" in n for n in plot.notes), plot.notes
    configs = table(tabs, "kernel-configs")
    assert configs.rows == [["fa2", "128×64, 2 stages; block_order blocks",
                             "d=128 non-causal N=4096; d=128 non-causal N=1, N_kv 4096; "
                             "d=128 non-causal N=4096, H_kv 8"]]


def test_paged_and_ragged_rows_are_configurations_of_their_own_and_say_so():
    """fa-bench/5: a paged cache and sequences of their own lengths make configurations of their
    own, named in the N column ("1 (N_kv 4096, pages of 64)", "1 (N_kv ≤4096, lengths
    512..4096/sum=20000)"); they race among their own kind; the plots against N leave them to the
    tables; square contiguous rows read as ever."""
    if VERSION == V2:
        pytest.skip("the record is fa-bench/5 already: once is enough")
    from reports.report import fastest_summary

    kinds = ("square", "decode", "paged", "ragged", "paged-ragged", "paged-prefill")
    res = Results([Run("kv.json", kv_doc("fa-bench/5", kinds=kinds))])
    assert {(r["page_size"], r["kv_lengths"]) for r in res.rows} == {
        (0, None), (64, None), (0, tuple(LENGTHS)), (64, tuple(LENGTHS))}
    tabs = tables(res)
    time = table(tabs, "time")
    lengths = "lengths 512..4096/sum=20000"
    assert [row[:5] for row in time.rows] == [
        ["1 (N_kv 4096)", "128", "non-causal", "bf16", "8×32"],
        [f"1 (N_kv ≤4096, {lengths})", "128", "non-causal", "bf16", "8×32"],
        ["1 (N_kv 4096, pages of 64)", "128", "non-causal", "bf16", "8×32"],
        [f"1 (N_kv ≤4096, {lengths}, pages of 64)", "128", "non-causal", "bf16", "8×32"],
        ["4096", "128", "non-causal", "bf16", "1×32"],
        ["4096 (pages of 64)", "128", "non-causal", "bf16", "1×32"]]
    for key in ("bytes", "roofline"):
        cells = sorted(tuple(row[:5]) for row in table(tabs, key).rows)
        assert len(cells) == 12 and len(set(cells)) == 6, (key, cells)
    assert "Σ_b" in table(tabs, "tflops").title
    summary = fastest_summary(res)
    assert sorted(s.split(":")[0] for s in summary) == sorted([
        "bf16, d=128, non-causal", "bf16, d=128, non-causal, N_kv 4096",
        "bf16, d=128, non-causal, pages of 64", "bf16, d=128, non-causal, N_kv 4096, pages of 64",
        f"bf16, d=128, non-causal, N_kv ≤4096, {lengths}",
        f"bf16, d=128, non-causal, N_kv ≤4096, {lengths}, pages of 64"])
    assert all("fa2 is fastest at N = " in s for s in summary), summary
    plot = plot_throughput(res, res.devices()[0])
    assert [ax.get_title(loc="left") for ax in plot.figure.axes] == ["d = 128"]
    assert [len(ln.get_xdata()) for ln in lines(plot.figure.axes[0], "tput-")] == [1, 1]
    assert any("8 row(s) whose K/V length differs from N" in n for n in plot.notes), plot.notes
    assert any("2 row(s) of a paged K/V cache" in n for n in plot.notes), plot.notes
    configs = table(tabs, "kernel-configs")
    assert configs.rows[0][2].count(";") == 5, configs.rows


def test_square_rows_read_the_same_in_v5_as_in_v3_and_v4():
    """A square contiguous multi-head configuration written by fa-bench/5 (page_size 0,
    kv_lengths null) is reported exactly as the same configuration written by /3 and /4."""
    if VERSION == V2:
        pytest.skip("the records are fa-bench/3 to /5 already: once is enough")
    from reports.report import fastest_summary

    docs = [Results([Run("kv.json", kv_doc(v, kinds=("square", "decode")))])
            for v in ("fa-bench/4", "fa-bench/5")]
    v4, v5 = docs
    for key in ("time", "tflops", "bytes", "roofline", "errors", "kernel-configs"):
        a, b = table(tables(v4), key), table(tables(v5), key)
        assert (a.title, a.columns, a.rows, a.note) == (b.title, b.columns, b.rows, b.note), key
    assert fastest_summary(v4) == fastest_summary(v5)
    assert roofline_reading(v4) == roofline_reading(v5)
    v3 = Results([Run("kv.json", kv_doc("fa-bench/3", kinds=("square",)))])
    square = Results([Run("kv.json", kv_doc("fa-bench/5", kinds=("square",)))])
    assert table(tables(v3), "time").rows == table(tables(square), "time").rows


def test_square_rows_read_the_same_in_v4_as_in_v3():
    """A square multi-head configuration written by fa-bench/4 (H_kv = H, N_kv = N) is reported
    exactly as the same configuration written by fa-bench/3: tables, sentences, labels."""
    if VERSION == V2:
        pytest.skip("the records are fa-bench/3 and /4 already: once is enough")
    from reports.report import fastest_summary

    v3, v4 = (Results([Run("kv.json", kv_doc(v, kinds=("square",)))])
              for v in ("fa-bench/3", "fa-bench/4"))
    assert [r["label"] for r in v3.rows] == [r["label"] for r in v4.rows] == ["fa2", "standard"]
    for key in ("time", "tflops", "bytes", "roofline", "errors", "kernel-configs"):
        a, b = table(tables(v3), key), table(tables(v4), key)
        assert (a.title, a.columns, a.rows, a.note) == (b.title, b.columns, b.rows, b.note), key
    assert table(tables(v4), "time").rows[0][:5] == ["4096", "128", "non-causal", "bf16", "1×32"]
    assert fastest_summary(v3) == fastest_summary(v4)
    assert roofline_reading(v3) == roofline_reading(v4)
