"""The report's plots, drawn with matplotlib's object API on the Agg backend (no display).

Each ``plot_*`` function takes the merged :class:`~reports.data.Results` and one device and
returns a :class:`Plot`: a figure, or none and the reason it was skipped. Colours and markers
per variant come from ``Results`` so they agree across every plot of one report.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass, field
from pathlib import Path

import matplotlib

matplotlib.use("Agg")

from matplotlib.backends.backend_agg import FigureCanvasAgg  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402
from matplotlib.lines import Line2D  # noqa: E402
from matplotlib.patches import Patch  # noqa: E402
from matplotlib.ticker import EngFormatter, FixedLocator, FuncFormatter, NullLocator  # noqa: E402

from reports.data import (  # noqa: E402
    Results,
    attained_flops,
    default_rows,
    title_line,
)

RC = {
    "font.size": 9,
    "axes.titlesize": 10,
    "axes.labelsize": 9,
    "legend.fontsize": 8,
    "xtick.labelsize": 8,
    "ytick.labelsize": 8,
    "axes.spines.top": False,
    "axes.spines.right": False,
    "axes.grid": True,
    "grid.color": "#dddddd",
    "grid.linewidth": 0.6,
    "axes.axisbelow": True,
    "svg.hashsalt": "fa-bench",
    "svg.fonttype": "none",
}
ROOF_COLOUR = "#222222"
L2_ROOF_COLOUR = "#7a7a7a"
SHEET_COLOUR = "#9a9a9a"
MODEL_LAW = {"standard": "∝ N²", "fa1": "∝ N²d²/M", "fa2": "∝ N²d²/M", "fp8": "∝ N²d²/M"}


@dataclass
class Plot:
    name: str  # file stem
    title: str  # what the plot shows, for the report's headings
    figure: Figure | None = None
    skipped: str = ""  # why there is no figure
    notes: list[str] = field(default_factory=list)  # what a reader should know (no counters ...)
    files: list[str] = field(default_factory=list)  # written paths (PNG first)


def _figure(width: float, height: float) -> Figure:
    fig = Figure(figsize=(width, height), layout="constrained")
    FigureCanvasAgg(fig)
    return fig


def _styled(fn):
    """Run a plot function under the report's rc settings (fonts, grid, spines)."""

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        with matplotlib.rc_context(RC):
            return fn(*args, **kwargs)

    return wrapper


def save(plot: Plot, outdir: Path) -> None:
    """Write ``<name>.png`` (200 dpi) and ``<name>.svg``; records the paths in ``plot.files``."""
    if plot.figure is None:
        return
    outdir.mkdir(parents=True, exist_ok=True)
    with matplotlib.rc_context(RC):
        for ext, kwargs in (("png", {"dpi": 200}), ("svg", {"metadata": {"Date": None}})):
            path = outdir / f"{plot.name}.{ext}"
            plot.figure.savefig(path, facecolor="white", **kwargs)
            plot.files.append(str(path))


def _title(fig: Figure, what: str, rows: list[dict], device: str) -> None:
    fig.suptitle(f"{what}\n{title_line(rows, device)}", fontsize=10)


def _n_axis(ax, ns: list[int]) -> None:
    ax.set_xscale("log", base=2)
    ns = sorted(set(ns))
    ax.xaxis.set_major_locator(FixedLocator(ns))
    ax.xaxis.set_minor_locator(NullLocator())
    ax.xaxis.set_major_formatter(FuncFormatter(lambda x, _: f"{int(round(x)):d}"))
    if len(ns) == 1:
        ax.set_xlim(ns[0] / 1.5, ns[0] * 1.5)
    else:
        ax.set_xlim(ns[0] / 1.25, ns[-1] * 1.25)
    ax.set_xlabel("sequence length N [tokens]")


def _tflops_formatter(x, _pos) -> str:
    return f"{x:g}"


# ---------------------------------------------------------------------------------------------
# 1. Roofline


