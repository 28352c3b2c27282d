"""Energy in the reports and in scripts/energy_check.py, on a real H200 sweep given synthetic energy
(the fitted model's parts per row, the measured figure a known few percent off): the schema takes
it, the three energy plots are drawn, rows without energy are left out and counted, the report
says how standard attention's energy splits, and the check script's verdicts hold."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

from reports.schema import SchemaError, validate

DATA = Path(__file__).resolve().parents[1] / "data"
FIT = {"status": "ok", "reason": "", "eps_flop16_pj": 0.6, "eps_flop8_pj": 0.35,
       "eps_inst_pj": 450.0, "eps_byte_pj": 22.0, "idle_w": 160.0, "f_ref_mhz": 1980.0,
       "residual_rms": 0.02, "residual_max": 0.04, "eps_mma16_pj": 1.1, "eps_mma8_pj": 0.9,
       "clock_exponent": 2.0, "clock_exponent_basis": "fitted over calibration clocks",
       "eps_l2_byte_pj": 40.0, "busy_w": 20.0, "clock_knee_mhz": 1650.0, "dram_active_w": 10.0,
       "points": [{"kernel": "sleep 1 ms", "flops16": 0, "flops8": 0, "bytes": 0,
                   "seconds": 0.001, "energy_j": 0.16, "instructions": 6.9e7,
                   "sm_clock_mhz": 1980.0, "temperature_c": {"mean": 52.0, "max": 54.0},
                   "l2_bytes": 0, "active_sm_fraction": 0, "residual": 0.0}]}
CLOCK = 1960.0  # every synthetic row's mean SM clock in its energy window
L2_PER_FLOP = 0.008  # every synthetic row's SM <-> L2 bytes per matrix FLOP
# A file of an fa-bench before the instruction term and the clock factor.
OLD_FIT = {k: v for k, v in FIT.items()
           if k not in ("eps_inst_pj", "f_ref_mhz", "eps_mma16_pj", "eps_mma8_pj",
                        "clock_exponent", "clock_exponent_basis", "eps_l2_byte_pj", "busy_w",
                        "clock_knee_mhz", "dram_active_w")}
OLD_FIT["points"] = [{k: v for k, v in FIT["points"][0].items()
                      if k not in ("instructions", "sm_clock_mhz", "temperature_c", "l2_bytes",
                                   "active_sm_fraction")}]


def model_parts(result: dict, old: bool = False) -> dict:
    """The fitted model's figure for a row, as fa-bench writes it (bench/result.cpp
    energy_model_of); `old`: as an fa-bench before the instruction term wrote it. The sweep has
    no counters: its instructions are taken as one per 2,000 matrix FLOPs."""
    measured = result.get("measured") or {}
    basis = "counters" if measured.get("dram_bytes") else "model"
    nbytes = measured.get("dram_bytes") or (result["model"]["bytes_read"]
                                            + result["model"]["bytes_written"])
    flops = result["model"]["flops_matrix"]
    seconds = result["timing"]["median_ms"] * 1e-3
    eps = FIT["eps_flop8_pj"] if result["algorithm"] == "fp8" else FIT["eps_flop16_pj"]
    scale = 1.0 if old else (CLOCK / FIT["f_ref_mhz"]) ** 2
    instructions = flops / 2000
    parts = {"flop_mj": scale * eps * 1e-12 * flops * 1e3,
             "byte_mj": FIT["eps_byte_pj"] * 1e-12 * nbytes * 1e3
             + (0 if old else FIT["dram_active_w"] * seconds * 1e3),
             "idle_mj": (FIT["idle_w"] + (0 if old else FIT["busy_w"])) * seconds * 1e3}
    if not old:
        parts["inst_mj"] = scale * FIT["eps_inst_pj"] * 1e-12 * instructions * 1e3
        parts["l2_mj"] = FIT["eps_l2_byte_pj"] * 1e-12 * L2_PER_FLOP * flops * 1e3
    extra = {} if old else {"instructions": instructions, "sm_clock_mhz": CLOCK,
                            "clock_scale": scale, "l2_bytes": L2_PER_FLOP * flops,
                            "flop_instruction": "wgmma"}
    return {**parts, "total_mj": sum(parts.values()), "bytes_basis": basis, "flops": flops,
            "bytes": nbytes, "seconds": seconds, **extra}


def energy(result: dict, off: float = 0.0, status: str = "ok", reason: str = "",
           old: bool = False) -> dict:
    model = model_parts(result, old)
    mj = model["total_mj"] / (1 + off)
    e = {"status": status, "reason": reason,
         "energy_per_launch_mj": mj if status == "ok" else None,
         "sampled_energy_per_launch_mj": mj * 1.01, "power_w": mj / model["seconds"] * 1e-3,
         "sampled_power_w": mj / model["seconds"] * 1e-3 * 1.01, "power_samples": 40,
         "counter_vs_sampled": -0.01, "launches": 500, "busy_s": 500 * model["seconds"],
         "seconds_per_launch": model["seconds"], "window_s": 1.0, "counter_mj": 1000.0,
         "counter_updates": 50, "sm_clock_mhz": {"mean": CLOCK, "min": 1905.0, "samples": 150},
         "clock_event_reasons": ["power cap"], "model": model}
    if not old:
        e["temperature_c"] = {"mean": 55.5, "max": 58.0, "samples": 150}
    return e


UNCOUNTED = "the energy model needs the counted instructions: counters off (--no-counters)"


def with_energy(doc: dict, off=lambda r: 0.02, skip: str = "", old: bool = False,
                uncounted: str = "") -> dict:
    """The document with energy on every timed row (model / measured = 1 + off(row)); rows of
    variant `skip` refused, rows of variant `uncounted` measured without a model figure (their
    counters off); `old`: as an fa-bench before the instruction term wrote it."""
    doc = copy.deepcopy(doc)
    doc["ceilings"]["energy_model"] = OLD_FIT if old else FIT
    doc["settings"]["energy_window_s"] = 1.0
    for config in doc["configs"]:
        for r in config["results"]:
            if r["status"] != "ok":
                continue
            if r["variant"] == skip:
                r["energy"] = energy(r, status="refused", reason="the energy counter changed 2 "
                                     "times in the 1.00 s window: too coarse for it", old=old)
            else:
                r["energy"] = energy(r, off(r), old=old)
                if r["variant"] == uncounted:
                    del r["energy"]["model"]
                    r["energy"]["model_reason"] = UNCOUNTED
    return doc


@pytest.fixture(scope="module")
def sweep() -> dict:
    return json.loads((DATA / "sweep-4variants-h200.json").read_text())


def write(tmp_path: Path, name: str, doc: dict) -> str:
    path = tmp_path / name
    path.write_text(json.dumps(doc))
    return str(path)


def test_schema_takes_energy_and_refuses_impossible_values(sweep):
    doc = with_energy(sweep)
    validate(doc, "energy.json")
    bad = copy.deepcopy(doc)
    bad["configs"][0]["results"][0]["energy"]["energy_per_launch_mj"] = -1
    with pytest.raises(SchemaError, match="energy_per_launch_mj"):
        validate(bad, "bad.json")
    bad = copy.deepcopy(doc)
    bad["configs"][0]["results"][0]["energy"]["status"] = "refused"  # with a figure: not allowed
    with pytest.raises(SchemaError, match="energy_per_launch_mj"):
        validate(bad, "bad.json")
    bad = copy.deepcopy(doc)
    bad["ceilings"]["energy_model"]["idle_w"] = "lots"
    with pytest.raises(SchemaError, match="idle_w"):
        validate(bad, "bad.json")
    bad = copy.deepcopy(doc)
    bad["ceilings"]["energy_model"]["eps_inst_pj"] = -1
    with pytest.raises(SchemaError, match="eps_inst_pj"):
        validate(bad, "bad.json")
    bad = copy.deepcopy(doc)
    bad["configs"][0]["results"][0]["energy"]["model"]["inst_mj"] = -1
    with pytest.raises(SchemaError, match="inst_mj"):
        validate(bad, "bad.json")
    bad = copy.deepcopy(doc)
    bad["configs"][0]["results"][0]["energy"]["temperature_c"]["max"] = "hot"
    with pytest.raises(SchemaError, match="temperature_c"):
        validate(bad, "bad.json")
    # Rows without a model figure and their reason; files before the instruction term.
    validate(with_energy(sweep, uncounted="fa2"), "uncounted.json")
    validate(with_energy(sweep, old=True), "old.json")


def test_report_draws_energy_and_says_where_it_goes(sweep, tmp_path):
    pytest.importorskip("matplotlib")
    from reports.data import Results
    from reports.report import build

    path = write(tmp_path, "energy.json", with_energy(sweep, skip="fa1"))
    out = build(Results.load([path]), tmp_path / "out", log=lambda *_: None)
    plots = {p.name: p for p in out["plots"]}
    for name in ("energy", "energy-roofline", "energy-split"):
        assert plots[name].figure is not None, plots[name].skipped
        assert (tmp_path / "out" / f"{name}.png").is_file()
    # fa1's rows were refused: left out of the plots, counted with the reason.
    notes = " ".join(plots["energy"].notes)
    assert "without energy left out (refused: the energy counter changed 2 times" in notes
    assert "fa1" not in {t.get_text() for ax in plots["energy"].figure.axes
                         for t in (ax.get_legend().get_texts() if ax.get_legend() else [])}
    # Standard attention's energy at N = 16384 split into its parts, fa2's DRAM share beside it.
    reading = " ".join(out["energy"])
    assert "N = 16384, d = 64, non-causal: standard attention takes" in reading
    assert "FLOPs" in reading and "DRAM bytes" in reading and "constant power" in reading
    assert "instructions" in reading and "SM ↔ L2 bytes" in reading
    assert "; fa2 " in reading and "of it DRAM (" in reading
    # The split draws the instruction and L2 parts; the roofline says what its roofs leave out.
    legend = {t.get_text() for t in plots["energy-split"].figure.axes[0].get_legend().get_texts()}
    assert "model: instructions" in legend and "model: SM ↔ L2 bytes" in legend
    assert any("ε_inst per warp instruction" in n for n in plots["energy-roofline"].notes)
    assert any("Bytes between the SMs and the L2 cost 40 pJ" in n and "below 1650 MHz" in n
               for n in plots["energy-roofline"].notes)
    md = Path(out["markdown"]).read_text()
    assert "## Where the energy goes" in md
    table = next(t for t in out["tables"] if t.key == "energy")
    assert "model vs measured" in table.columns
    col = table.columns.index("model vs measured")
    assert {row[col] for row in table.rows if row[col] != "-"} == {"+2.0%"}
    for column in ("instruction share (model)", "L2 share (model)"):
        share = table.columns.index(column)
        assert all(row[share].endswith("%") for row in table.rows if row[col] != "-")


def energy_parts(path: Path) -> tuple[dict, list, str]:
    """The report's energy plots, its tables and its energy reading for one file, without
    writing the whole report (test_report_draws_energy_and_says_where_it_goes does that)."""
    from reports.data import Results
    from reports.plots import plot_energy, plot_energy_roofline, plot_energy_split
    from reports.report import energy_reading, tables

    res = Results.load([path])
    device = res.devices()[0]
    plots = {p.name: p for p in (fn(res, device) for fn in (plot_energy, plot_energy_roofline,
                                                             plot_energy_split))}
    return plots, tables(res), " ".join(energy_reading(res))


def test_report_reads_records_without_the_instruction_part(sweep, tmp_path):
    """Files of an fa-bench before the instruction term (no inst_mj, no eps_inst_pj), and rows
    measured without counters (no model figure, its reason): the reports still draw."""
    pytest.importorskip("matplotlib")
    plots, tabs, reading = energy_parts(write(tmp_path, "old.json", with_energy(sweep, old=True)))
    for name in ("energy", "energy-roofline", "energy-split"):
        assert plots[name].figure is not None, plots[name].skipped
    legend = {t.get_text() for t in plots["energy-split"].figure.axes[0].get_legend().get_texts()}
    assert "model: instructions" not in legend and "model: DRAM bytes (and HBM's active power)" in legend
    assert "model: SM ↔ L2 bytes" not in legend
    assert any("no instruction part" in n for n in plots["energy-split"].notes)
    assert "standard attention takes" in reading and "instructions" not in reading
    table = next(t for t in tabs if t.key == "energy")
    for column in ("instruction share (model)", "L2 share (model)"):
        share = table.columns.index(column)
        assert {row[share] for row in table.rows} == {"-"}

    plots, tabs, _ = energy_parts(
        write(tmp_path, "uncounted.json", with_energy(sweep, uncounted="fa2")))
    table = next(t for t in tabs if t.key == "energy")
    reason = table.columns.index("reason")
    label = table.columns.index("variant")
    fa2 = [row for row in table.rows if row[label] == "fa2"]
    assert fa2 and all(row[reason] == UNCOUNTED for row in fa2)
    assert plots["energy-split"].figure is not None


def test_report_without_energy_skips_the_energy_plots(sweep, tmp_path):
    pytest.importorskip("matplotlib")
    from reports.data import Results
    from reports.plots import plot_energy, plot_energy_roofline, plot_energy_split
    from reports.report import energy_reading, tables

    res = Results.load([write(tmp_path, "plain.json", sweep)])
    device = res.devices()[0]
    for fn in (plot_energy, plot_energy_roofline, plot_energy_split):
        plot = fn(res, device)
        assert plot.figure is None and "no " in plot.skipped, plot.name
    assert energy_reading(res) == []
    assert "energy" not in {t.key for t in tables(res)}


def test_energy_roof_is_the_arch_line_and_pays_constant_power():
    from reports.plots import energy_roof

    # 1 / (0.6 pJ + 22 pJ / 100) = 1.2195e12 FLOP/J
    assert energy_roof(FIT, "bf16", 100.0) == pytest.approx(1 / 0.82e-12)
    with_time = energy_roof(FIT, "bf16", 100.0, peak=800e12, bandwidth=4.5e12)
    # memory bound at I = 100 (100 x 4.5e12 < 800e12): + (160 + 20 + 10) W / (100 x 4.5e12 FLOP/s)
    assert with_time == pytest.approx(1 / (0.82e-12 + 190 / 450e12))
    # A file before the busy-SM power: the constant power alone.
    old = energy_roof(OLD_FIT, "bf16", 100.0, peak=800e12, bandwidth=4.5e12)
    assert old == pytest.approx(1 / (0.82e-12 + 160 / 450e12))
    assert energy_roof({**FIT, "eps_flop8_pj": None}, "fp8", 100.0) is None


def run_check(tmp_path: Path, docs: list[dict], *extra: str) -> tuple[int, str]:
    import contextlib
    import io

    from scripts.energy_check import main

    files = [write(tmp_path, f"run{i}.json", d) for i, d in enumerate(docs)]
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        rc = main([*files, *extra])
    return rc, buf.getvalue()


def test_energy_check_passes_agreeing_runs_and_names_what_fails(sweep, tmp_path):
    runs = [with_energy(sweep, off=lambda r, k=k: 0.02 + 0.005 * k) for k in range(3)]
    rc, out = run_check(tmp_path, runs)
    assert rc == 0, out
    assert out.strip().endswith("PASS")
    assert "spread  0.98%  model   +3.0%" in out.splitlines()[0]  # 1.03 / 1.02 - 1
    # One run's fa2 5% lower: its rows fail the 3% spread, named.
    runs[2] = with_energy(sweep, off=lambda r: 0.07 if r["variant"] == "fa2" else 0.03)
    rc, out = run_check(tmp_path, runs)
    assert rc == 1
    fails = [line for line in out.splitlines() if line.startswith("FAIL")]
    assert fails and all(" fa2 " in f" {line[5:]}" for line in fails), out
    assert "runs disagree by" in fails[0]
    # A model 20% off fails the 15% bound; --max-model-error 25% accepts it.
    runs = [with_energy(sweep, off=lambda r: 0.20)] * 3
    assert run_check(tmp_path, runs)[0] == 1
    assert run_check(tmp_path, runs, "--max-model-error", "25%")[0] == 0
    # Rows without energy fail with the reason.
    runs = [with_energy(sweep, skip="fp8")] * 3
    rc, out = run_check(tmp_path, runs)
    assert rc == 1 and "refused: the energy counter changed 2 times" in out
    assert run_check(tmp_path, runs, "--max-spread", "x")[0] == 2
    # Rows measured without counters have no model figure: they fail, saying why.
    runs = [with_energy(sweep, uncounted="fa2")] * 3
    rc, out = run_check(tmp_path, runs)
    assert rc == 1 and f"no model figure ({UNCOUNTED})" in out


def test_energy_check_judges_the_model_on_the_counters_bytes(sweep, tmp_path):
    """A run with --no-counters charges the IO model's bytes (fa2's K/V re-reads the L2 absorbs):
    where another run counted the bytes, that run judges the model."""
    counted = with_energy(sweep)
    for config in counted["configs"]:
        for r in config["results"]:
            if r.get("energy"):
                r["energy"]["model"]["bytes_basis"] = "counters"
    uncounted = with_energy(sweep, off=lambda r: 0.40)
    rc, out = run_check(tmp_path, [counted, counted, uncounted], "--max-spread", "50%")
    assert rc == 0, out
    rc, out = run_check(tmp_path, [uncounted, uncounted, uncounted])
    assert rc == 1 and "model off by +40.0%" in out


def test_energy_check_keys_pages_and_lengths_apart():
    """fa-bench/5: rows of configurations that differ only by their cache's pages or their
    sequences' lengths are rows of their own, named by fa-bench's shape text."""
    import test_schema as ts

    from reports.schema import rows
    from scripts.energy_check import key_text, row_key

    doc = ts.v5_doc()
    paged = doc["configs"][-1]
    doc["configs"].append({**copy.deepcopy(paged), "page_size": 0})
    doc["configs"].append({**copy.deepcopy(paged), "kv_lengths": None})
    rows_ = [r for r in rows(validate(doc)) if r["B"] == 8]
    keys = [row_key(r) for r in rows_]
    assert len(set(keys)) == 3
    assert [key_text(k) for k in keys] == [
        "fa2 B=8 H=32 H_kv=8 N=1 N_kv=4096 kv_lengths=512..4096/sum=20000 page=64 d=64 causal bf16",
        "fa2 B=8 H=32 H_kv=8 N=1 N_kv=4096 kv_lengths=512..4096/sum=20000 d=64 causal bf16",
        "fa2 B=8 H=32 H_kv=8 N=1 N_kv=4096 page=64 d=64 causal bf16"]


def test_calibration_kernels_instruction_counts_match_their_sass():
    """The energy model's calibration kernels' instructions per launch (profiler/ceilings.cu,
    SassCounts) against the SASS this build made of them: one loop iteration, everything outside
    the loop on the path a warp takes, for sm_90a and sm_80. Skipped without cuobjdump or the
    built object."""
    import os
    import re
    import sys

    root = Path(__file__).resolve().parents[2]
    sys.path.insert(0, str(root / "scripts"))
    from sass_check import find_cuobjdump, run

    cuobjdump = find_cuobjdump()
    if not cuobjdump:
        pytest.skip("no cuobjdump (scripts/requirements-sass-tools.txt)")
    build = Path(os.environ["FA_BENCH_BIN"]).resolve().parents[1] if os.environ.get(
        "FA_BENCH_BIN") else root / "build"
    obj = build / "CMakeFiles" / "fa_profiler.dir" / "profiler" / "ceilings.cu.o"
    if not obj.is_file():
        pytest.skip(f"{obj} not built")
    source = (root / "profiler" / "ceilings.cu").read_text()
    declared = {name: tuple(float(x) for x in xs) for name, *xs in
                re.findall(r"(k\w+Sm(?:90|80))\{(\d+), (\d+), (\d+)\}", source)}
    line = re.compile(r"/\*([0-9a-f]{4})\*/\s+([^;]*);")
    kernels = {"Copy": "11copy_kernel", "Ffma": "23ffma_calibration_kernel",
               "MmaBf16": "27mma_bf16_calibration_kernel",
               "MmaFp8": "27mma_e4m3_calibration_kernel", "Sleep": "12sleep_kernel"}
    # The e4m3 mma.sync kernel's sm_80 code is empty (no e4m3 mma.sync below sm_89): no loop.
    # Tensor FLOPs per warp and loop iteration (ceilings.cu: kMmaSteps x kMmaPerStep mma.sync):
    # on sm_90a each m16n8k32 e4m3 is two HMMA.16816 (f16), the same FLOPs.
    loopless = {("sm_80", "MmaFp8")}
    mma_flops = {"MmaBf16": 8 * 4 * 4096, "MmaFp8": 4 * 2 * 8192}
    built = set(re.findall(r"arch = (sm_\w+)", run(cuobjdump, ["-sass", str(obj)])))
    assert "sm_90a" in built, f"{obj} has no sm_90a code ({sorted(built)})"
    for arch, suffix in (("sm_90a", "90"), ("sm_80", "80")):
        if arch not in built:  # CI builds the portable code for sm_90a alone (.ci/run)
            continue
        dump = run(cuobjdump, ["-sass", "-arch", arch, str(obj)])
        for name, mangled in kernels.items():
            body = dump[dump.index(mangled):]
            body = body[:body.index("..........")]
            code = []  # (address, instruction) up to the branch to itself that pads the end
            for addr, text in line.findall(body):
                if text.strip() == f"BRA 0x{int(addr, 16):x}":
                    break
                code.append((int(addr, 16), text.strip()))
            back = [(a, int(t, 16)) for a, ins in code
                    for t in re.findall(r"BRA 0x([0-9a-f]+)$", ins) if int(t, 16) < a]
            exits = [a for a, ins in code if ins.endswith("EXIT")]
            if (arch, name) in loopless:
                assert not back and "HMMA" not in body and "QMMA" not in body, (arch, name, back)
                fixed = sum(1 for a, _ in code if a <= min(exits))
                assert declared[f"k{name}Sm{suffix}"] == (0, fixed, 0), (arch, name)
                continue
            assert len(back) == 1, (arch, name, back)
            end, start = back[0]
            loop = [ins for a, ins in code if start <= a <= end]
            per_iteration = len(loop)
            if name == "Ffma":  # every FFMA's operands in registers, none from the constant bank
                assert all("c[" not in ins for ins in loop if "FFMA" in ins), (arch, loop)
            if name.startswith("Mma"):  # the tensor FLOPs per iteration the points count
                shapes = [re.match(r"[HQ]MMA\.168(\d+)\.", ins) for ins in loop]  # m16n8kK
                flops = sum(2 * 16 * 8 * int(m[1]) for m in shapes if m)
                assert flops == mma_flops[name], (arch, name, flops)
            # The copy's and the FFMA's warps leave at the first EXIT after the loop; the sleep
            # kernel's lane 0 goes on to its atomic add and the last EXIT.
            leave = exits[-1] if name == "Sleep" else min(a for a in exits if a > end)
            fixed = sum(1 for a, _ in code if a <= leave) - per_iteration
            early = sum(1 for a, _ in code if a <= min(exits)) if name == "Copy" else 0
            assert declared[f"k{name}Sm{suffix}"] == (early, fixed, per_iteration), (arch, name)
