"""Rows of fa-bench/2 files are named by their identity (variant, direction, kernel_config,
options), never by a decorated variant name: reports/schema.py ``row_label`` against the C++
``row_label`` (bench/result.cpp) on the same files, the report-wide labels of reports/data.py,
the tile rows read from ``default_config``, and a report rendered from a /2 file with a tile
sweep and both fa2 block orders.

The C++ labels come from fa-bench itself: the CSV it writes beside --json (one row_label per
row) and the Markdown table of ``fa-bench gate`` (which reads any /2 file, so every part of a
label can be exercised, also those no variant has yet: stages, warpgroups, cluster, numbers,
bools, backward).
"""

from __future__ import annotations

import copy
import csv
import json
import subprocess
import sys
from pathlib import Path

import pytest
from test_json_schema import require_binary

from reports import schema
from reports.data import Results, Run
from reports.plots import plot_block_size, plot_throughput
from reports.report import tables

REPO_ROOT = Path(__file__).resolve().parents[2]
DATA = REPO_ROOT / "tests" / "data"
V2 = "fa-bench/2"
SWEEP = ["--variants", "standard,fa1,fa2,cudnn", "--block-q", "64,128", "--block-kv", "64",
         "--fa2-order", "both"]


def kc(bq: int = 128, bk: int = 64, stages: int = 2, warpgroups: int = 0,
       cluster: tuple = (1, 1, 1)) -> dict:
    return {"block_q": bq, "block_kv": bk, "stages": stages, "warpgroups": warpgroups,
            "cluster": list(cluster)}


