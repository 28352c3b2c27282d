"""Tests of the report (reports/data.py, plots.py, report.py, ``python -m reports -o``) on the
real H200 result files in tests/data/. Plots are checked through matplotlib's objects (artists
tagged with a gid), tables through their cells, the HTML in headless Chromium.

Documents built in this file (block-size sweep, peers, per-kernel counters) are synthetic and
say so in their device name; they exercise code paths the H200 fixtures do not reach yet.
"""

from __future__ import annotations

import copy
import json
import shutil
import subprocess
import sys
from pathlib import Path

import matplotlib.image
import numpy as np
import pytest

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
COUNTERS = DATA / "h200-counters-2026-11-21.json"
SWEEP4 = DATA / "h200-sweep-4variants-2026-11-21.json"
OUTLIERS = DATA / "h200-outliers-2026-11-21.json"
H200 = "NVIDIA H200"


def load(*paths: Path) -> Results:
    return Results.load([str(p) for p in paths])


def lines(ax, prefix: str):
    return [ln for ln in ax.get_lines() if (ln.get_gid() or "").startswith(prefix)]


def bars(ax, gid: str):
    return [c for c in ax.containers if c.patches and c.patches[0].get_gid() == gid]


def ok_rows(path: Path) -> list[dict]:
    return [r for r in schema.rows(schema.load_results(path)) if r["status"] == "ok"]


@pytest.fixture(scope="module")
def counters() -> Results:
    return load(COUNTERS)


# -- roofline ------------------------------------------------------------------------------------


def test_roofline_points_and_roofs_from_counters(counters):
    plot = plot_roofline(counters, H200)
    assert plot.figure is not None, plot.skipped
    ax = plot.figure.axes[0]
    assert (ax.get_xscale(), ax.get_yscale()) == ("log", "log")
    assert "FLOP/byte" in ax.get_xlabel() and "TFLOP/s" in ax.get_ylabel()
    title = plot.figure.get_suptitle()
    for part in ("NVIDIA H200", "bf16", "B·H = 64–512", "2026-11-21"):
        assert part in title

    rows = ok_rows(COUNTERS)
    dram, l2 = lines(ax, "point-dram-"), lines(ax, "point-l2-")
    assert len(dram) == len(l2) == len(rows) == 32
    assert not lines(ax, "point-model-")
    # every row is a point at (measured DRAM intensity, matrix FLOPs / median time)
    got = sorted((ln.get_xdata()[0], ln.get_ydata()[0]) for ln in dram)
    want = sorted((r["measured"]["intensity_dram"],
                   r["model"]["flops_matrix"] / (r["median_ms"] * 1e-3) / 1e12) for r in rows)
    np.testing.assert_allclose(got, want, rtol=1e-12)
    # one marker per variant, the same colour for DRAM and L2 points of a variant
    by_variant = {}
    for ln in dram + l2:
        v = ln.get_gid().split("-", 2)[2]
        by_variant.setdefault(v, set()).add((ln.get_marker(), ln.get_color()))
    assert set(by_variant) == {"standard", "fa1", "fa2", "fp8"}
    assert all(len(s) == 1 for s in by_variant.values())
    assert len({next(iter(s)) for s in by_variant.values()}) == 4

    ceilings = json.loads(COUNTERS.read_text())["ceilings"]
    peaks = {ln.get_gid(): ln.get_ydata()[0] for ln in lines(ax, "roof-peak-")}
    assert peaks == pytest.approx({"roof-peak-bf16": ceilings["tensor_flops_per_s"]["bf16"] / 1e12,
                                   "roof-peak-fp8": ceilings["tensor_flops_per_s"]["fp8"] / 1e12})
    sheet = {ln.get_gid(): ln for ln in lines(ax, "roof-sheet-")}
    assert sheet["roof-sheet-bf16"].get_ydata()[0] == pytest.approx(
        ceilings["datasheet"]["tensor_flops_per_s_bf16"] / 1e12)
    assert all(ln.get_linestyle() == "--" for ln in sheet.values())
    for label, key in (("DRAM", "dram_bytes_per_s"), ("L2", "l2_bytes_per_s")):
        (roof,) = [ln for ln in ax.get_lines() if ln.get_gid() == f"roof-bw-{label}"]
        x, y = roof.get_data()
        assert y[0] / x[0] == pytest.approx(ceilings[key] / 1e12)
        assert roof.get_linestyle() == "-"
    (sheet_bw,) = lines(ax, "roof-bw-DRAM datasheet")
    assert sheet_bw.get_linestyle() == "--"
    # the roof labels quote the measured values
    texts = " ".join(t.get_text() for t in ax.texts)
    assert "DRAM 3.90 TB/s (measured)" in texts and "bf16 tensor 790 TFLOP/s" in texts