@_styled
def plot_roofline(res: Results, device: str, name: str = "roofline") -> Plot:
    plot = Plot(name, "Roofline: attained FLOP/s against arithmetic intensity")
    rows = [r for r in res.ok(device) if r["model"]["flops_matrix"] > 0]
    roofs = res.roofs(device)
    if not rows:
        plot.skipped = f"no timed rows (status ok) for {device}"
        return plot
    if roofs is None or roofs.dram <= 0 or not roofs.tensor:
        plot.skipped = f"the result files for {device} carry no DRAM bandwidth or tensor peak (ceilings)"
        return plot

    fig = _figure(8.6, 5.4)
    ax = fig.add_subplot()
    ax.set_xscale("log")
    ax.set_yscale("log")

    # Points. Measured (counters): filled at DRAM intensity, open at L2 intensity, joined by a
    # faint line (same time, same FLOPs). No counters: half-filled at the model's intensity.
    xs: list[float] = []
    ys: list[float] = []
    kinds: set[str] = set()
    for r in rows:
        colour, marker = res.style(r["variant"])
        y = attained_flops(r) / 1e12
        m = r.get("measured") or {}
        if m.get("intensity_dram", 0) > 0 and m.get("intensity_l2", 0) > 0:
            xd, xl = m["intensity_dram"], m["intensity_l2"]
            ax.plot([xl, xd], [y, y], color=colour, lw=0.6, alpha=0.35, zorder=2)
            ax.plot([xd], [y], marker=marker, ms=6, color=colour, mec="black", mew=0.4,
                    ls="none", zorder=4, gid=f"point-dram-{r['variant']}")
            ax.plot([xl], [y], marker=marker, ms=6, mfc="white", color=colour, mew=1.2,
                    ls="none", zorder=3, gid=f"point-l2-{r['variant']}")
            xs += [xd, xl]
            kinds |= {"dram", "l2"}
        else:
            x = (r.get("derived") or {}).get("arithmetic_intensity") or 0.0
            if x <= 0:
                continue
            ax.plot([x], [y], marker=marker, ms=6, color=colour, fillstyle="left",
                    mfc=colour, mfcalt="white", mec=colour, mew=1.0, ls="none", zorder=4,
                    gid=f"point-model-{r['variant']}")
            xs.append(x)
            kinds.add("model")
        ys.append(y)

    dtypes = sorted({r["dtype"] for r in rows})
    if any(r["algorithm"] == "fp8" for r in rows):
        dtypes.append("fp8")
    peaks = [(dt, roofs.tensor[dt]) for dt in dtypes if roofs.tensor.get(dt, 0) > 0]
    sheet_peaks = [(dt, roofs.datasheet_tensor[dt]) for dt in dtypes
                   if roofs.measured and roofs.datasheet_tensor.get(dt, 0) > 0]
    bandwidths = [("DRAM", roofs.dram, ROOF_COLOUR, "-" if roofs.measured else "--")]
    if roofs.l2 > 0:
        bandwidths.append(("L2", roofs.l2, L2_ROOF_COLOUR, "-"))
    if roofs.measured and roofs.datasheet_dram > 0:
        bandwidths.append(("DRAM datasheet", roofs.datasheet_dram, SHEET_COLOUR, "--"))
    top = max(p for _, p in peaks + sheet_peaks)
    ridge_lo = min(p for _, p in peaks) / max(b for _, b, _, _ in bandwidths)
    ridge_hi = top / min(b for _, b, _, _ in bandwidths)
    xmin = min(min(xs), ridge_lo) / 4
    xmax = max(max(xs), ridge_hi) * 2.5
    ymin = min(min(ys), xmin * roofs.dram / 1e12) / 2
    ymax = top / 1e12 * 2.2
    ax.set_xlim(xmin, xmax)
    ax.set_ylim(ymin, ymax)

    # Roofs: bandwidth diagonals up to the highest peak, peak horizontals from where they meet
    # the fastest diagonal. Datasheet figures dashed and lighter.
    bw_max = max(b for _, b, _, _ in bandwidths)
    roof_lines = []
    for label, bw, colour, ls in bandwidths:
        x_end = top / bw
        line, = ax.plot([xmin, x_end], [xmin * bw / 1e12, top / 1e12], color=colour, ls=ls,
                        lw=1.6 if roofs.measured and "datasheet" not in label else 1.1, zorder=1,
                        gid=f"roof-bw-{label}")
        kind = "" if "datasheet" in label or not roofs.measured else " (measured)"
        if not roofs.measured:
            kind = " (datasheet)"
        roof_lines.append((line, f"{label} {bw / 1e12:.2f} TB/s{kind}", colour, "diag"))
    for dt, peak in peaks:
        line, = ax.plot([peak / bw_max, xmax], [peak / 1e12] * 2, color=ROOF_COLOUR,
                        ls="-" if roofs.measured else "--", lw=1.6, zorder=1,
                        gid=f"roof-peak-{dt}")
        kind = "measured" if roofs.measured else "datasheet"
        roof_lines.append((line, f"{dt} tensor {peak / 1e12:.0f} TFLOP/s ({kind})", ROOF_COLOUR,
                           "flat"))
    for dt, peak in sheet_peaks:
        line, = ax.plot([peak / bw_max, xmax], [peak / 1e12] * 2, color=SHEET_COLOUR, ls="--",
                        lw=1.1, zorder=1, gid=f"roof-sheet-{dt}")
        roof_lines.append((line, f"{dt} datasheet {peak / 1e12:.0f} TFLOP/s", SHEET_COLOUR,
                           "flat"))

    ax.set_xlabel("arithmetic intensity [FLOP/byte]")
    ax.set_ylabel("attained performance [TFLOP/s]")
    ax.yaxis.set_major_formatter(FuncFormatter(_tflops_formatter))
    ax.xaxis.set_major_formatter(FuncFormatter(_tflops_formatter))
    ax.grid(True, which="major")
    ax.grid(True, which="minor", color="#f0f0f0", lw=0.4)

    # Legends outside the axes: variants, then what the marker fill means.
    variants = list(dict.fromkeys(r["variant"] for r in rows))
    handles = [Line2D([], [], marker=res.style(v)[1], color=res.style(v)[0], ls="none", ms=6,
                      mec="black", mew=0.4, label=res.label(v)) for v in variants]
    leg1 = ax.legend(handles=handles, title="variant", loc="upper left",
                     bbox_to_anchor=(1.01, 1.0), frameon=False)
    ax.add_artist(leg1)
    fill = []
    if "dram" in kinds:
        fill.append(Line2D([], [], marker="o", color="#555555", ls="none", ms=6,
                           label="measured DRAM bytes"))
    if "l2" in kinds:
        fill.append(Line2D([], [], marker="o", mfc="white", color="#555555", mew=1.2, ls="none",
                           ms=6, label="measured L2↔SM bytes"))
    if "model" in kinds:
        fill.append(Line2D([], [], marker="o", fillstyle="left", mfcalt="white", color="#555555",
                           ls="none", ms=6, label="IO-model bytes\n(no counters)"))
    ax.legend(handles=fill, title="intensity from", loc="upper left",
              bbox_to_anchor=(1.01, 0.45), frameon=False)
    _title(fig, "Roofline: each variant × configuration (all N, d, causal)", rows, device)

    # Roof labels along the lines, rotated to their on-screen slope (after layout).
    fig.draw_without_rendering()
    for line, text, colour, kind in roof_lines:
        xd, yd = line.get_data()
        if kind == "flat":
            ax.annotate(text, xy=(xd[-1], yd[-1]), xytext=(-3, 2), textcoords="offset points",
                        ha="right", va="bottom", fontsize=7.5, color=colour)
        else:
            p0 = ax.transData.transform((xd[0], yd[0]))
            p1 = ax.transData.transform((xd[1], yd[1]))
            angle = math.degrees(math.atan2(p1[1] - p0[1], p1[0] - p0[0]))
            # near the left end, on the line: the measured DRAM roof labelled below its line,
            # the others above theirs, so neighbouring labels do not collide
            xa = xmin * (xd[1] / xmin) ** 0.04 if xd[1] > xmin else xmin
            ya = xa * (yd[1] / xd[1])
            below = text.startswith("DRAM") and "datasheet" not in text
            ax.annotate(text, xy=(xa, ya), xytext=(3, -3) if below else (0, 3),
                        textcoords="offset points", rotation=angle, rotation_mode="anchor",
                        ha="left", va="top" if below else "bottom", fontsize=7.5, color=colour)
    plot.figure = fig
    if "model" in kinds:
        plot.notes.append("Half-filled markers sit at the IO model's intensity: these rows "
                          "carry no hardware counters.")
    return plot