def model_only(tmp_path: Path, name: str, *args: str) -> tuple[Path, list[str]]:
    """Runs fa-bench --model-only; returns the JSON file and the labels its CSV holds."""
    out, table = tmp_path / f"{name}.json", tmp_path / f"{name}.csv"
    run = subprocess.run([str(require_binary("fa-bench")), "--model-only", *args,
                          "--json", str(out), "--csv", str(table)],
                         capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr
    with table.open(newline="") as f:
        labels = [row["variant"] for row in csv.DictReader(f)]
    return out, labels


def flat_labels(path: Path) -> list[str]:
    return [r["label"] for r in schema.rows(schema.load_results(path))]


# -- the Python label is the C++ label ----------------------------------------------------------


@pytest.mark.parametrize("args", [
    ["--variants", "fa2,cudnn", "--block-q", "64,128"],
    ["--variants", "fa2", "--fa2-order", "both"],
    [*SWEEP, "--N", "1024,4096", "--d", "64,128", "--causal", "both"],
    ["--variants", "all,cudnn-fp8", "--fp8-prequantized", "--d", "64,128"],
    ["--variants", "fa2", "--block-q", "64"],
], ids=["tiles", "order-both", "tiles-and-orders", "all", "one-other-tile"])
def test_python_labels_are_the_cpp_labels(tmp_path, args):
    path, cpp = model_only(tmp_path, "run", *args)
    doc = schema.load_results(path)
    assert doc["schema"] == "fa-bench/5"  # /2 rows plus each configuration's gpu, H_kv, N_kv,
    # page_size and kv_lengths
    assert all("@" not in r["variant"] and "~" not in r["variant"]
               for c in doc["configs"] for r in c["results"])  # /2 names are plain
    assert flat_labels(path) == cpp
    # within a configuration, a label names one identity
    for c in doc["configs"]:
        labels = schema.row_labels(c["results"])
        assert len(set(labels)) == len(labels), labels


def test_tile_sweep_and_both_orders_are_named_apart(tmp_path):
    path, cpp = model_only(tmp_path, "sweep", *SWEEP, "--N", "1024", "--d", "64")
    assert cpp == ["standard", "fa1@128x64", "fa1@64x64", "fa2@128x64~blocks",
                   "fa2@128x64~heads", "fa2@64x64~blocks", "fa2@64x64~heads", "cudnn"]
    assert flat_labels(path) == cpp


def crafted_doc() -> dict:
    """A timed fa-bench/2 configuration (a real H200 row, copied) whose rows differ in every
    part a label can show, among them parts no variant has yet."""
    doc = json.loads((DATA / "gate-h200-base.json").read_text())
    doc["schema"] = V2
    config = doc["configs"][0]
    doc["configs"] = [config]
    base = next(r for r in config["results"] if r["variant"] == "fa2")
    for key in ("counters", "measured", "placement"):
        base.pop(key, None)
    rows = []

    def row(variant="fa2", config=None, options=None, direction="forward"):
        r = copy.deepcopy(base)
        r.update(variant=variant, direction=direction, kernel_config=config,
                 options={"block_order": "blocks"} if options is None else options)
        rows.append(r)

    row(config=kc())
    row(config=kc(stages=3))
    row(config=kc(warpgroups=2))
    row(config=kc(cluster=(2, 1, 1)))
    row(config=kc(), options={"block_order": "heads"})
    row(config=kc(), options={"block_order": "blocks", "x": 2})
    row(config=kc(), options={"block_order": "blocks", "x": 0.1})
    row(config=kc(), options={"block_order": "blocks", "x": True})  # true is not 1
    row(config=kc(), options={"block_order": "blocks", "x": 1e20})
    row(config=kc(), options={"zeta": "z", "alpha": "a", "block_order": "blocks"})  # key order
    row(config=kc(), direction="backward")
    row(config=kc(64, 64), direction="backward")
    row("other", config=None, options={})  # no kernel_config beside one with
    row("other", config=kc(), options={})
    row("other", config=kc(64, 32), options={}, direction="backward")
    config["results"] = rows
    return doc


def test_every_part_of_a_label_is_the_cpp_one(tmp_path):
    path = tmp_path / "crafted.json"
    path.write_text(json.dumps(crafted_doc(), indent=1))
    md = tmp_path / "gate.md"
    run = subprocess.run([str(require_binary("fa-bench")), "gate", "--baseline", str(path),
                          "--current", str(path), "--time-only", "--markdown", str(md)],
                         capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stdout + run.stderr
    cpp = [line.split(" | ")[1] for line in md.read_text().splitlines()
           if line.startswith("| B=")]
    ours = flat_labels(path)
    assert ours == cpp
    assert ours[:12] == [
        "fa2 s2 wg0 c1x1x1~blocks", "fa2 s3 wg0 c1x1x1~blocks", "fa2 s2 wg2 c1x1x1~blocks",
        "fa2 s2 wg0 c2x1x1~blocks", "fa2 s2 wg0 c1x1x1~heads", "fa2 s2 wg0 c1x1x1~blocks~x=2",
        "fa2 s2 wg0 c1x1x1~blocks~x=0.10000000000000001", "fa2 s2 wg0 c1x1x1~blocks~x=true",
        "fa2 s2 wg0 c1x1x1~blocks~x=1e+20", "fa2 s2 wg0 c1x1x1~a~blocks~z",
        "fa2@128x64 bwd", "fa2@64x64 bwd"]
    assert ours[12:] == ["other", "other@128x64 s2", "other bwd"]


def test_row_label_takes_siblings_and_skips_the_row_itself():
    a = {"variant": "fa2", "direction": "forward", "kernel_config": kc(), "options": {}}
    b = {**a, "kernel_config": kc(64, 64)}
    assert schema.row_label(a, [a]) == "fa2"
    assert schema.row_label(a, [a, b]) == "fa2@128x64"
    assert schema.row_label(a, [b]) == "fa2@128x64"
    # another variant or direction is no sibling
    assert schema.row_label(a, [{**b, "variant": "fa1"}, {**b, "direction": "backward"}]) == "fa2"
    # 2 and 2.0 are one value (C++ reads every JSON number as a double); a bool is not a number
    two = {**a, "options": {"n": 2}}
    assert schema.row_label(two, [{**a, "options": {"n": 2.0}}]) == "fa2"
    assert schema.row_label(two, [{**a, "options": {"n": True}}]) == "fa2~n=2"
    assert schema.row_label({**a, "options": {"n": 1}}, [{**a, "options": {"n": True}}]) \
        == "fa2~n=1"


# -- the report's labels ---------------------------------------------------------------------------


def test_one_identity_keeps_one_label_across_files(tmp_path):
    """Console labels depend on the configuration's rows: a plain fa2 run and a run of only
    the 64x64 tiles both say "fa2". The report names a row the user chose (default_config
    false) by what differs from the default, so the two kernels are two series and neither
    replaces the other."""
    default, a = model_only(tmp_path, "default", "--variants", "fa2", "--N", "1024", "--d", "128")
    other, b = model_only(tmp_path, "other", "--variants", "fa2", "--block-q", "64",
                          "--block-kv", "64", "--N", "1024", "--d", "128")
    assert a == b == ["fa2"]  # what the consoles said
    res = Results.load([default, other])
    assert [r["label"] for r in res.rows] == ["fa2", "fa2@64x64"]
    assert [r["console_label"] for r in res.rows] == ["fa2", "fa2"]
    assert [r["variant"] for r in res.rows] == ["fa2", "fa2"]
    bytes_table = next(t for t in tables(res) if t.key == "bytes")
    assert [line[5] for line in bytes_table.rows] == ["fa2", "fa2@64x64"]
    # one file alone: the chosen tile still names its series
    assert [r["label"] for r in Results.load([other]).rows] == ["fa2@64x64"]


def timed(doc: dict, device: str = "synthetic test device (not a measurement)") -> dict:
    """A fa-bench --model-only /2 document with made-up times (1.0 ms + 0.1 ms per row) on a
    made-up device, its rows' identities and IO models as fa-bench wrote them."""
    out = schema.new_document(doc["command_line"] + "  # times made up for the test", device={
        "index": 0, "name": device, "uuid": "", "compute_capability": "9.0", "sm_count": 1,
        "memory_bytes": 0, "l2_bytes": 0}, ceilings={
        "source": "datasheet (made up)", "dram_bytes_per_s": 4.8e12,
        "tensor_flops_per_s": {"bf16": 9.9e14, "fp16": 9.9e14}}, version=V2)
    for c in doc["configs"]:
        results = []
        for i, r in enumerate(c["results"]):
            results.append(schema.make_result(
                r["variant"], algorithm=r["algorithm"], peer=r["peer"], status="ok",
                tiles=r["tiles"], samples_ms=[1.0 + 0.1 * i] * 3, model=r["model"], version=V2,
                direction=r["direction"], kernel_config=r["kernel_config"],
                options=r["options"], default_config=r["default_config"]))
        out["configs"].append(schema.make_config(**{k: c[k] for k in (
            "B", "H", "N", "d", "causal", "dtype", "seed")}, results=results))
    return schema.validate(out)


@pytest.fixture(scope="module")
def sweep(tmp_path_factory) -> Path:
    """A /2 file with a tile sweep and both fa2 block orders: fa-bench's rows, made-up times."""
    folder = tmp_path_factory.mktemp("sweep")
    # d=128: fa1's and fa2's defaults are both 128x64 there (at d=64 as well since 2026-11-25)
    path, _ = model_only(folder, "model", *SWEEP, "--N", "1024,4096", "--d", "128")
    doc = schema.load_results(path)
    assert {r["default_config"] for c in doc["configs"] for r in c["results"]} == {True, False}
    out = folder / "sweep-v2.json"
    schema.write_results(timed(doc), out)
    return out


def test_tile_rows_come_from_default_config(sweep):
    res = Results.load([sweep])
    marked = sorted({r["label"] for r in res.rows if r["tile_variant"]})
    assert marked == ["fa1@64x64", "fa2@64x64~blocks", "fa2@64x64~heads"]
    # without default_config the file does not say: no row is left out
    doc = schema.load_results(sweep)
    for c in doc["configs"]:
        for r in c["results"]:
            del r["default_config"]
    assert not any(r["tile_variant"] for r in Results([Run("no-key.json", doc)]).rows)
    # a configuration without its default row keeps the other tiles' rows
    doc = schema.load_results(sweep)
    for c in doc["configs"]:
        c["results"] = [r for r in c["results"] if r["default_config"] is False]
    assert not any(r["tile_variant"] for r in Results([Run("no-default.json", doc)]).rows)


def test_report_from_a_v2_tile_sweep_names_every_row(sweep):
    res = Results.load([sweep])
    device = res.devices()[0]
    time = next(t for t in tables(res) if t.key == "time")
    # the per-variant table: default tiles (named as the variant), both orders (the file does
    # not mark options: both differ within a configuration), the peer; other tiles left out
    series = ["standard", "fa1", "fa2~blocks", "fa2~heads", "cudnn (peer)"]
    assert time.columns[5:] == series
    errors = next(t for t in tables(res) if t.key == "bytes")
    assert {line[5] for line in errors.rows} == set(series)
    plot = plot_throughput(res, device)
    legend = [t.get_text() for t in plot.figure.axes[-1].get_legend().texts]
    assert legend[:5] == series
    colours = {res.style(label)[0] for label in legend[:5]}
    assert len(colours) == 5  # every series its own colour
    # the block-size plot: one line per variant and order, at both tiles
    block = plot_block_size(res, device)
    handles = [t.get_text() for t in block.figure.legends[0].texts]
    assert [h for h in handles if h.startswith("fa")] == [
        "fa1 d=128 N=4096", "fa2 d=128 N=4096 (blocks)", "fa2 d=128 N=4096 (heads)"]
    time_ax = block.figure.axes[2]
    assert [len(ln.get_xdata()) for ln in time_ax.get_lines()] == [2, 2, 2]


def reports_cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "reports", *args], cwd=REPO_ROOT,
                          capture_output=True, text=True, timeout=300)


