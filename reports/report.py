"""``report.md`` and a self-contained ``report.html`` from merged result files.

Every number and every sentence about results is computed from the rows; nothing about a result
is written by hand here. Tables are :class:`Table` objects (strings in cells, so the Markdown and
the HTML show the same text) and :func:`roofline_reading` / :func:`fastest_summary` return the
generated sentences.
"""

from __future__ import annotations

import base64
import html
import os
from dataclasses import dataclass, field
from pathlib import Path

from reports.data import (
    SQUARE,
    Results,
    attained_flops,
    bh_cell,
    bh_text,
    default_rows,
    kv_cache_key,
    kv_class,
    kv_note,
    n_cell,
    precision,
)
from reports.plots import (
    Plot,
    all_plots,
    energy_mj,
    energy_parts,
    energy_split_rows,
    save,
)


@dataclass
class Table:
    key: str
    title: str
    columns: list[str]
    rows: list[list[str]]
    note: str = ""
    left: set[int] = field(default_factory=set)  # left-aligned (text) columns
    config_cols: int = 0  # leading columns that name a row's configuration (0: not per row)


# -- number formats ------------------------------------------------------------------------------


def fmt_bytes(x: float | None) -> str:
    if x is None or x <= 0:
        return "-"
    for unit, scale in (("TB", 1e12), ("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if x >= scale:
            return f"{x / scale:.2f} {unit}"
    return f"{x:.0f} B"


def fmt_ms(x: float | None) -> str:
    return "-" if x is None else f"{x:.3f}"


def fmt_tflops(x: float | None) -> str:
    return "-" if x is None else f"{x:.1f}"


def fmt_pct(x: float | None) -> str:
    return "-" if x is None else f"{100 * x:.0f}%"


def fmt_ratio(x: float | None) -> str:
    return "-" if x is None else f"{x:.2f}"


def fmt_err(x: float | None) -> str:
    return "-" if x is None else f"{x:.2e}"


def causal_word(c: bool) -> str:
    return "causal" if c else "non-causal"


# -- configurations as table rows ------------------------------------------------------------


def _multi(res: Results) -> tuple[bool, bool]:
    return res.many_devices, res.many_inputs


def config_label(r: dict, res: Results) -> list[str]:
    many_devices, many_inputs = _multi(res)
    cells = []
    if many_devices:
        cells.append(r["device_name"])
    # grouped-query, non-square, paged and ragged rows: "4×32 (H_kv 8)", "1 (N_kv 4096)",
    # "1 (N_kv 4096, pages of 64)", "1 (N_kv ≤4096, lengths 100,4096)"; square rows as ever
    cells += [n_cell(r), str(r["d"]), causal_word(r["causal"]), r["dtype"], bh_cell(r)]
    if many_inputs:
        cells.append(r["inputs"])
    return cells


def config_columns(res: Results) -> list[str]:
    many_devices, many_inputs = _multi(res)
    cols = (["device"] if many_devices else []) + ["N", "d", "mask", "dtype", "B×H"]
    return cols + (["inputs"] if many_inputs else [])


def _ckey(r: dict) -> tuple:
    return (r["device_name"], r["dtype"], r["d"], r["causal"], r["N"], r["B"], r["H"], r["inputs"],
            r["H_kv"], r["N_kv"], *kv_cache_key(r))


def latest_rows(res: Results, rows: list[dict]) -> tuple[list[dict], int]:
    """One row per (configuration, variant): a later file's row replaces an earlier one's.
    Returns the rows and how many were replaced."""
    seen: dict[tuple, dict] = {}
    for r in rows:
        seen[(_ckey(r), r["label"])] = r
    return list(seen.values()), len(rows) - len(seen)


def _pivot(res: Results, rows: list[dict]) -> tuple[list[tuple], list[str], dict]:
    # ... N, then N_kv, then multi-head before grouped-query (k[8] H_kv against k[6] H), then
    # contiguous before paged (k[10] page_size), every sequence N_kv long before lengths apart
    configs = sorted({_ckey(r) for r in rows},
                     key=lambda k: (k[0], k[7], k[1], k[2], k[3], k[4], k[9], k[8] != k[6], k[8],
                                    k[10], k[11]))
    variants = list(dict.fromkeys(r["label"] for r in rows))
    cell = {(_ckey(r), r["label"]): r for r in rows}
    return configs, variants, cell


# -- tables ----------------------------------------------------------------------------------------


def runs_table(res: Results) -> Table:
    rows = []
    for run in res.runs:
        tool = run.doc["tool"]
        rows.append([os.path.basename(run.path), run.device, run.doc["created_utc"],
                     f"{tool['name']} {tool['version']} ({tool['git_revision']})",
                     "yes" if run.doc["complete"] else "NO (interrupted)",
                     f"`{run.doc['command_line']}`"])
    return Table("runs", "Result files", ["file", "device", "created (UTC)", "tool", "complete",
                                          "command line"], rows, left={0, 1, 2, 3, 4, 5})


def device_table(res: Results) -> Table:
    rows = []
    seen = set()
    for run in res.runs:
        dev = run.doc.get("device")
        if not dev or dev["name"] in seen:
            continue
        seen.add(dev["name"])
        mem = dev.get("memory_bytes")
        l2 = dev.get("l2_bytes")
        cuda = dev.get("cuda_runtime_version")
        rows.append([
            dev["name"], dev["compute_capability"], str(dev["sm_count"]),
            f"{mem / 2**30:.0f} GiB" if mem else "-",
            f"{l2 / 2**20:.0f} MiB" if l2 else "-",
            f"{dev['sm_clock_max_mhz']} MHz" if dev.get("sm_clock_max_mhz") else "-",
            str(dev.get("driver_version", "-")),
            f"{cuda // 1000}.{cuda % 1000 // 10}" if isinstance(cuda, int) and cuda > 0 else "-",
        ])
    note = "" if rows else "No GPU recorded in these files (model-only runs)."
    return Table("device", "Device", ["name", "compute capability", "SMs", "memory", "L2",
                                      "max SM clock", "driver", "CUDA runtime"], rows, note,
                 left={0, 6})


def settings_table(res: Results) -> Table:
    rows = []
    for run in res.runs:
        s = run.doc.get("settings") or {}
        reps = s.get("repetitions")
        rows.append([
            os.path.basename(run.path), str(s.get("inputs", "-")), str(s.get("l2", "-")),
            str(s.get("warmup", "-")),
            f"{s.get('min_time_s')} s" if not reps else f"{reps} launches",
            str(s.get("timing_engine", "-")),
            "yes" if s.get("fp8_prequantized") else "no", str(s.get("seed", "-")),
        ])
    return Table("settings", "Settings", ["file", "inputs", "L2", "warmup", "timed for",
                                          "timing engine", "fp8 prequantised", "seed"], rows,
                 left={0, 1, 2, 5})


def ceilings_table(res: Results) -> Table:
    rows = []
    for device in res.devices():
        roofs = res.roofs(device)
        if roofs is None:
            continue
        kind = "measured" if roofs.measured else "datasheet"
        rows.append([device, f"DRAM bandwidth ({kind})", f"{roofs.dram / 1e12:.2f} TB/s",
                     f"{roofs.datasheet_dram / 1e12:.2f} TB/s" if roofs.datasheet_dram else "-",
                     fmt_pct(roofs.dram / roofs.datasheet_dram) if roofs.datasheet_dram
                     and roofs.measured else "-"])
        if roofs.l2 > 0:
            rows.append([device, "L2 bandwidth (measured)", f"{roofs.l2 / 1e12:.2f} TB/s", "-",
                         "-"])
        for dt, peak in sorted(roofs.tensor.items()):
            sheet = roofs.datasheet_tensor.get(dt, 0.0)
            rows.append([device, f"{dt} tensor peak ({kind})", f"{peak / 1e12:.0f} TFLOP/s",
                         f"{sheet / 1e12:.0f} TFLOP/s" if sheet else "-",
                         fmt_pct(peak / sheet) if sheet and roofs.measured else "-"])
    sources = sorted({res.roofs(d).source for d in res.devices() if res.roofs(d)})
    return Table("ceilings", "Roofs", ["device", "roof", "value", "datasheet", "of datasheet"],
                 rows, note="Source: " + "; ".join(sources) if sources else "", left={0, 1})


def _pivot_table(res: Results, key: str, title: str, value, fmt, best) -> Table:
    rows, replaced = latest_rows(res, default_rows(res.ok()))
    configs, variants, cell = _pivot(res, rows)
    out = []
    for ck in configs:
        sample = next(cell[(ck, v)] for v in variants if (ck, v) in cell)
        vals = {v: value(cell[(ck, v)]) for v in variants if (ck, v) in cell}
        winner = best(vals) if vals else None
        line = config_label(sample, res)
        for v in variants:
            text = fmt(vals.get(v)) if v in vals else "-"
            line.append(f"**{text}**" if v == winner and len(vals) > 1 else text)
        out.append(line)
    note = "Best in each row in bold."
    if replaced:
        note += f" {replaced} rows appear in more than one file; the later file's are shown."
    ncfg = len(config_columns(res))
    return Table(key, title, config_columns(res) + [res.label(v) for v in variants], out, note,
                 left=set(range(ncfg)), config_cols=ncfg)


def time_table(res: Results) -> Table:
    return _pivot_table(res, "time", "Median time [ms]", lambda r: r["median_ms"], fmt_ms,
                        lambda vals: min(vals, key=vals.get))


def tflops_table(res: Results) -> Table:
    title = "Throughput [TFLOP/s] (4·B·H·N²·d per second, halved for causal)"
    if any(kv_class(r)[1] or kv_class(r)[3] for r in res.rows):  # a K/V length other than N
        title = ("Throughput [TFLOP/s] (4·B·H·N·N_kv·d per second; causal: 4·B·H·d·(N·N_kv − "
                 "N²/2), the mask aligned bottom-right")
        if any(kv_class(r)[3] for r in res.rows):  # each sequence's own K/V length
            title += ("; each sequence b of its own K/V length L_b: 4·H·d·Σ_b N·L_b, causal "
                      "4·H·d·Σ_b (N·L_b − N²/2)")
        title += ")"
    t = _pivot_table(res, "tflops", title, lambda r: r["tflops_convention"], fmt_tflops,
                     lambda vals: max(vals, key=vals.get))
    return t


def _roof_placement(r: dict, res: Results) -> dict:
    """The row's placement (``r["place"]``: the file's ``placement`` object, or the same formula
    computed for older files, reports/data.py:placement) with what the tables and sentences
    quote: attained and attainable FLOP/s, the tensor peak of the row's precision."""
    place = r.get("place")
    if not place:
        return {}
    roofs = res.roofs(r["device_name"])
    peak = roofs.tensor.get(precision(r), 0.0) if roofs else 0.0
    attained = attained_flops(r)
    return {
        **place,
        "attained": attained,
        "roof": place["attainable_tflops"] * 1e12,
        "peak": peak,
        "peak_fraction": attained / peak if peak > 0 else None,
        "from_counters": place["basis"] == "counters",
        "measured_roofs": bool(roofs and roofs.measured),
    }


BOUND_WORD = {"compute": "compute", "dram": "DRAM", "l2": "L2"}


def bytes_table(res: Results) -> Table:
    rows, _ = latest_rows(res, default_rows(
        [r for r in res.rows if r["model"]["bytes_read"] + r["model"]["bytes_written"] > 0]))
    rows.sort(key=lambda r: (_ckey(r), r["label"]))
    out = []
    for r in rows:
        model = r["model"]["bytes_read"] + r["model"]["bytes_written"]
        m = r.get("measured") or {}
        out.append(config_label(r, res) + [
            res.label(r["label"]), fmt_bytes(model), fmt_bytes(r["model"]["bytes_compulsory"]),
            fmt_bytes(m.get("dram_bytes")), fmt_ratio(m.get("dram_over_model")),
            fmt_ratio(m.get("dram_over_compulsory")), fmt_bytes(m.get("l2_bytes")),
            fmt_ratio(m.get("l2_over_model"))])
    has = any(r.get("measured") for r in rows)
    note = ("Measured bytes: CUPTI counters (a separate untimed run, L2 flushed first)."
            if has else "No hardware counters in these results: model bytes only.")
    n = len(config_columns(res))
    return Table("bytes", "IO model against measured bytes", config_columns(res) + [
        "variant", "model bytes", "compulsory", "DRAM measured", "DRAM / model",
        "DRAM / compulsory", "L2 measured", "L2 / model"], out, note, left=set(range(n + 1)),
        config_cols=n)


def roofline_table(res: Results) -> Table:
    rows, _ = latest_rows(res, res.ok())
    rows.sort(key=lambda r: (_ckey(r), r["label"]))
    out = []
    computed = 0
    for r in rows:
        p = _roof_placement(r, res)
        if not p:
            continue
        computed += p["computed"]
        out.append(config_label(r, res) + [
            res.label(r["label"]),
            "counters" if p["basis"] == "counters" else "compulsory bytes",
            f"{p['intensity_dram']:.1f}",
            f"{p['intensity_l2']:.1f}" if p.get("intensity_l2") else "-",
            fmt_tflops(p["attained"] / 1e12), fmt_tflops(p["attainable_tflops"]),
            BOUND_WORD.get(p["bound"], p["bound"]), fmt_pct(p["fraction"]),
            fmt_pct(p["peak_fraction"]), "computed" if p["computed"] else "file"])
    n = len(config_columns(res))
    note = ("Attained = the model's matrix FLOPs / median time. Intensity = matrix FLOPs per "
            "measured byte (basis counters: DRAM and SM↔L2 bytes from the hardware counters) or "
            "per compulsory byte (no counters: Q, K, V read once, O written once, so the row is "
            "never placed above its real roof). Attainable = min(tensor roof of the row's "
            "precision, DRAM intensity × DRAM roof, L2 intensity × L2 roof when known); the "
            "bound is the roof that sets it, the fraction attained / attainable.")
    if computed:
        note += (f" {computed} row(s) come from files without a `placement` object: placed "
                 "here with the same formula from the file's fields and ceilings.")
    return Table("roofline", "Roofline placement", config_columns(res) + [
        "variant", "basis", "intensity DRAM [FLOP/B]", "intensity L2 [FLOP/B]",
        "attained [TFLOP/s]", "attainable [TFLOP/s]", "bound", "of attainable",
        "of tensor peak", "placed by"],
        out, note, left=set(range(n + 2)) | {n + 6, n + 9}, config_cols=n)


def errors_table(res: Results) -> Table:
    rows, _ = latest_rows(res, [r for r in res.rows if r.get("verification")])
    rows.sort(key=lambda r: (_ckey(r), r["label"]))
    out = []
    for r in rows:
        v = r["verification"]
        out.append(config_label(r, res) + [
            res.label(r["label"]), str(v.get("metric", "max_abs_error")),
            fmt_err(v.get("max_abs_error")), fmt_err(v.get("rmse")),
            fmt_err(v.get("baseline_max_abs_error") if v.get("metric") != "rmse"
                    else v.get("baseline_rmse")),
            fmt_err(v.get("tolerance")), "pass" if v.get("passed") else "FAIL"])
    n = len(config_columns(res))
    return Table("errors", "Errors against the fp64 reference", config_columns(res) + [
        "variant", "judged by", "max abs error", "RMSE", "baseline", "tolerance", "verdict"], out,
        "Baseline: a plain same-precision implementation (fp8: plain per-head FP8) on the same "
        "rows; see docs/accuracy.md.", left=set(range(n + 2)) | {n + 6}, config_cols=n)


def not_run_table(res: Results) -> Table:
    rows = [r for r in res.rows if r["status"] != "ok"]
    out = [config_label(r, res) + [res.label(r["label"]), r["status"], r["reason"] or "-"]
           for r in rows]
    n = len(config_columns(res))
    return Table("not-run", "Rows without a time", config_columns(res) + [
        "variant", "status", "reason"], out, left=set(range(n + 3)), config_cols=n)


def kernels_table(res: Results) -> Table:
    out = []
    for r in res.rows:
        for k in (r.get("counters") or {}).get("kernels") or []:
            vals = k.get("values") or {}
            dram = (vals.get("dram__bytes_read.sum", 0.0) or 0.0) + (
                vals.get("dram__bytes_write.sum", 0.0) or 0.0)
            l2 = ((vals.get("lts__t_sectors_srcunit_tex_op_read.sum", 0.0) or 0.0)
                  + (vals.get("lts__t_sectors_srcunit_tex_op_write.sum", 0.0) or 0.0)) * 32
            ns = vals.get("gpu__time_duration.sum")
            out.append(config_label(r, res) + [
                res.label(r["label"]), str(k.get("name", "?")), fmt_bytes(dram),
                fmt_bytes(l2), f"{ns / 1e6:.3f}" if isinstance(ns, (int, float)) else "-"])
    n = len(config_columns(res))
    return Table("kernels", "Per-kernel counters", config_columns(res) + [
        "variant", "kernel", "DRAM bytes", "L2 bytes", "duration [ms]"], out,
        "From counters.kernels (an untimed counter run).", left=set(range(n + 2)),
        config_cols=n)


def kernel_configs_table(res: Results) -> Table:
    """What each series ran, by shape: a default schedule or tile that fa-bench picks per shape
    is an attribute of the point (fa3: 192×128 with 4 warpgroups at d=64, 128×128 with 3 at
    d=128), shown here rather than as a series of its own."""
    shapes: dict[tuple, dict[tuple, set[int]]] = {}
    for r in res.rows:
        if r["kernel_text"]:
            key = (r["device_name"], r["label"], r["kernel_text"])
            shapes.setdefault(key, {}).setdefault(
                (r["d"], r["causal"], kv_class(r), kv_note(r)), set()).add(r["N"])
    out = []
    for (device, label, text), where in sorted(shapes.items()):
        parts = []
        for (d, causal, _, note), ns in sorted(where.items()):
            n = sorted(ns)
            span = f"N={n[0]}" if len(n) == 1 else f"N={n[0]}–{n[-1]} ({len(n)} sizes)"
            parts.append(f"d={d} {causal_word(causal)} {span}" + (f", {note}" if note else ""))
        out.append(([device] if res.many_devices else []) + [res.label(label), text,
                                                              "; ".join(parts)])
    cols = (["device"] if res.many_devices else []) + ["variant", "kernel configuration",
                                                       "shapes"]
    return Table("kernel-configs", "Kernel configuration of each series", cols, out,
                 "A series is a variant with the options the run chose; the tile, warpgroups "
                 "and schedule fa-bench picks for each shape are listed here.",
                 left=set(range(len(cols))))


TABLE_ROWS = 240  # rows a table shows in report.md/html; a larger sweep is sampled


def capped(t: Table, limit: int = TABLE_ROWS) -> Table:
    """A table of a large sweep, cut to about ``limit`` rows: whole configurations, evenly
    spaced over the sorted ones (so every d, mask and range of N stays represented); the note
    says how many are shown and where every row is."""
    if len(t.rows) <= limit or not t.config_cols:
        return t
    order: dict[tuple, list[list[str]]] = {}
    for row in t.rows:
        order.setdefault(tuple(row[:t.config_cols]), []).append(row)
    keys = list(order)
    per = max(1, len(t.rows) // len(keys))
    want = max(2, limit // per)
    picked = sorted({round(i * (len(keys) - 1) / (want - 1)) for i in range(want)})
    rows = [row for i in picked for row in order[keys[i]]]
    note = (f"{len(picked)} of {len(keys)} configurations shown (evenly spaced); "
            "`python -m reports FILE` prints every row. ")
    return Table(t.key, t.title, t.columns, rows, note + t.note, t.left, t.config_cols)


def energy_table(res: Results) -> Table:
    """Every timed row's energy window: the counter's figure (or why there is none), the sampled
    power's, the clock, and the model beside it (docs/energy.md)."""
    rows, _ = latest_rows(res, [r for r in res.ok() if r.get("energy")])
    rows.sort(key=lambda r: (_ckey(r), r["label"]))
    out = []
    for r in rows:
        e = r["energy"]
        m = e.get("model") or {}
        measured = energy_mj(r)
        total = m.get("total_mj")
        clock = e.get("sm_clock_mhz") or {}
        out.append(config_label(r, res) + [
            res.label(r["label"]), e["status"],
            f"{measured:.4g}" if measured else "-",
            f"{e['power_w']:.0f}" if measured else "-",
            f"{clock['mean']:.0f} / {clock['min']:.0f}" if clock.get("samples") else "-",
            ", ".join(e.get("clock_event_reasons") or []) or "-",
            f"{total:.4g}" if total else "-",
            f"{total / measured - 1:+.1%}" if total and measured else "-",
            f"{m['byte_mj'] / total:.0%}" if total else "-",
            f"{m['l2_mj'] / total:.0%}" if total and m.get("l2_mj") is not None else "-",
            f"{m['inst_mj'] / total:.0%}" if total and m.get("inst_mj") is not None else "-",
            m.get("bytes_basis", "-"),
            "; ".join(x for x in (e.get("reason"), e.get("model_reason")) if x) or "-"])
    n = len(config_columns(res))
    return Table("energy", "Energy per launch: measured and modelled", config_columns(res) + [
        "variant", "status", "measured [mJ]", "power [W]", "SM clock mean / min [MHz]",
        "clock held by", "model [mJ]", "model vs measured", "DRAM share (model)",
        "L2 share (model)", "instruction share (model)", "bytes from", "reason"], out,
        "Measured: NVML's energy counter across a window of launches back to back, between two of "
        "its updates, divided by the launches (docs/energy.md). Model: s·(ε_flop·FLOPs + "
        "ε_inst·warp instructions) + ε_L2·SM↔L2 bytes + ε_byte·DRAM bytes + P_dram·time while "
        "HBM moves bytes + (constant + busy-SM power) × time per launch, s = (max(SM clock, the fitted floor) / the device's "
        "highest)^α, fitted on the device's calibration kernels; instructions and L2 bytes "
        "counted (a row without counters has no model figure), DRAM bytes from the counters when "
        "they ran, else the IO model; the DRAM share holds both DRAM terms. Files before P_dram "
        "have no HBM power term; files before the L2 term have no L2 share (and s = (SM "
        "clock / highest)^α); files before the instruction term: ε_flop·FLOPs + ε_byte·DRAM "
        "bytes + constant power × time, no instruction share.",
        left=set(range(n + 2)) | {n + 5, n + 11, n + 12}, config_cols=n)


def energy_reading(res: Results) -> list[str]:
    """Per (device, d, mask) at the largest N with a standard row: how standard attention's
    modelled energy splits, and the DRAM share of fa2's and fa3's against it."""
    out = []
    for device in res.devices():
        rows, _ = latest_rows(res, default_rows(res.ok(device)))
        for r in energy_split_rows(rows):
            if r["algorithm"] != "standard" or r["peer"]:
                continue
            m = r["energy"]["model"]
            total = m["total_mj"]
            parts = ", ".join(f"{m[k] / total:.0%} {label}" for k, label, _ in energy_parts(m))
            where = f"N = {r['N']}" + (f" ({kv_note(r)})" if kv_note(r) else "")
            text = (f"{device}, {where}, d = {r['d']}, {causal_word(r['causal'])}: standard "
                    f"attention takes {energy_mj(r):.4g} mJ per launch (model {total:.4g} mJ: "
                    f"{parts})")
            others = [o for o in rows if o["N"] == r["N"] and o["d"] == r["d"]
                      and o["causal"] == r["causal"] and kv_class(o) == kv_class(r)
                      and o["label"] in ("fa2", "fa3")
                      and energy_mj(o) and (o["energy"].get("model") or {}).get("total_mj")]
            for o in sorted(others, key=lambda o: o["label"]):
                om = o["energy"]["model"]
                text += (f"; {o['label']} {energy_mj(o):.4g} mJ, {om['byte_mj'] / om['total_mj']:.0%}"
                         f" of it DRAM ({om['byte_mj']:.3g} mJ against standard's "
                         f"{m['byte_mj']:.3g})")
                if om.get("l2_mj") is not None:
                    text += f", {om['l2_mj'] / om['total_mj']:.0%} SM ↔ L2 bytes"
                if om.get("inst_mj") is not None:
                    text += f" and {om['inst_mj'] / om['total_mj']:.0%} instructions"
            out.append(text + ".")
    return out


def tables(res: Results) -> list[Table]:
    out = [runs_table(res), device_table(res), settings_table(res), ceilings_table(res),
           time_table(res), tflops_table(res), bytes_table(res), roofline_table(res),
           errors_table(res), kernel_configs_table(res)]
    for extra in (not_run_table(res), kernels_table(res), energy_table(res)):
        if extra.rows:
            out.append(extra)
    return [capped(t) for t in out]


# -- generated prose -----------------------------------------------------------------------------


def _representative(rows: list[dict]) -> dict:
    """The row a sentence quotes: non-causal when there is one, then the largest N."""
    return max(rows, key=lambda r: (not r["causal"], r["N"]))


def roofline_reading(res: Results) -> list[str]:
    """One sentence per (device, variant, d): the binding roof and how close the variant gets,
    quoted at the largest non-causal N, with the range over the other configurations."""
    out = []
    for device in res.devices():
        roofs = res.roofs(device)
        rows, _ = latest_rows(res, default_rows(res.ok(device)))
        if roofs is None or not rows:
            continue
        kind = "measured" if roofs.measured else "datasheet"
        groups: dict[tuple, list[dict]] = {}
        for r in rows:
            groups.setdefault((r["label"], r["d"], r["dtype"]), []).append(r)
        for (variant, d, dtype), grows in groups.items():
            placed = [(r, _roof_placement(r, res)) for r in grows]
            placed = [(r, p) for r, p in placed if p]
            if not placed:
                continue
            # Rows with counters place a variant better than its compulsory bytes: use only
            # those when the group has any.
            if any(p["from_counters"] for _, p in placed):
                placed = [(r, p) for r, p in placed if p["from_counters"]]
            r, p = max(placed, key=lambda rp: (not rp[0]["causal"], rp[0]["N"],
                                               kv_class(rp[0]) == SQUARE))
            note = f" ({kv_note(r)})" if kv_note(r) else ""  # grouped-query, non-square
            where = f"d={d}, N={r['N']}{note}{', causal' if r['causal'] else ''}"
            name = res.label(variant)
            if p["bound"] == "compute":
                peak_dt = precision(r)
                text = (f"{name} reaches {fmt_pct(p['fraction'])} of the {kind} {peak_dt} tensor "
                        f"roof ({p['attainable_tflops']:.0f} TFLOP/s) at {where}")
            elif p["bound"] == "dram":
                bw = p["attained"] / p["intensity_dram"]
                basis = "measured DRAM bytes" if p["from_counters"] else "compulsory bytes"
                text = (f"{name} is DRAM-bound at {where}: {bw / 1e12:.2f} TB/s ({basis}), "
                        f"{fmt_pct(p['fraction'])} of the {kind} DRAM bandwidth")
            else:
                text = (f"{name} is L2-bound at {where}: {fmt_pct(p['fraction'])} of the "
                        f"measured L2 bandwidth")
            fractions = [q["fraction"] for _, q in placed]
            bounds = sorted({BOUND_WORD[q["bound"]] for _, q in placed})
            if len(placed) > 1:
                text += (f"; {fmt_pct(min(fractions))}–{fmt_pct(max(fractions))} of the binding "
                         f"roof over its {len(placed)} configurations at d={d}")
                if len(bounds) > 1:
                    text += f" ({' or '.join(bounds)}-bound)"
            if len(res.devices()) > 1:
                text = f"{device}: {text}"
            out.append(text + ".")
    return out


def fastest_summary(res: Results) -> list[str]:
    """Who is fastest where: per (device, dtype, d, mask) the winner at each N and its margin
    over the runner-up; peers compared when present."""
    out = []
    rows, _ = latest_rows(res, default_rows(res.ok()))
    groups: dict[tuple, dict[int, list[dict]]] = {}
    for r in rows:
        # grouped-query and non-square rows race among their own kind (kv_class)
        key = (r["device_name"], r["inputs"], r["dtype"], r["d"], r["causal"], kv_class(r),
               kv_note(r))
        groups.setdefault(key, {}).setdefault(r["N"], []).append(r)
    many_devices, many_inputs = _multi(res)
    for (device, inputs, dtype, d, causal, _, note), by_n in sorted(groups.items()):
        winners = []
        for n in sorted(by_n):
            ranked = sorted(by_n[n], key=lambda r: r["median_ms"])
            margin = ranked[1]["median_ms"] / ranked[0]["median_ms"] if len(ranked) > 1 else None
            winners.append((n, ranked[0], ranked[1] if len(ranked) > 1 else None, margin))
        head = f"{dtype}, d={d}, {causal_word(causal)}"
        if note:
            head += f", {note}"
        if many_inputs:
            head += f", {inputs} inputs"
        if many_devices:
            head = f"{device}, {head}"
        names = {w[1]["label"] for w in winners}
        if len(names) == 1:
            first = winners[0][1]["label"]
            margins = [w[3] for w in winners if w[3]]
            seconds = sorted({w[2]["label"] for w in winners if w[2]})
            where = f"at every N ({_ns(by_n)})" if len(by_n) > 1 else f"at {_ns(by_n)}"
            text = f"{head}: {res.label(first)} is fastest {where}"
            if margins:
                text += (f", {min(margins):.2f}–{max(margins):.2f}× ahead of the next "
                         f"({', '.join(seconds)})" if len(margins) > 1 else
                         f", {margins[0]:.2f}× ahead of {seconds[0]}")
        else:
            text = f"{head}: " + _winner_runs(winners, res)
        peers = _peer_sentence(by_n, res)
        if peers:
            text += "; " + peers
        out.append(text + ".")
    return out


SUMMARY_RUNS = 6  # stretches of N with one winner a sentence lists; more are counted instead


def _winner_runs(winners: list[tuple], res: Results) -> str:
    """Who wins where, when it changes with N: each stretch of consecutive N with one winner
    ("N=1024–4096: fa3 (1.02–1.10× ahead of fp8)"); a sweep whose winner changes more often
    than SUMMARY_RUNS times gets counts ("fp8 at 612 of 1000 N, fa3 at 388")."""
    runs: list[list[tuple]] = []
    for w in winners:
        if runs and runs[-1][-1][1]["label"] == w[1]["label"]:
            runs[-1].append(w)
        else:
            runs.append([w])
    if len(runs) > SUMMARY_RUNS:
        counts: dict[str, int] = {}
        for w in winners:
            counts[w[1]["label"]] = counts.get(w[1]["label"], 0) + 1
        ranked = sorted(counts.items(), key=lambda kv: -kv[1])
        ns = [w[0] for w in winners]
        return (f"the fastest changes with N (N = {ns[0]}–{ns[-1]}): "
                + ", ".join(f"{res.label(v)} at {k} of {len(winners)} N" for v, k in ranked))
    parts = []
    for run in runs:
        n0, n1 = run[0][0], run[-1][0]
        where = f"N={n0}" if n0 == n1 else f"N={n0}–{n1}"
        margins = [m for _, _, _, m in run if m]
        seconds = sorted({s["label"] for _, _, s, _ in run if s})
        text = f"{where}: {res.label(run[0][1]['label'])}"
        if margins:
            span = (f"{margins[0]:.2f}×" if len(margins) == 1 or
                    f"{min(margins):.2f}" == f"{max(margins):.2f}"
                    else f"{min(margins):.2f}–{max(margins):.2f}×")
            text += f" ({span} ahead of {', '.join(seconds)})"
        parts.append(text)
    return "; ".join(parts)


def _ns(by_n: dict) -> str:
    ns = sorted(by_n)
    return f"N = {ns[0]}" if len(ns) == 1 else f"N = {ns[0]}–{ns[-1]}"


def _peer_sentence(by_n: dict[int, list[dict]], res: Results) -> str:
    """Our best variant against the fastest peer of the same precision (fp8 rows against fp8
    peers such as cudnn-fp8, bf16/fp16 rows against same-dtype non-fp8 peers): the rule
    fa-bench's ``derived.speed_vs_best_peer`` follows, computed here from the rows so that
    older files (whose ratio may be against a peer of another precision) agree."""
    ratios: dict[str, list[tuple]] = {}
    for n, rows in sorted(by_n.items()):
        for prec in sorted({precision(r) for r in rows}):
            ours = [r for r in rows if not r["peer"] and precision(r) == prec]
            peers = [r for r in rows if r["peer"] and precision(r) == prec]
            if not ours or not peers:
                continue
            best = min(ours, key=lambda r: r["median_ms"])
            top = min(peers, key=lambda r: r["median_ms"])
            ratios.setdefault(prec, []).append(
                (n, best["label"], top["label"], top["median_ms"] / best["median_ms"]))
    parts = []
    for prec, rs in ratios.items():
        lo, hi = min(x[3] for x in rs), max(x[3] for x in rs)
        ours = sorted({x[1] for x in rs})
        peers = sorted({x[2] for x in rs})
        span = f"{lo:.2f}×" if f"{lo:.2f}" == f"{hi:.2f}" else f"{lo:.2f}–{hi:.2f}×"
        head = f"{prec} rows: " if len(ratios) > 1 else ""
        parts.append(f"{head}best of ours ({', '.join(ours)}) runs at {span} the speed of the "
                     f"best {prec} peer ({', '.join(peers)})")
    return "; ".join(parts)


def roofs_sentence(res: Results) -> list[str]:
    out = []
    for device in res.devices():
        roofs = res.roofs(device)
        if roofs is None:
            continue
        if roofs.measured:
            parts = [f"DRAM {roofs.dram / 1e12:.2f} TB/s"
                     + (f" ({fmt_pct(roofs.dram / roofs.datasheet_dram)} of the datasheet's "
                        f"{roofs.datasheet_dram / 1e12:.2f})" if roofs.datasheet_dram else "")]
            if roofs.l2:
                parts.append(f"L2 {roofs.l2 / 1e12:.2f} TB/s")
            for dt, peak in sorted(roofs.tensor.items()):
                sheet = roofs.datasheet_tensor.get(dt)
                parts.append(f"{dt} tensor {peak / 1e12:.0f} TFLOP/s"
                             + (f" ({fmt_pct(peak / sheet)} of the datasheet's "
                                f"{sheet / 1e12:.0f})" if sheet else ""))
            out.append(f"{device}: measured roofs: " + ", ".join(parts) + ".")
        else:
            parts = [f"DRAM {roofs.dram / 1e12:.2f} TB/s"] + [
                f"{dt} tensor {p / 1e12:.0f} TFLOP/s" for dt, p in sorted(roofs.tensor.items())]
            out.append(f"{device}: roofs from the datasheet (not measured): " + ", ".join(parts)
                       + ".")
    return out


# -- rendering -------------------------------------------------------------------------------------


def _md_cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def table_md(t: Table) -> str:
    lines = [f"### {t.title}", ""]
    if not t.rows:
        lines.append(t.note or "(no rows)")
        return "\n".join(lines)
    lines.append("| " + " | ".join(_md_cell(c) for c in t.columns) + " |")
    lines.append("|" + "|".join("---" if i in t.left else "---:" for i in range(len(t.columns)))
                 + "|")
    for row in t.rows:
        lines.append("| " + " | ".join(_md_cell(c) for c in row) + " |")
    if t.note:
        lines += ["", t.note]
    return "\n".join(lines)


def _html_text(text: str) -> str:
    """Escape, then the two bits of Markdown the cells use: **bold** and `code`."""
    out = html.escape(text)
    if "*" not in out and "`" not in out:
        return out
    while out.count("**") >= 2:
        out = out.replace("**", "<b>", 1).replace("**", "</b>", 1)
    while out.count("`") >= 2:
        out = out.replace("`", "<code>", 1).replace("`", "</code>", 1)
    return out


def table_html(t: Table) -> str:
    parts = [f'<h3 id="table-{t.key}">{html.escape(t.title)}</h3>']
    if not t.rows:
        parts.append(f"<p>{html.escape(t.note or '(no rows)')}</p>")
        return "\n".join(parts)
    parts.append(f'<table class="data" data-table="{t.key}"><thead><tr>')
    parts += [f'<th class="{"l" if i in t.left else "r"}">{html.escape(c)}</th>'
              for i, c in enumerate(t.columns)]
    parts.append("</tr></thead><tbody>")
    opening = [f'<td class="{"l" if i in t.left else "r"}">' for i in range(len(t.columns))]
    for row in t.rows:
        parts.append("<tr>" + "".join(
            f"{opening[i]}{_html_text(c)}</td>" for i, c in enumerate(row)) + "</tr>")
    parts.append("</tbody></table>")
    if t.note:
        parts.append(f'<p class="note">{_html_text(t.note)}</p>')
    return "\n".join(parts)


CSS = """
body { font-family: system-ui, -apple-system, "Segoe UI", sans-serif; max-width: 1200px;
       margin: 2em auto; padding: 0 1em; color: #222; line-height: 1.45; }
h1 { font-size: 1.6em; margin-bottom: 0.2em; } h2 { margin-top: 2em; border-bottom: 1px solid #ddd; }
table.data { border-collapse: collapse; font-size: 0.82em; margin: 0.5em 0; }
table.data th, table.data td { padding: 2px 8px; border-bottom: 1px solid #eee; }
table.data th { background: #f4f4f4; position: sticky; top: 0; }
td.r, th.r { text-align: right; font-variant-numeric: tabular-nums; } td.l, th.l { text-align: left; }
figure { margin: 1.5em 0; } figure img { max-width: 100%; border: 1px solid #eee; }
figcaption { font-size: 0.9em; color: #444; } p.note { font-size: 0.85em; color: #555; }
p.skipped { color: #8a5a00; } code { font-size: 0.9em; background: #f6f6f6; padding: 0 3px; }
"""


def _plots_md(plots: list[Plot]) -> list[str]:
    lines = []
    for p in plots:
        lines += [f"### {p.title}", ""]
        if p.figure is None:
            lines.append(f"Skipped: {p.skipped}.")
        else:
            lines.append(f"![{p.title}]({p.name}.png)")
            lines.append("")
            lines.append(f"[SVG]({p.name}.svg)" + "".join(f" {n}" for n in p.notes))
        lines.append("")
    return lines


def _plots_html(plots: list[Plot]) -> list[str]:
    parts = []
    for p in plots:
        parts.append(f'<h3 id="plot-{html.escape(p.name)}">{html.escape(p.title)}</h3>')
        if p.figure is None:
            parts.append(f'<p class="skipped">Skipped: {html.escape(p.skipped)}.</p>')
            continue
        png = Path(p.files[0]).read_bytes()
        data = base64.b64encode(png).decode("ascii")
        notes = " ".join(html.escape(n) for n in p.notes)
        parts.append(f'<figure><img alt="{html.escape(p.title)}" data-plot="{html.escape(p.name)}" '
                     f'src="data:image/png;base64,{data}"><figcaption>{notes} '
                     f'<a href="{html.escape(p.name)}.svg">SVG</a></figcaption></figure>')
    return parts


def header_lines(res: Results) -> tuple[str, list[str]]:
    devices = ", ".join(res.devices())
    ok = res.ok()
    title = f"fa-bench report: {devices}"
    facts = [
        f"{len(res.runs)} result file(s), {len(res.rows)} rows, {len(ok)} timed; "
        f"{bh_text(res.rows) or 'no configurations'}.",
    ]
    incomplete = [os.path.basename(r.path) for r in res.runs if not r.doc["complete"]]
    if incomplete:
        facts.append("Interrupted runs (partial results): " + ", ".join(incomplete) + ".")
    return title, facts


def build(res: Results, outdir: str | os.PathLike, log=print) -> dict:
    """Write every plot (PNG + SVG), report.md and report.html into ``outdir``.
    Returns {"plots": [Plot], "tables": [Table], "markdown": path, "html": path}."""
    out = Path(outdir)
    out.mkdir(parents=True, exist_ok=True)
    plots = all_plots(res)
    for p in plots:
        if p.figure is None:
            log(f"report: skipped plot {p.name}: {p.skipped}")
        else:
            save(p, out)
            log(f"report: wrote {p.files[0]} (+ .svg)")
    tabs = tables(res)
    title, facts = header_lines(res)
    summary = fastest_summary(res)
    reading = roofs_sentence(res) + roofline_reading(res)
    energy = energy_reading(res)
    by_key = {t.key: t for t in tabs}
    setup_keys = ("runs", "device", "settings", "ceilings")
    result_keys = [t.key for t in tabs if t.key not in setup_keys]

    md = [f"# {title}", "", *facts, "", "## Run", ""]
    for k in setup_keys:
        md += [table_md(by_key[k]), ""]
    md += ["## Who is fastest where", "", *[f"- {s}" for s in summary], "",
           "## Reading the roofline", "", *[f"- {s}" for s in reading], ""]
    if energy:
        md += ["## Where the energy goes", "", *[f"- {s}" for s in energy], ""]
    md += ["## Plots", ""]
    md += _plots_md(plots)
    md += ["## Tables", ""]
    for k in result_keys:
        md += [table_md(by_key[k]), ""]
    md_path = out / "report.md"
    md_path.write_text("\n".join(md).rstrip() + "\n", encoding="utf-8")

    h = ["<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8">',
         f"<title>{html.escape(title)}</title>", f"<style>{CSS}</style></head><body>",
         f"<h1>{html.escape(title)}</h1>", *[f"<p>{html.escape(f)}</p>" for f in facts],
         "<h2>Run</h2>"]
    h += [table_html(by_key[k]) for k in setup_keys]
    h += ['<h2 id="summary">Who is fastest where</h2>', "<ul>",
          *[f"<li>{html.escape(s)}</li>" for s in summary], "</ul>",
          '<h2 id="reading">Reading the roofline</h2>', "<ul>",
          *[f"<li>{html.escape(s)}</li>" for s in reading], "</ul>"]
    if energy:
        h += ['<h2 id="energy">Where the energy goes</h2>', "<ul>",
              *[f"<li>{html.escape(s)}</li>" for s in energy], "</ul>"]
    h += ["<h2>Plots</h2>"]
    h += _plots_html(plots)
    h += ["<h2>Tables</h2>", *[table_html(by_key[k]) for k in result_keys], "</body></html>"]
    html_path = out / "report.html"
    html_path.write_text("\n".join(h) + "\n", encoding="utf-8")
    log(f"report: wrote {md_path} and {html_path}")
    return {"plots": plots, "tables": tabs, "markdown": str(md_path), "html": str(html_path),
            "summary": summary, "reading": reading, "energy": energy}