# ---------------------------------------------------------------------------------------------
# 2. IO scaling


@_styled
def plot_io_scaling(res: Results, device: str, name: str = "io-scaling") -> Plot:
    plot = Plot(name, "IO scaling: bytes moved against N, measured and modelled")
    rows = [r for r in default_rows(res.rows) if r["device_name"] == device
            and r["status"] in ("ok", "model_only", "skipped", "unsupported")
            and r["model"]["bytes_read"] + r["model"]["bytes_written"] > 0]
    if not rows:
        plot.skipped = f"no rows with an IO model for {device}"
        return plot
    causal = not any(not r["causal"] for r in rows)
    rows = [r for r in rows if r["causal"] == causal]
    ns = sorted({r["N"] for r in rows})
    if len(ns) < 2:
        plot.skipped = f"one sequence length only (N={ns[0]}): nothing to scale"
        return plot
    measured = [r for r in rows if (r.get("measured") or {}).get("dram_bytes", 0) > 0]
    ds = sorted({r["d"] for r in rows})
    fig = _figure(8.6, 2.9 * len(ds) + 1.1)
    axes = fig.subplots(len(ds), 2, squeeze=False, sharex=True)
    variants = list(dict.fromkeys(r["variant"] for r in rows))
    for i, d in enumerate(ds):
        for j, (level, key) in enumerate((("DRAM", "dram_bytes"), ("L2↔SM", "l2_bytes"))):
            ax = axes[i][j]
            ax.set_yscale("log")
            drows = [r for r in rows if r["d"] == d]
            # compulsory floor: read Q, K, V once, write O once
            floor = {}
            for r in drows:
                per = r["model"]["bytes_compulsory"] / (r["B"] * r["H"])
                if per > 0:
                    floor[r["N"]] = min(floor.get(r["N"], per), per)
            values = list(floor.values())
            if floor:
                fx = sorted(floor)
                fy = [floor[n] for n in fx]
                ax.plot(fx, fy, color="black", ls=":", lw=1.3, zorder=2, gid="compulsory")
            for v in variants:
                vrows = sorted((r for r in drows if r["variant"] == v), key=lambda r: r["N"])
                if not vrows:
                    continue
                colour, marker = res.style(v)
                mx = [r["N"] for r in vrows]
                my = [(r["model"]["bytes_read"] + r["model"]["bytes_written"]) / (r["B"] * r["H"])
                      for r in vrows]
                ax.plot(mx, my, color=colour, lw=1.2, alpha=0.85, zorder=3, gid=f"model-{v}")
                pts = [(r["N"], r["measured"][key] / (r["B"] * r["H"])) for r in vrows
                       if (r.get("measured") or {}).get(key, 0) > 0]
                values += my + [p[1] for p in pts]
                if pts:
                    ax.plot([p[0] for p in pts], [p[1] for p in pts], marker=marker, ms=6,
                            color=colour, mec="black", mew=0.4, ls="none", zorder=4,
                            gid=f"measured-{v}")
            # below the compulsory floor is impossible without caching across launches: shade it
            lo, hi = min(values) / 2.5, max(values) * 2.5
            ax.set_ylim(lo, hi)
            if floor:
                ax.fill_between(fx, [lo] * len(fx), fy, color="#ececec", lw=0, zorder=0,
                                gid="below-compulsory")
            _n_axis(ax, ns)
            if i < len(ds) - 1:
                ax.set_xlabel("")
            ax.yaxis.set_major_formatter(EngFormatter(unit="B", places=0, sep=" "))
            ax.set_ylabel(f"{level} bytes per (batch·head)")
            ax.set_title(f"{level} traffic, d = {d}", loc="left")
            if not measured:
                ax.text(0.98, 0.04, "no hardware counters in these results:\nIO model only",
                        transform=ax.transAxes, ha="right", va="bottom", fontsize=7.5,
                        color="#666666")
    handles = []
    for v in variants:
        colour, marker = res.style(v)
        alg = next(r["algorithm"] for r in rows if r["variant"] == v)
        handles.append(Line2D([], [], color=colour, marker=marker if measured else None,
                              mec="black", mew=0.4, ms=6, lw=1.2,
                              label=f"{res.label(v)}  (model {MODEL_LAW.get(alg, '')})"))
    handles.append(Line2D([], [], color="black", ls=":", lw=1.3,
                          label="compulsory: Q, K, V read once, O written once"))
    handles.append(Patch(facecolor="#ececec", label="below the compulsory minimum"))
    fig.legend(handles=handles, loc="outside lower center", ncol=min(3, len(handles)),
               frameon=False)
    what = "causal" if causal else "non-causal"
    _title(fig, f"IO scaling ({what}): markers measured (CUPTI), lines the IO model", rows,
           device)
    plot.figure = fig
    if not measured:
        plot.notes.append("No hardware counters in these results: the panels show the IO model "
                          "and the compulsory floor only.")
    return plot