def test_report_command_on_a_v2_tile_sweep(sweep, tmp_path):
    # the per-file table shows fa-bench's console labels
    run = reports_cli(str(sweep))
    assert run.returncode == 0, run.stderr
    for label in ("fa1@64x64", "fa2@64x64~heads", "fa2@128x64~blocks", "cudnn (peer)"):
        assert f"  {label} " in run.stdout
    out = tmp_path / "report"
    run = reports_cli(str(sweep), "-o", str(out))
    assert run.returncode == 0, run.stderr
    md = (out / "report.md").read_text()
    for label in ("fa2~blocks", "fa2~heads", "fa1", "cudnn (peer)"):
        assert f"| {label} |" in md or f" {label} |" in md
    assert "block-size.png" in md and (out / "block-size.png").is_file()


def test_v1_and_v2_files_in_one_report(sweep):
    """/1 rows keep their names; /2 rows are named by their own marks."""
    tiles = DATA / "tiles-fa1-fa2-h200.json"
    alone_v1 = [r["label"] for r in Results.load([tiles]).rows]
    alone_v2 = [r["label"] for r in Results.load([sweep]).rows]
    both = Results.load([tiles, sweep])
    assert [r["label"] for r in both.rows] == alone_v1 + alone_v2
    assert tables(both)  # and the report builds