def test_roofline_without_counters_uses_model_intensity_and_datasheet_roofs():
    plot = plot_roofline(load(SWEEP4), H200)
    ax = plot.figure.axes[0]
    rows = ok_rows(SWEEP4)
    model = lines(ax, "point-model-")
    assert len(model) == len(rows) == 48 and not lines(ax, "point-dram-")
    assert sorted(ln.get_xdata()[0] for ln in model) == pytest.approx(
        sorted(r["derived"]["arithmetic_intensity"] for r in rows))
    assert all(ln.get_fillstyle() == "left" for ln in model)
    assert not lines(ax, "roof-sheet-")  # the roofs are the datasheet's already
    assert all(ln.get_linestyle() == "--" for ln in lines(ax, "roof-"))
    assert plot.notes


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
    no_fp8 = load(DATA / "h200-sweep-2026-11-21.json")
    assert "no verified fp8 rows" in plot_fp8_accuracy(no_fp8, H200).skipped


def synthetic_doc(device: str = "synthetic test device (not a measurement)") -> dict:
    """A block-size sweep made up for the test: fa2 and fa1 at three tile shapes."""
    doc = schema.new_document(
        "synthetic", device={"name": device, "compute_capability": "9.0", "sm_count": 1},
        ceilings={"source": "datasheet (made up)", "dram_bytes_per_s": 1e12,
                  "tensor_flops_per_s": {"bf16": 1e14, "fp16": 1e14}})
    results = []
    for alg, base in (("fa2", 1.0), ("fa1", 3.0)):
        for i, (bq, bk) in enumerate(((128, 64), (64, 64), (128, 128))):
            model = {"flops_matrix": 1e12, "flops_convention": 1e12,
                     "bytes_read": 1e9 * (i + 1), "bytes_written": 1e8,
                     "bytes_compulsory": 1e8}
            name = alg if i == 0 else f"{alg}@{bq}x{bk}"
            results.append(schema.make_result(
                name, algorithm=alg, status="ok", tiles={"block_q": bq, "block_kv": bk},
                samples_ms=[base + i, base + i], model=model))
    doc["configs"].append(schema.make_config(B=1, H=8, N=4096, d=64, causal=False,
                                             dtype="bf16", seed=1, results=results))
    return schema.validate(doc)


def test_block_size_plot_on_a_synthetic_tile_sweep():
    res = Results([Run("synthetic.json", synthetic_doc())])
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
    # tile rows are kept out of the throughput plot
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
    std = next(r for r in rows if (r["variant"], r["N"], r["d"], r["causal"])
               == ("standard", 4096, 64, False))
    line = next(x for x in roof.rows if x[:3] == ["4096", "64", "non-causal"] and x[5] == "standard")
    assert line[roof.columns.index("binding roof")] == "DRAM"
    # the DRAM-roof fraction is fa-bench's own measured.roofline_fraction
    assert line[roof.columns.index("of roof")] == fmt_pct(std["measured"]["roofline_fraction"])

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
    pct = fmt_pct(std["measured"]["roofline_fraction"])
    assert any(s.startswith("standard is DRAM-bound at d=64, N=4096") and pct in s
               for s in reading)
    fa2 = next(r for r in rows if (r["variant"], r["N"], r["d"], r["causal"])
               == ("fa2", 4096, 128, False))
    peak = json.loads(COUNTERS.read_text())["ceilings"]["tensor_flops_per_s"]["bf16"]
    want = fmt_pct(fa2["model"]["flops_matrix"] / (fa2["median_ms"] * 1e-3) / peak)
    assert f"fa2 reaches {want} of the measured bf16 tensor roof" in " ".join(reading)


def test_peers_and_per_kernel_counters_when_present():
    """Peer rows, derived.best_peer and counters.kernels (added to a copy of a real file; the
    peer's numbers are made up for the test)."""
    doc = copy.deepcopy(json.loads(COUNTERS.read_text()))
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
    (peer_point,) = {ln.get_marker() for ln in lines(plot.figure.axes[0], "point-model-cudnn")}
    assert peer_point not in {"s", "^", "o", "D"}
    legend = [t.get_text() for t in plot.figure.axes[0].get_legend().texts]
    from reports.report import fastest_summary

    summary = " ".join(fastest_summary(res))
    assert "cudnn (peer) is fastest" in summary and "0.50× the speed of the best peer" in summary
    assert legend  # the fill legend exists; the variant legend is the first artist
    # absent keys never break anything
    assert plot_roofline(load(SWEEP4), H200).figure is not None


# -- the command ----------------------------------------------------------------------------------


def run_cli(*args: str, cwd: Path = REPO_ROOT) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "reports", *args], cwd=cwd, capture_output=True,
                          text=True, timeout=300)


@pytest.fixture(scope="module")
def report_dir(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("report")
    p = run_cli(str(COUNTERS), str(OUTLIERS), "-o", str(out))
    assert p.returncode == 0, p.stderr
    assert "skipped plot block-size" in p.stdout
    return out


def test_report_files(report_dir):
    for name in ("roofline", "io-scaling", "throughput", "fp8-accuracy"):
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
    assert html.count('src="data:image/png;base64,') == 4  # self-contained


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
    doc = json.loads(COUNTERS.read_text())
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


def test_two_devices_side_by_side():
    res = Results([Run(str(SWEEP4), schema.load_results(SWEEP4)),
                   Run("synthetic.json", synthetic_doc("Synthetic GPU"))])
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
    assert 'id="probe">loaded 4 of 4<' in p.stdout, p.stderr[-2000:]
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