# ---------------------------------------------------------------------------------------------
# 3. Block size


def _tile_label(t: dict) -> str:
    return f"{t['block_q']}×{t['block_kv']}"


@_styled
def plot_block_size(res: Results, device: str, name: str = "block-size") -> Plot:
    plot = Plot(name, "Block size: traffic and runtime against tile shape (fa1, fa2)")
    groups: dict[tuple, list[dict]] = {}
    for r in res.ok(device):
        if r["peer"] or r["algorithm"] not in ("fa1", "fa2") or r["tiles"]["block_q"] <= 0:
            continue
        key = (r["algorithm"], r["block_order"], r["dtype"], r["d"], r["causal"], r["N"], r["B"],
               r["H"], r["run_index"])
        groups.setdefault(key, []).append(r)
    groups = {k: v for k, v in groups.items()
              if len({(r["tiles"]["block_q"], r["tiles"]["block_kv"]) for r in v}) >= 2}
    if not groups:
        plot.skipped = ("needs fa1/fa2 rows at two or more tile shapes of one configuration "
                        "(fa-bench --block-q 64,128 --block-kv 32,64,128); these results have "
                        "one tile shape per configuration")
        return plot
    # One line per (algorithm, d): the largest N, non-causal when there is one.
    chosen: dict[tuple, tuple] = {}
    for key in groups:
        alg, order, _, d, causal, n = key[:6]
        best = chosen.get((alg, order, d))
        if best is None or (not causal, n) > (not best[4], best[5]):
            chosen[(alg, order, d)] = key
    keys = sorted(chosen.values(), key=lambda k: (k[0], k[3]))
    tiles = sorted({(r["tiles"]["block_q"], r["tiles"]["block_kv"]) for k in keys
                    for r in groups[k]}, key=lambda t: (t[0] * t[1], t[0], t[1]))
    pos = {t: i for i, t in enumerate(tiles)}
    has_counters = any((r.get("measured") or {}).get("dram_bytes", 0) > 0
                       for k in keys for r in groups[k])
    fig = _figure(10.5, 3.6)
    axes = fig.subplots(1, 3)
    dash = ["-", "--", "-.", ":"]
    d_style = {d: dash[i % 4] for i, d in enumerate(sorted({k[3] for k in keys}))}
    handles = []
    for key in keys:
        alg, order, _, d, causal, n = key[:6]
        g = sorted(groups[key], key=lambda r: pos[(r["tiles"]["block_q"], r["tiles"]["block_kv"])])
        colour, marker = res.style(alg)
        x = [pos[(r["tiles"]["block_q"], r["tiles"]["block_kv"])] for r in g]
        label = f"{alg} d={d} N={n}{' causal' if causal else ''}"
        if order:
            label += f" ({order})"
        ls = d_style[d]
        meas = [(xi, r["measured"]) for xi, r in zip(x, g)
                if (r.get("measured") or {}).get("dram_bytes", 0) > 0]
        model = [r["model"]["bytes_read"] + r["model"]["bytes_written"] for r in g]
        axes[0].plot(x, model, color=colour, ls=ls, lw=1.0, alpha=0.6, marker=marker, mfc="white",
                     ms=5, gid=f"model-{alg}-{d}")
        if meas:
            axes[0].plot([m[0] for m in meas], [m[1]["dram_bytes"] for m in meas], color=colour,
                         ls=ls, marker=marker, ms=6, mec="black", mew=0.4, gid=f"dram-{alg}-{d}")
            axes[1].plot([m[0] for m in meas], [m[1]["l2_bytes"] for m in meas], color=colour,
                         ls=ls, marker=marker, ms=6, mec="black", mew=0.4, gid=f"l2-{alg}-{d}")
        axes[2].plot(x, [r["median_ms"] for r in g], color=colour, ls=ls, marker=marker, ms=6,
                     mec="black", mew=0.4, gid=f"time-{alg}-{d}")
        handles.append(Line2D([], [], color=colour, ls=ls, marker=marker, mec="black", mew=0.4,
                              label=label))
    titles = ("HBM (DRAM) traffic", "L2↔SM traffic", "runtime (median)")
    ylabels = ("bytes", "bytes", "time [ms]")
    for ax, t, yl in zip(axes, titles, ylabels):
        ax.set_xticks(range(len(tiles)), [f"{a}×{b}" for a, b in tiles], rotation=30)
        ax.set_xlabel("tile Br×Bc [query rows × key rows]")
        ax.set_title(t, loc="left")
        ax.set_ylabel(yl)
        ax.set_ylim(bottom=0)  # linear from 0, as in the FlashAttention paper's figure
    axes[0].yaxis.set_major_formatter(EngFormatter(unit="B", places=1, sep=" "))
    axes[1].yaxis.set_major_formatter(EngFormatter(unit="B", places=1, sep=" "))
    if not has_counters:
        axes[1].set_yticks([])
        for ax in axes[:2]:
            ax.text(0.5, 0.5, "no hardware counters\nin these rows", transform=ax.transAxes,
                    ha="center", va="center", color="#666666", fontsize=8)
    handles.append(Line2D([], [], color="#555555", marker="o", mfc="white", lw=1.0, alpha=0.6,
                          label="IO model bytes (open markers)"))
    fig.legend(handles=handles, loc="outside lower center", ncol=min(4, len(handles)),
               frameon=False)
    rows = [r for k in keys for r in groups[k]]
    _title(fig, "Block size: HBM and L2 traffic and runtime against the tile shape", rows, device)
    plot.figure = fig
    return plot


# ---------------------------------------------------------------------------------------------
# 4. Throughput


@_styled
def plot_throughput(res: Results, device: str, name: str = "throughput") -> Plot:
    plot = Plot(name, "Throughput against N, one panel per head dimension")
    rows = default_rows(res.ok(device))
    rows = [r for r in rows if r.get("tflops_convention")]
    if not rows:
        plot.skipped = f"no timed rows (status ok) for {device}"
        return plot
    ds = sorted({r["d"] for r in rows})
    ns = sorted({r["N"] for r in rows})
    fig = _figure(4.2 * len(ds) + 1.8, 4.0)
    axes = fig.subplots(1, len(ds), squeeze=False, sharey=True)[0]
    variants = list(dict.fromkeys(r["variant"] for r in rows))
    for ax, d in zip(axes, ds):
        for v in variants:
            colour, marker = res.style(v)
            for causal in (False, True):
                pts = sorted((r["N"], r["tflops_convention"]) for r in rows
                             if r["variant"] == v and r["d"] == d and r["causal"] == causal)
                if not pts:
                    continue
                ax.plot([p[0] for p in pts], [p[1] for p in pts], color=colour, marker=marker,
                        ls="--" if causal else "-", ms=5, mec=colour if causal else "black",
                        mew=1.0 if causal else 0.4, mfc="white" if causal else colour, lw=1.3,
                        gid=f"tput-{v}-{'causal' if causal else 'full'}")
        _n_axis(ax, ns)
        ax.set_title(f"d = {d}", loc="left")
    axes[0].set_ylim(0, max(r["tflops_convention"] for r in rows) * 1.08)
    axes[0].set_ylabel("throughput [TFLOP/s]\n(4·B·H·N²·d per second, halved for causal)")
    handles = [Line2D([], [], color=res.style(v)[0], marker=res.style(v)[1], mec="black",
                      mew=0.4, label=res.label(v)) for v in variants]
    handles += [Line2D([], [], color="#555555", ls="-", label="non-causal"),
                Line2D([], [], color="#555555", ls="--", marker="o", mfc="white", mew=1.0,
                       label="causal (open markers)")]
    axes[-1].legend(handles=handles, loc="upper left", bbox_to_anchor=(1.02, 1.0),
                    frameon=False)
    _title(fig, "Throughput against sequence length", rows, device)
    plot.figure = fig
    return plot


# ---------------------------------------------------------------------------------------------
# 5. FP8 accuracy


@_styled
def plot_fp8_accuracy(res: Results, device: str, name: str = "fp8-accuracy") -> Plot:
    plot = Plot(name, "FP8 accuracy: RMSE against the fp64 reference, per input distribution")
    rows = [r for r in default_rows(res.rows) if r["device_name"] == device
            and (r.get("verification") or {}).get("rmse") is not None]
    fp8 = [r for r in rows if r["algorithm"] == "fp8" and not r["peer"]
           or r["variant"] == "cudnn-fp8"]
    if not fp8:
        plot.skipped = f"no verified fp8 rows for {device}"
        return plot
    inputs = sorted({r["inputs"] for r in rows}, key=lambda s: (s != "normal", s))
    # Compare like with like: the configurations every distribution has; failing that, each
    # distribution's largest N.
    per_dist = [{(r["d"], r["causal"], r["N"]) for r in rows if r["inputs"] == i} for i in inputs]
    common = set.intersection(*per_dist)
    if common:
        rows = [r for r in rows if (r["d"], r["causal"], r["N"]) in common]
    else:
        top_n = {i: max(r["N"] for r in rows if r["inputs"] == i) for i in inputs}
        rows = [r for r in rows if r["N"] == top_n[r["inputs"]]]
    # Rows that carry no RMSE (e.g. peers checked by max error only) have no bar to draw.
    variants = list(dict.fromkeys(r["variant"] for r in rows if r["verification"].get("rmse")))
    n_configs = max(len({(r["d"], r["causal"], r["N"]) for r in rows if r["inputs"] == i}) for i in inputs)
    compact = n_configs > 6  # many groups: short tick labels, wider panels
    if compact:  # one distribution per row: a wide figure would not fit a page
        fig = _figure(0.75 * n_configs + 2.4, 3.3 * len(inputs) + 0.8)
        axes = fig.subplots(len(inputs), 1, squeeze=False, sharey=True)[:, 0]
    else:
        fig = _figure(4.6 * len(inputs) + 1.8, 4.0)
        axes = fig.subplots(1, len(inputs), squeeze=False, sharey=True)[0]
    for ax, dist in zip(axes, inputs):
        drows = [r for r in rows if r["inputs"] == dist]
        configs = sorted({(r["d"], r["causal"], r["N"]) for r in drows})
        present = [v for v in variants if any(r["variant"] == v for r in drows)]
        series = [*present, "plain FP8"]
        width = 0.8 / len(series)
        for si, v in enumerate(series):
            xs, ys = [], []
            for ci, cfg in enumerate(configs):
                match = [r for r in drows if (r["d"], r["causal"], r["N"]) == cfg and (
                    r["variant"] == v if v != "plain FP8" else r["algorithm"] == "fp8")]
                if not match:
                    continue
                ver = match[0]["verification"]
                val = ver.get("baseline_rmse") if v == "plain FP8" else ver["rmse"]
                if val:
                    xs.append(ci + (si - (len(series) - 1) / 2) * width)
                    ys.append(val)
            if v == "plain FP8":
                ax.bar(xs, ys, width, color="white", edgecolor=res.style("fp8")[0], hatch="////",
                       lw=0.8, gid="bars-plain-fp8")
            else:
                ax.bar(xs, ys, width, color=res.style(v)[0], edgecolor="black", lw=0.4,
                       gid=f"bars-{v}")
        # fp8 tolerance: a tick over each fp8 bar's group
        tol = [(ci, r["verification"]["tolerance"]) for ci, cfg in enumerate(configs)
               for r in drows if (r["d"], r["causal"], r["N"]) == cfg and r["algorithm"] == "fp8"
               and (r["verification"].get("metric") == "rmse")
               and r["verification"].get("tolerance")]
        if tol:
            ax.hlines([t for _, t in tol], [c - 0.45 for c, _ in tol], [c + 0.45 for c, _ in tol],
                      colors="black", linestyles="--", lw=1.0, gid="fp8-tolerance")
        ax.set_yscale("log")
        n_values = sorted({n for _, _, n in configs})
        one_n = len(n_values) == 1
        if compact:
            ax.set_xticks(range(len(configs)),
                          [f"{d}\n{'causal' if c else 'full'}\n{n // 1024}k" if n % 1024 == 0
                           else f"{d}\n{'causal' if c else 'full'}\n{n}" for d, c, n in configs])
            ax.set_xlabel("d / mask / N", fontsize=8)
        else:
            ax.set_xticks(range(len(configs)),
                          [f"d={d}\n{'causal' if c else 'non-causal'}" + ("" if one_n else f"\nN={n}")
                           for d, c, n in configs])
        ax.set_title(f"inputs: {dist}" + (f", N = {n_values[0]}" if one_n else ""), loc="left")
        ax.set_xlim(-0.6, len(configs) - 0.4)
    axes[0].set_ylabel("RMSE against the fp64 reference")
    handles = [Patch(facecolor=res.style(v)[0], edgecolor="black", lw=0.4, label=res.label(v))
               for v in variants]
    handles.append(Patch(facecolor="white", edgecolor=res.style("fp8")[0], hatch="////",
                         label="plain FP8 (per-head scales)"))
    handles.append(Line2D([], [], color="black", ls="--", label="fp8 tolerance"))
    axes[0 if compact else -1].legend(handles=handles, loc="upper left", bbox_to_anchor=(1.02, 1.0),
                                      frameon=False)
    if compact:
        for ax in axes:
            ax.set_ylabel("RMSE against the fp64 reference")
    _title(fig, "FP8 accuracy: RMSE per input distribution, against the bf16 variants", rows,
           device)
    plot.figure = fig
    return plot


PLOTS = (plot_roofline, plot_io_scaling, plot_block_size, plot_throughput, plot_fp8_accuracy)


def all_plots(res: Results) -> list[Plot]:
    """Every plot for every device (file names get a device suffix when there are several)."""
    devices = res.devices()
    out = []
    for fn in PLOTS:
        for device in devices:
            plot = fn(res, device)
            if len(devices) > 1:
                from reports.data import slug

                plot.name = f"{plot.name}-{slug(device)}"
                plot.title = f"{plot.title} ({device})"
            out.append(plot)
    return out
