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
from matplotlib.collections import LineCollection  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402
from matplotlib.lines import Line2D  # noqa: E402
from matplotlib.patches import Patch  # noqa: E402
from matplotlib.ticker import (  # noqa: E402
    EngFormatter,
    FixedLocator,
    FuncFormatter,
    LogLocator,
    MaxNLocator,
    NullFormatter,
    NullLocator,
)

from reports.data import (  # noqa: E402
    SQUARE,
    Results,
    attained_flops,
    default_rows,
    kv_cache_key,
    kv_class,
    kv_note,
    precision,
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
# What each IO-model line is (profiler/io_model.cpp): with fixed tiles the FlashAttention lines
# grow with d, not d²; the paper's law (8·N²·d²·e/M, tiles chosen as Br = M/(4d)) is drawn
# separately where the files carry the kernel's on-chip budget M (model.onchip_budget_bytes).
MODEL_LAW = {
    "standard": "S and P through DRAM ∝ N²",
    "fa1": "tile model: Q and the O, ℓ, m state re-read N/Bc times ∝ N²d/Bc",
    "fa2": "tile model: K/V re-read N/Br times ∝ N²d/Br",
    "fp8": "tile model: K/V re-read N/Br times ∝ N²d/Br",
}
SEED_LAW = "paper's law 8·N²·d²·e/M (M = the kernel's tile budget)"


def has_budget(r: dict) -> bool:
    """The row's model carries the on-chip budget M and, with it, the paper's law in
    ``bytes_asymptotic`` (files before that field hold another quantity there)."""
    return (r["model"].get("onchip_budget_bytes") or 0) > 0 and r["model"]["bytes_asymptotic"] > 0


def _offsets(keys: list, spread: float = 0.05) -> dict:
    """A small multiplicative x offset per series (log axes) so coinciding markers stay apart."""
    n = len(keys)
    return {k: 2 ** (spread * (i - (n - 1) / 2)) for i, k in enumerate(keys)}


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
    dense = _rasterize_dense(plot.figure)
    svg = {"metadata": {"Date": None}}
    if dense:
        svg["dpi"] = 200  # the rasterized markers keep the PNG's resolution
    with matplotlib.rc_context(RC):
        for ext, kwargs in (("png", {"dpi": 200}), ("svg", svg)):
            path = outdir / f"{plot.name}.{ext}"
            plot.figure.savefig(path, facecolor="white", **kwargs)
            plot.files.append(str(path))


DENSE_POINTS = 3000  # data points in one figure beyond which the SVG embeds them as an image
DENSE_ARTIST = 200  # ... for the artists with more points than this (roofs stay vectors)


def _npoints(artist) -> int:
    if isinstance(artist, Line2D):
        return len(artist.get_xdata())
    if isinstance(artist, LineCollection):
        return sum(len(seg) for seg in artist.get_segments())
    return 0


def _rasterize_dense(fig: Figure) -> int:
    """With thousands of rows (50,000 in a merged sweep) an SVG of one element per marker is
    hundreds of MB and takes minutes: the dense series (markers, joins) are rasterized in the
    SVG, the roofs, axes and text stay vectors. Returns how many artists were rasterized."""
    artists = [a for ax in fig.axes for a in (*ax.get_lines(), *ax.collections)]
    if sum(_npoints(a) for a in artists) <= DENSE_POINTS:
        return 0
    dense = [a for a in artists if _npoints(a) > DENSE_ARTIST]
    for a in dense:
        a.set_rasterized(True)
    return len(dense)


def _wrap(text: str, width_in: float, points: float = 10) -> str:
    """``text`` broken into lines that fit ``width_in`` inches at ``points`` (about 0.52 em a
    character), at " · ", then ": ", ", " or a space: a title never runs off the figure."""
    limit = max(20, int(width_in * 72 / (points * 0.52)))
    lines = []
    for line in text.split("\n"):
        while len(line) > limit:
            for sep in (" · ", ": ", ", ", " "):
                cut = line.rfind(sep, 0, limit)
                if cut > 0.4 * limit:
                    break
            if cut <= 0:
                break
            keep = sep.rstrip() if sep in (": ", ", ") else ""
            lines.append(line[:cut] + keep)
            line = line[cut + len(sep):]
        lines.append(line)
    return "\n".join(lines)


def _title(fig: Figure, what: str, rows: list[dict], device: str) -> None:
    width = fig.get_size_inches()[0] - 0.3
    fig.suptitle(_wrap(f"{what}\n{title_line(rows, device)}", width), fontsize=10)


MAX_TICKS = 8  # N values labelled on one axis; a sweep's other N get no tick label


def _ticks(values: list[int]) -> list[float]:
    """The values to label: all of a few; of a sweep, round numbers across a narrow range
    (1000-1999: 1000, 1200, ...) or, across octaves, the ends and the values nearest to evenly
    spaced points in log space -- 1,000 N get a few labels, not 1,000 to lay out."""
    if len(values) <= MAX_TICKS:
        return values
    lo, hi = values[0], values[-1]
    if hi / lo < 4:
        nice = MaxNLocator(nbins=5, steps=[1, 2, 2.5, 5, 10]).tick_values(lo, hi)
        return [t for t in nice if lo <= t <= hi]
    a, b = math.log(lo), math.log(hi)
    want = [math.exp(a + (b - a) * i / (MAX_TICKS - 1)) for i in range(MAX_TICKS)]
    return sorted({min(values, key=lambda v: abs(math.log(v) - math.log(w))) for w in want})


def _n_axis(ax, ns: list[int]) -> None:
    ax.set_xscale("log", base=2)
    ns = sorted(set(ns))
    ax.xaxis.set_major_locator(FixedLocator(_ticks(ns)))
    ax.xaxis.set_minor_locator(NullLocator())
    ax.xaxis.set_major_formatter(FuncFormatter(lambda x, _: f"{int(round(x)):d}"))
    if len(ns) == 1:
        ax.set_xlim(ns[0] / 1.5, ns[0] * 1.5)
    else:
        pad = min(1.25, max(1.02, (ns[-1] / ns[0]) ** 0.06))  # a narrow sweep fills its axis
        ax.set_xlim(ns[0] / pad, ns[-1] * pad)
    ax.set_xlabel("sequence length N [tokens]")


def _tflops_formatter(x, _pos) -> str:
    return f"{x:g}"


def _square_in_n(rows: list[dict], plot: Plot) -> list[dict]:
    """The rows a plot against N can draw: those whose K/V length is N, on a contiguous cache
    with every sequence N_kv long. A row with N_kv != N (decode: N = 1 against a long cache) is
    not a point on an N axis, nor is one whose sequences hold lengths apart or whose cache is
    paged (not the next point of a contiguous row's line); the plot's notes count those left
    out (the tables hold them)."""
    other_n = [r for r in rows if kv_class(r)[1]]
    cache = [r for r in rows if not kv_class(r)[1] and kv_class(r)[2:] != SQUARE[2:]]
    if other_n:
        plot.notes.append(f"{len(other_n)} row(s) whose K/V length differs from N "
                          "(N_kv ≠ N) are not drawn against N; the tables hold them.")
    if cache:
        plot.notes.append(f"{len(cache)} row(s) of a paged K/V cache or with each sequence's "
                          "own K/V length are not drawn against N; the tables hold them.")
    return [r for r in rows if kv_class(r)[1:] == SQUARE[1:]]


def _panels_by_d(rows: list[dict]) -> list[tuple[int, int]]:
    """(d, H_kv where it differs from H, else 0) of each panel of a plot against N: grouped-query
    rows get panels of their own, square multi-head rows one per d as ever."""
    return sorted({(r["d"], kv_class(r)[0]) for r in rows})


def _panel_title(d: int, h_kv: int) -> str:
    return f"d = {d}" + (f", H_kv = {h_kv}" if h_kv else "")


# ---------------------------------------------------------------------------------------------
# 1. Roofline

PRECISION_ORDER = {"bf16": 0, "fp16": 1, "fp8": 2}
CROWDED = 48  # rows in one precision's panel beyond which it is split per (d, causal)
LABEL_BOX = {"boxstyle": "round,pad=0.15", "fc": "white", "ec": "none", "alpha": 0.85}


def _roofline_panels(rows: list[dict]) -> list[tuple[str, str, list[dict]]]:
    """(precision, panel title, rows): one panel per precision, split per (d, causal) when a
    precision has more than CROWDED rows."""
    by_prec: dict[str, list[dict]] = {}
    for r in rows:
        by_prec.setdefault(precision(r), []).append(r)
    panels = []
    for prec in sorted(by_prec, key=lambda p: (PRECISION_ORDER.get(p, 9), p)):
        prows = by_prec[prec]
        if len(prows) <= CROWDED:
            panels.append((prec, f"{prec} rows", prows))
            continue
        groups: dict[tuple, list[dict]] = {}
        for r in prows:
            groups.setdefault((r["d"], r["causal"]), []).append(r)
        for (d, causal), g in sorted(groups.items()):
            panels.append((prec, f"{prec} rows, d = {d}, {'causal' if causal else 'non-causal'}",
                           g))
    return panels


@_styled
def plot_roofline(res: Results, device: str, name: str = "roofline") -> Plot:
    """Points at each row's placement (``r["place"]``, the same object the tables quote) and the
    roofs drawn as the roofline: each roof is min(ceiling, bandwidth × intensity), so a
    bandwidth line stops at its ridge point (marked) and the flat tensor roof of the panel's
    precision starts at the leftmost ridge."""
    plot = Plot(name, "Roofline: attained FLOP/s against arithmetic intensity")
    ok = [r for r in res.ok(device) if r["model"]["flops_matrix"] > 0]
    roofs = res.roofs(device)
    if not ok:
        plot.skipped = f"no timed rows (status ok) for {device}"
        return plot
    if roofs is None or roofs.dram <= 0 or not roofs.tensor:
        plot.skipped = f"the result files for {device} carry no DRAM bandwidth or tensor peak (ceilings)"
        return plot
    rows = [r for r in default_rows(ok) if r.get("place")
            and roofs.tensor.get(precision(r), 0) > 0]
    if not rows:
        plot.skipped = f"no row of {device} has a placement (tensor roof of its precision unknown)"
        return plot
    panels = _roofline_panels(rows)
    ncols = 1 if len(panels) == 1 else 2
    nrows = math.ceil(len(panels) / ncols)
    fig = _figure(5.6 * ncols + 2.6, 4.4 * nrows + 0.9)
    axes = fig.subplots(nrows, ncols, squeeze=False).ravel()
    for ax in axes[len(panels):]:
        ax.set_visible(False)
    kinds: set[str] = set()
    labels = []
    for ax, (prec, title, prows) in zip(axes, panels):
        k, panel_labels = _roofline_panel(ax, res, roofs, prec, prows)
        kinds |= k
        labels.append((ax, panel_labels))
        ax.set_title(title, loc="left")

    variants = list(dict.fromkeys(r["label"] for r in rows))
    handles = [Line2D([], [], marker=res.style(v)[1], color=res.style(v)[0], ls="none", ms=6,
                      mec="black", mew=0.4, label=res.label(v)) for v in variants]
    fill = []
    if "dram" in kinds:
        fill.append(Line2D([], [], marker="o", color="#555555", ls="none", ms=6,
                           label="measured DRAM bytes"))
    if "l2" in kinds:
        fill.append(Line2D([], [], marker="o", mfc="white", color="#555555", mew=1.2, ls="none",
                           ms=6, label="measured L2↔SM bytes"))
    if "compulsory" in kinds:
        fill.append(Line2D([], [], marker="o", fillstyle="left", mfcalt="white", color="#555555",
                           ls="none", ms=6, label="compulsory bytes\n(no counters)"))
    fill.append(Line2D([], [], marker="o", color=ROOF_COLOUR, mfc="white", ls="none", ms=5,
                       label="ridge point"))
    fig.legend(handles=handles + fill, loc="outside right upper", frameon=False,
               title="variant · intensity from")
    _title(fig, "Roofline: each variant × configuration, placed as the tables place it", rows,
           device)
    fig.draw_without_rendering()  # once, after layout: the labels follow on-screen slopes
    for ax, panel_labels in labels:
        _roof_labels(ax, panel_labels)
    plot.figure = fig
    if "compulsory" in kinds:
        plot.notes.append("Half-filled markers sit at the compulsory bytes' intensity (Q, K, V "
                          "read once, O written once): these rows carry no hardware counters, "
                          "so their place is an upper bound on intensity.")
    if any(r["place"].get("computed") for r in rows):
        plot.notes.append("Rows from files without a `placement` object are placed by the same "
                          "formula computed from the file's fields (docs/reports.md).")
    tiles = [r for r in ok if r.get("tile_variant")]
    if tiles:
        plot.notes.append(f"{len(tiles)} rows with non-default tiles are left out (see the "
                          "block-size plot).")
    return plot


def _roofline_panel(ax, res: Results, roofs, prec: str, rows: list[dict]) -> set[str]:
    ax.set_xscale("log")
    ax.set_yscale("log")
    xs: list[float] = []
    ys: list[float] = []
    kinds: set[str] = set()
    pts: dict[tuple[str, str], tuple[list[float], list[float]]] = {}
    joins: dict[str, list] = {}
    for r in rows:
        place = r["place"]
        y = attained_flops(r) / 1e12
        v = r["label"]
        xd = place["intensity_dram"]
        if place["basis"] == "counters":
            pts.setdefault((v, "dram"), ([], []))
            pts[(v, "dram")][0].append(xd)
            pts[(v, "dram")][1].append(y)
            kinds.add("dram")
            xl = place.get("intensity_l2")
            if xl:
                pts.setdefault((v, "l2"), ([], []))
                pts[(v, "l2")][0].append(xl)
                pts[(v, "l2")][1].append(y)
                joins.setdefault(v, []).append([(xl, y), (xd, y)])
                xs.append(xl)
                kinds.add("l2")
        else:
            pts.setdefault((v, "compulsory"), ([], []))
            pts[(v, "compulsory")][0].append(xd)
            pts[(v, "compulsory")][1].append(y)
            kinds.add("compulsory")
        xs.append(xd)
        ys.append(y)
    for v, segs in joins.items():
        # one path with gaps (nan) rather than a collection: Agg draws it in one call
        jx = [x for (x0, _), (x1, _) in segs for x in (x0, x1, math.nan)]
        jy = [y for (_, y0), (_, y1) in segs for y in (y0, y1, math.nan)]
        ax.plot(jx, jy, color=res.style(v)[0], lw=0.6, alpha=0.35, zorder=2, gid=f"join-{v}")
    for (v, kind), (px, py) in pts.items():
        colour, marker = res.style(v)
        if kind == "dram":
            ax.plot(px, py, marker=marker, ms=6, color=colour, mec="black", mew=0.4,
                    ls="none", zorder=4, gid=f"point-dram-{v}")
        elif kind == "l2":
            ax.plot(px, py, marker=marker, ms=6, mfc="white", color=colour, mew=1.2,
                    ls="none", zorder=3, gid=f"point-l2-{v}")
        else:
            ax.plot(px, py, marker=marker, ms=6, color=colour, fillstyle="left", mfc=colour,
                    mfcalt="white", mec=colour, mew=1.0, ls="none", zorder=4,
                    gid=f"point-compulsory-{v}")

    # Roofs of this panel's precision: (label, bandwidth, ceiling, colour, style, gid suffix).
    measured = roofs.measured
    peak = roofs.tensor[prec]
    diagonals = [("DRAM", roofs.dram, peak, ROOF_COLOUR, "-" if measured else "--")]
    if roofs.l2 > 0 and "l2" in kinds:
        diagonals.append(("L2", roofs.l2, peak, L2_ROOF_COLOUR, "-"))
    sheet_peak = roofs.datasheet_tensor.get(prec, 0.0) if measured else 0.0
    if measured and roofs.datasheet_dram > 0:
        diagonals.append(("DRAM datasheet", roofs.datasheet_dram, sheet_peak or peak,
                          SHEET_COLOUR, "--"))
    ridges = [c / b for _, b, c, _, _ in diagonals]
    top = max(peak, sheet_peak)
    xmin = min(min(xs), *ridges) / 4
    xmax = max(max(xs), *ridges) * 4
    ymin = min(min(ys), xmin * min(b for _, b, _, _, _ in diagonals) / 1e12) / 2
    ymax = top / 1e12 * 2.2
    ax.set_xlim(xmin, xmax)
    ax.set_ylim(ymin, ymax)

    labels = []
    for label, bw, ceiling, colour, ls in diagonals:
        ridge = ceiling / bw
        thick = 1.6 if ls == "-" else 1.1
        line, = ax.plot([xmin, ridge], [xmin * bw / 1e12, ceiling / 1e12], color=colour, ls=ls,
                        lw=thick, zorder=1, gid=f"roof-bw-{label}")
        ax.plot([ridge], [ceiling / 1e12], marker="o", ms=5, mfc="white", mec=colour, mew=1.2,
                ls="none", zorder=5, gid=f"ridge-{label}")
        kind = " (measured)" if measured and "datasheet" not in label else ""
        if not measured:
            kind = " (datasheet)"
        labels.append((line, f"{label} {bw / 1e12:.2f} TB/s{kind}", colour, "diag", label))
    # flat roofs start at their ridge points: the leftmost ridge of their ceiling
    flat = [(peak, ROOF_COLOUR, "-" if measured else "--", f"roof-peak-{prec}",
             f"{prec} tensor {peak / 1e12:.0f} TFLOP/s ({'measured' if measured else 'datasheet'})")]
    if sheet_peak > 0:
        flat.append((sheet_peak, SHEET_COLOUR, "--", f"roof-sheet-{prec}",
                     f"{prec} datasheet {sheet_peak / 1e12:.0f} TFLOP/s"))
    for ceiling, colour, ls, gid, text in flat:
        start = min(c / b for _, b, c, _, _ in diagonals if c == ceiling)
        line, = ax.plot([start, xmax], [ceiling / 1e12] * 2, color=colour, ls=ls,
                        lw=1.6 if ls == "-" else 1.1, zorder=1, gid=gid)
        labels.append((line, text, colour, "flat", gid))

    ax.set_xlabel("arithmetic intensity [FLOP/byte]")
    ax.set_ylabel("attained performance [TFLOP/s]")
    ax.yaxis.set_major_formatter(FuncFormatter(_tflops_formatter))
    ax.xaxis.set_major_formatter(FuncFormatter(_tflops_formatter))
    for axis in (ax.xaxis, ax.yaxis):  # minor grid at 2 and 5 per decade, unlabelled: each
        axis.set_minor_locator(LogLocator(subs=(2.0, 5.0)))  # tick costs layout time
        axis.set_minor_formatter(NullFormatter())
    ax.grid(True, which="major")
    ax.grid(True, which="minor", color="#f0f0f0", lw=0.4)

    return kinds, labels


def _roof_labels(ax, labels: list) -> None:
    """Labels above the markers (zorder, white box) so none hides: flat roofs at their right
    end, bandwidth lines near their left end along the line, rotated to the on-screen slope."""
    n_diag = 0
    for line, text, colour, kind, key in labels:
        xd, yd = line.get_data()
        if kind == "flat":
            ax.annotate(text, xy=(xd[-1], yd[-1]), xytext=(-3, 3), textcoords="offset points",
                        ha="right", va="bottom", fontsize=8, color=colour, zorder=6,
                        bbox=LABEL_BOX, gid=f"label-{key}")
            continue
        p0 = ax.transData.transform((xd[0], yd[0]))
        p1 = ax.transData.transform((xd[1], yd[1]))
        angle = math.degrees(math.atan2(p1[1] - p0[1], p1[0] - p0[0]))
        xa = xd[0] * (xd[1] / xd[0]) ** (0.06 + 0.22 * n_diag)
        ya = xa * (yd[1] / xd[1])
        n_diag += 1
        ax.annotate(text, xy=(xa, ya), xytext=(0, 3), textcoords="offset points",
                    rotation=angle, rotation_mode="anchor", ha="left", va="bottom", fontsize=8,
                    color=colour, zorder=6, bbox=LABEL_BOX, gid=f"label-{key}")


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
    rows = _square_in_n(rows, plot)
    if not rows:
        plot.skipped = f"no rows of {device} whose K/V length is N: nothing to draw against N"
        return plot
    causal = not any(not r["causal"] for r in rows)
    rows = [r for r in rows if r["causal"] == causal]
    ns = sorted({r["N"] for r in rows})
    if len(ns) < 2:
        plot.skipped = f"one sequence length only (N={ns[0]}): nothing to scale"
        return plot
    measured = [r for r in rows if (r.get("measured") or {}).get("dram_bytes", 0) > 0]
    has_l2 = any((r.get("measured") or {}).get("l2_bytes", 0) > 0 for r in rows)
    law = any(has_budget(r) for r in rows)
    levels = [("DRAM", "dram_bytes")] + ([("L2↔SM", "l2_bytes")] if has_l2 else [])
    ds = _panels_by_d(rows)
    fig = _figure(4.6 * len(levels) + 1.6, 2.9 * len(ds) + 1.6)
    axes = fig.subplots(len(ds), len(levels), squeeze=False, sharex=True)
    variants = list(dict.fromkeys(r["label"] for r in rows))
    offset = _offsets(variants)
    for i, (d, h_kv) in enumerate(ds):
        drows = [r for r in rows if (r["d"], kv_class(r)[0]) == (d, h_kv)]
        by_variant: dict[str, list[dict]] = {}
        for r in drows:
            by_variant.setdefault(r["label"], []).append(r)
        for j, (level, key) in enumerate(levels):
            ax = axes[i][j]
            ax.set_yscale("log")
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
                vrows = sorted(by_variant.get(v, []), key=lambda r: r["N"])
                if not vrows:
                    continue
                colour, marker = res.style(v)
                peer = v in res.peers
                mx = [r["N"] for r in vrows]
                my = [(r["model"]["bytes_read"] + r["model"]["bytes_written"]) / (r["B"] * r["H"])
                      for r in vrows]
                # peers dashed over our solid lines: a peer with our model stays visible
                ax.plot(mx, my, color=colour, lw=1.2, alpha=0.85, zorder=3,
                        ls=(0, (4, 2)) if peer else "-", gid=f"model-{v}")
                values += my
                if level == "DRAM" and has_budget(vrows[0]):
                    ly = [r["model"]["bytes_asymptotic"] / (r["B"] * r["H"]) for r in vrows]
                    ax.plot(mx, ly, color=colour, lw=0.9, ls="-.", alpha=0.7, zorder=2,
                            gid=f"law-{v}")
                    values += ly
                pts = [(r["N"] * offset[v], r["measured"][key] / (r["B"] * r["H"])) for r in vrows
                       if (r.get("measured") or {}).get(key, 0) > 0]
                values += [p[1] for p in pts]
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
            ax.set_title(f"{level} traffic, {_panel_title(d, h_kv)}", loc="left")
            if not measured:
                ax.text(0.98, 0.04, "no hardware counters in these results:\nIO model only",
                        transform=ax.transAxes, ha="right", va="bottom", fontsize=8,
                        color="#666666")
    # the series where the lines are not (top left: bytes grow with N), the laws below
    axes[0][0].legend(handles=_variant_handles(res, variants, marker=bool(measured)),
                      loc="upper left", fontsize=7.5, framealpha=0.9)
    fig.legend(handles=_law_handles(res, rows, variants, law, fig), loc="outside lower center",
               ncol=1, frameon=False)
    what = "causal" if causal else "non-causal"
    if measured:
        head = f"IO scaling ({what}): markers measured (CUPTI), lines the IO model"
    else:
        head = f"IO scaling ({what}): the IO model only (no hardware counters)"
    _title(fig, head, rows, device)
    plot.figure = fig
    if not measured:
        plot.notes.append("No hardware counters in these results: the panels show the IO model "
                          "and the compulsory floor only.")
    elif len(variants) > 1:
        plot.notes.append("Measured markers are nudged sideways per variant so that coinciding "
                          "ones stay visible; lines sit at the true N.")
    if not law:
        plot.notes.append("The paper's law 8·N²·d²·e/M is not drawn: these files predate "
                          "model.onchip_budget_bytes.")
    return plot


def _variant_handles(res: Results, variants: list[str], marker: bool = True) -> list:
    """One legend entry per series: its colour, marker and line (peers dashed)."""
    return [Line2D([], [], color=res.style(v)[0], marker=res.style(v)[1] if marker else None,
                   ls=(0, (4, 2)) if v in res.peers else "-", mec="black", mew=0.4, ms=6,
                   lw=1.2, label=res.label(v)) for v in variants]


def _law_handles(res: Results, rows: list[dict], variants: list[str], law: bool,
                 fig: Figure, share: float = 1.0) -> list:
    """What each line is, each law said once with the series that follow it: "IO model of
    fa2, fa3, cudnn (peer): the tile model, K/V re-read N/Br times ∝ N²d/Br"."""
    by_law: dict[str, list[str]] = {}
    for v in variants:
        alg = next(r["algorithm"] for r in rows if r["label"] == v)
        by_law.setdefault(MODEL_LAW.get(alg, "IO model"), []).append(res.label(v))
    width = (fig.get_size_inches()[0] - 0.8) * share
    handles = [Line2D([], [], color="#555555", lw=1.2,
                      label=_wrap(f"IO model of {', '.join(names)}: {text}", width, 8))
               for text, names in by_law.items()]
    if law:
        handles.append(Line2D([], [], color="#555555", ls="-.", lw=0.9, label=SEED_LAW))
    handles.append(Line2D([], [], color="black", ls=":", lw=1.3,
                          label="compulsory: Q, K, V read once, O written once"))
    handles.append(Patch(facecolor="#ececec", label="below the compulsory minimum"))
    return handles


# ---------------------------------------------------------------------------------------------
# 3. Block size


def _bwd(r: dict) -> str:
    return " bwd" if r.get("direction") == "backward" else ""


def _n_words(r: dict) -> str:
    """"N=4096" in a line's label; "N=1 (N_kv 4096)", "N=4096 (H_kv 8)" for the other shapes."""
    note = kv_note(r)
    return f"N={r['N']}" + (f" ({note})" if note else "")


def _tile_label(t: dict) -> str:
    return f"{t['block_q']}×{t['block_kv']}"


@_styled
def plot_block_size(res: Results, device: str, name: str = "block-size") -> Plot:
    plot = Plot(name, "Block size: traffic and runtime against tile shape (fa1, fa2)")
    groups: dict[tuple, list[dict]] = {}
    for r in res.ok(device):
        if r["peer"] or r["algorithm"] not in ("fa1", "fa2") or r["tiles"]["block_q"] <= 0:
            continue
        # one line per family (variant, direction, options) and the rest of its configuration
        key = (r["algorithm"], r["block_order"], r["dtype"], r["d"], r["causal"], r["N"], r["B"],
               r["H"], r["run_index"], r["family"], r["config_rest"], r["H_kv"], r["N_kv"],
               *kv_cache_key(r))
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
        line = (alg, order, d, key[9], key[10])
        best = chosen.get(line)
        if best is None or (not causal, n) > (not best[4], best[5]):
            chosen[line] = key
    keys = sorted(chosen.values(), key=lambda k: (k[0], k[3], k[9], str(k[10])))
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
        name = g[0]["base"]  # the variant (fa-bench/1: its name without tiles)
        colour, marker = res.style(name)
        x = [pos[(r["tiles"]["block_q"], r["tiles"]["block_kv"])] for r in g]
        label = f"{name}{_bwd(g[0])} d={d} {_n_words(g[0])}{' causal' if causal else ''}"
        if order:
            label += f" ({order})"
        ls = d_style[d]
        meas = [(xi, r["measured"]) for xi, r in zip(x, g)
                if (r.get("measured") or {}).get("dram_bytes", 0) > 0]
        model = [r["model"]["bytes_read"] + r["model"]["bytes_written"] for r in g]
        axes[0].plot(x, model, color=colour, ls=ls, lw=1.0, alpha=0.6, marker=marker, mfc="white",
                     ms=5, gid=f"model-{name}-{d}")
        if meas:
            axes[0].plot([m[0] for m in meas], [m[1]["dram_bytes"] for m in meas], color=colour,
                         ls=ls, marker=marker, ms=6, mec="black", mew=0.4, gid=f"dram-{name}-{d}")
            axes[1].plot([m[0] for m in meas], [m[1]["l2_bytes"] for m in meas], color=colour,
                         ls=ls, marker=marker, ms=6, mec="black", mew=0.4, gid=f"l2-{name}-{d}")
        axes[2].plot(x, [r["median_ms"] for r in g], color=colour, ls=ls, marker=marker, ms=6,
                     mec="black", mew=0.4, gid=f"time-{name}-{d}")
        handles.append(Line2D([], [], color=colour, ls=ls, marker=marker, mec="black", mew=0.4,
                              label=label))
    titles = ("HBM (DRAM) traffic", "L2↔SM traffic", "runtime (median)")
    ylabels = ("bytes", "bytes", "time [ms]")
    for ax, t, yl in zip(axes, titles, ylabels):
        ax.set_xticks(range(len(tiles)), [f"{a}×{b}" for a, b in tiles], rotation=30)
        ax.set_xlabel("tile Br×Bc [query rows × key rows]")
        ax.set_title(t, loc="left")
        ax.set_ylabel(yl)
        _value_axis(ax)
    for ax in axes[:2]:
        if ax.get_yscale() == "linear":
            ax.yaxis.set_major_formatter(EngFormatter(unit="B", places=1, sep=" "))
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


def _value_axis(ax, decades: float = 10.0) -> None:
    """Log y when the panel's values span more than ``decades`` (fa2's 0.3 GB beside fa1's
    87 GB would sit on zero on a linear axis); else linear from 0, as in the FlashAttention
    paper's figure."""
    ys = [y for ln in ax.get_lines() for y in ln.get_ydata() if y > 0]
    if ys and max(ys) / min(ys) > decades:
        ax.set_yscale("log")
        ax.set_ylim(min(ys) / 1.6, max(ys) * 1.6)
    else:
        ax.set_ylim(bottom=0)


# ---------------------------------------------------------------------------------------------
# 4. Throughput


MARKED_POINTS = 40  # a line with more points (a sweep over N) is drawn without markers


def _lines_against_n(res: Results, rows: list[dict], value, gid: str, causal_key_always: bool):
    """One panel per head dimension (and K/V head count, where it differs from H), a line per
    variant and mask of value(row) against N (causal dashed with open markers), and the legend:
    the figure and its panels, for the caller's axes labels, limits and title. ``rows``: rows
    whose K/V length is N (:func:`_square_in_n`)."""
    ds = _panels_by_d(rows)
    ns = sorted({r["N"] for r in rows})
    fig = _figure(4.2 * len(ds) + 1.8, 4.0)
    axes = fig.subplots(1, len(ds), squeeze=False, sharey=True)[0]
    variants = list(dict.fromkeys(r["label"] for r in rows))
    for ax, (d, h_kv) in zip(axes, ds):
        for v in variants:
            colour, marker = res.style(v)
            for causal in (False, True):
                pts = sorted((r["N"], value(r)) for r in rows
                             if r["label"] == v and r["d"] == d and r["causal"] == causal
                             and kv_class(r)[0] == h_kv)
                if not pts:
                    continue
                ax.plot([p[0] for p in pts], [p[1] for p in pts], color=colour,
                        marker=marker if len(pts) <= MARKED_POINTS else None,
                        ls="--" if causal else "-", ms=5, mec=colour if causal else "black",
                        mew=1.0 if causal else 0.4, mfc="white" if causal else colour, lw=1.3,
                        gid=f"{gid}-{v}-{'causal' if causal else 'full'}")
        _n_axis(ax, ns)
        ax.set_title(_panel_title(d, h_kv), loc="left")
    handles = [Line2D([], [], color=res.style(v)[0], marker=res.style(v)[1], mec="black",
                      mew=0.4, label=res.label(v)) for v in variants]
    if causal_key_always:
        handles.append(Line2D([], [], color="#555555", ls="-", label="non-causal"))
    if causal_key_always or any(r["causal"] for r in rows):
        handles.append(Line2D([], [], color="#555555", ls="--", marker="o", mfc="white",
                              mew=1.0, label="causal (open markers)"))
    axes[-1].legend(handles=handles, loc="upper left", bbox_to_anchor=(1.02, 1.0), frameon=False)
    return fig, axes


@_styled
def plot_throughput(res: Results, device: str, name: str = "throughput") -> Plot:
    plot = Plot(name, "Throughput against N, one panel per head dimension")
    rows = default_rows(res.ok(device))
    rows = [r for r in rows if r.get("tflops_convention")]
    if not rows:
        plot.skipped = f"no timed rows (status ok) for {device}"
        return plot
    rows = _square_in_n(rows, plot)
    if not rows:
        plot.skipped = f"no timed rows of {device} whose K/V length is N"
        return plot
    fig, axes = _lines_against_n(res, rows, lambda r: r["tflops_convention"], "tput", True)
    axes[0].set_ylim(0, max(r["tflops_convention"] for r in rows) * 1.08)
    axes[0].set_ylabel("throughput [TFLOP/s]\n(4·B·H·N²·d per second, halved for causal)")
    _title(fig, "Throughput against sequence length", rows, device)
    plot.figure = fig
    return plot


# ---------------------------------------------------------------------------------------------
# 5. FP8 accuracy


FP8_GROUPS_PER_PANEL = 8  # configurations side by side in one panel; more wrap to a new row
FP8_MAX_PANELS = 4  # panels in one figure; a larger sweep is summarised, not drawn per shape


def _stats(values: list[float]) -> tuple[float, float, float]:
    """(median, min, max) of a bar's values."""
    v = sorted(values)
    mid = len(v) // 2
    median = v[mid] if len(v) % 2 else 0.5 * (v[mid - 1] + v[mid])
    return median, v[0], v[-1]


@_styled
def plot_fp8_accuracy(res: Results, device: str, name: str = "fp8-accuracy") -> Plot:
    plot = Plot(name, "FP8 accuracy: RMSE against the fp64 reference, per input distribution")
    rows = [r for r in default_rows(res.rows) if r["device_name"] == device
            and (r.get("verification") or {}).get("rmse") is not None]
    fp8 = [r for r in rows if r["algorithm"] == "fp8"]
    if not fp8:
        plot.skipped = f"no verified fp8 rows for {device}"
        return plot
    inputs = sorted({r["inputs"] for r in rows}, key=lambda s: (s != "normal", s))
    # Compare like with like: the configurations every distribution has (with an fp8 row);
    # failing that, each distribution's own.
    def shape(r: dict) -> tuple:
        return (r["d"], r["causal"], r["N"], kv_class(r))

    per_dist = [{shape(r) for r in fp8 if r["inputs"] == i} for i in inputs]
    common = set.intersection(*per_dist)
    if common:
        rows = [r for r in rows if shape(r) in common]
    else:
        plot.notes.append("The input distributions share no configuration: each panel shows "
                          "its own.")
    # A sweep (more configurations than FP8_MAX_PANELS panels hold) is summarised per (d,
    # mask): each bar the median over its N, a whisker from the smallest to the largest.
    most = max(len({shape(r) for r in rows if r["inputs"] == i}) for i in inputs)
    binned = len(inputs) * math.ceil(most / FP8_GROUPS_PER_PANEL) > FP8_MAX_PANELS
    notes = {kv_class(r): kv_note(r) for r in rows}  # grouped-query, non-square: said in a tick

    def group(r: dict) -> tuple:
        return ((r["d"], r["causal"], kv_class(r)) if binned
                else (r["d"], r["causal"], kv_class(r), r["N"]))

    # cells: (distribution, group, series) -> the values of its bar
    cell: dict[tuple, list[float]] = {}
    tolerance: dict[tuple, list[float]] = {}
    ns: dict[tuple, set[int]] = {}
    seen: set[tuple] = set()
    for r in rows:
        key = (r["inputs"], *shape(r), r["label"])
        if key in seen:
            continue
        seen.add(key)
        ver = r["verification"]
        g = (r["inputs"], group(r))
        ns.setdefault(g, set()).add(r["N"])
        if ver.get("rmse"):
            cell.setdefault((*g, r["label"]), []).append(ver["rmse"])
        plain = (r["inputs"], *shape(r), "plain FP8")
        if r["algorithm"] == "fp8" and not r["peer"] and plain not in seen:
            seen.add(plain)  # the first fp8 row of a configuration gives its baseline
            if ver.get("baseline_rmse"):
                cell.setdefault((*g, "plain FP8"), []).append(ver["baseline_rmse"])
            if ver.get("metric") == "rmse" and ver.get("tolerance"):
                tolerance.setdefault(g, []).append(ver["tolerance"])
    # Rows that carry no RMSE (e.g. peers checked by max error only) have no bar to draw.
    variants = list(dict.fromkeys(r["label"] for r in rows if r["verification"].get("rmse")))
    panels = []  # (distribution, groups): at most FP8_GROUPS_PER_PANEL each
    for dist in inputs:
        groups = sorted({group(r) for r in rows if r["inputs"] == dist})
        for k in range(0, len(groups), FP8_GROUPS_PER_PANEL):
            panels.append((dist, groups[k:k + FP8_GROUPS_PER_PANEL]))
    if len(panels) > FP8_MAX_PANELS:
        plot.notes.append(f"{len(panels) - FP8_MAX_PANELS} further panels of configurations "
                          "are not drawn (the tables hold every row).")
        panels = panels[:FP8_MAX_PANELS]
    widest = max(len(c) for _, c in panels)
    fig = _figure(max(5.5, 0.95 * widest + 3.4), 2.9 * len(panels) + 1.0)
    axes = fig.subplots(len(panels), 1, squeeze=False, sharey=True)[:, 0]
    for ax, (dist, groups) in zip(axes, panels):
        present = [v for v in variants if any((dist, g, v) in cell for g in groups)]
        series = [*present, "plain FP8"]
        width = 0.8 / len(series)
        for si, v in enumerate(series):
            xs, ys, lo, hi = [], [], [], []
            for gi, g in enumerate(groups):
                values = cell.get((dist, g, v))
                if not values:
                    continue
                median, low, high = _stats(values)
                xs.append(gi + (si - (len(series) - 1) / 2) * width)
                ys.append(median)
                lo.append(median - low)
                hi.append(high - median)
            err = {"yerr": [lo, hi], "error_kw": {"lw": 0.8, "capsize": 2}} if binned else {}
            if v == "plain FP8":
                ax.bar(xs, ys, width, color="white", edgecolor=res.style("fp8")[0], hatch="////",
                       lw=0.8, gid="bars-plain-fp8", **err)
            else:
                ax.bar(xs, ys, width, color=res.style(v)[0], edgecolor="black", lw=0.4,
                       gid=f"bars-{v}", **err)
        # fp8 tolerance: a tick over each group (the largest of a summarised group's)
        tol = [(gi, max(tolerance[(dist, g)])) for gi, g in enumerate(groups)
               if (dist, g) in tolerance]
        if tol:
            ax.hlines([t for _, t in tol], [c - 0.45 for c, _ in tol], [c + 0.45 for c, _ in tol],
                      colors="black", linestyles="--", lw=1.0, gid="fp8-tolerance")
        ax.set_yscale("log")
        n_values = sorted({n for g in groups for n in ns.get((dist, g), ())})
        one_n = len(n_values) == 1

        def tick(g: tuple) -> str:
            text = f"d={g[0]}\n{'causal' if g[1] else 'non-causal'}"
            if notes[g[2]]:
                text += f"\n{notes[g[2]]}"
            if binned:
                n = sorted(ns[(dist, g)])
                return text + (f"\nN={n[0]}–{n[-1]}\n({len(n)} sizes)" if len(n) > 1
                               else f"\nN={n[0]}")
            return text + ("" if one_n else f"\nN={g[3]}")

        ax.set_xticks(range(len(groups)), [tick(g) for g in groups])
        ax.set_title(f"inputs: {dist}" + (f", N = {n_values[0]}" if one_n else ""), loc="left")
        ax.set_xlim(-0.6, widest - 0.4)  # a short last row keeps the bar width
        ax.set_ylabel("RMSE against the\nfp64 reference")
    handles = [Patch(facecolor=res.style(v)[0], edgecolor="black", lw=0.4, label=res.label(v))
               for v in variants]
    handles.append(Patch(facecolor="white", edgecolor=res.style("fp8")[0], hatch="////",
                         label="plain FP8 (per-head scales)"))
    handles.append(Line2D([], [], color="black", ls="--", label="fp8 tolerance"))
    if binned:
        handles.append(Line2D([], [], color="black", lw=0.8, marker="_", ms=6,
                              label="range over N (bar: median)"))
        plot.notes.append("Each bar is the median RMSE over the sequence lengths of its "
                          "(d, mask); the whisker spans the smallest to the largest.")
    fig.legend(handles=handles, loc="outside right center", frameon=False)
    _title(fig, "FP8 accuracy: RMSE per input distribution, against the bf16 variants", rows,
           device)
    plot.figure = fig
    return plot


# ---------------------------------------------------------------------------------------------
# 6, 7. Which law holds: bytes against d at fixed N, and against the tile size


def _slope(points: list[tuple[float, float]]) -> float | None:
    """Exponent k of y ∝ x^k between the smallest and the largest x (means per x)."""
    by_x: dict[float, list[float]] = {}
    for x, y in points:
        if x > 0 and y > 0:
            by_x.setdefault(x, []).append(y)
    if len(by_x) < 2:
        return None
    lo, hi = min(by_x), max(by_x)
    y0 = sum(by_x[lo]) / len(by_x[lo])
    y1 = sum(by_x[hi]) / len(by_x[hi])
    return math.log(y1 / y0) / math.log(hi / lo)


def _pow2_axis(ax, values: list[int], label: str) -> None:
    ax.set_xscale("log", base=2)
    values = sorted(set(values))
    ax.xaxis.set_major_locator(FixedLocator(_ticks(values)))
    ax.xaxis.set_minor_locator(NullLocator())
    ax.xaxis.set_major_formatter(FuncFormatter(lambda x, _: f"{int(round(x)):d}"))
    ax.set_xlim(values[0] / 1.3, values[-1] * 1.3)
    ax.set_xlabel(label)


def _model_bytes(r: dict) -> float:
    return (r["model"]["bytes_read"] + r["model"]["bytes_written"]) / (r["B"] * r["H"])


@_styled
def plot_bytes_vs_d(res: Results, device: str, name: str = "bytes-vs-d") -> Plot:
    """Model bytes per (batch·head) against d at one N (log-log), with guides of slope 1 and 2:
    with fixed tiles the FlashAttention lines grow ∝ d, the paper's law (Br = M/(4d)) ∝ d²."""
    plot = Plot(name, "Bytes against the head dimension d at fixed N: which law holds")
    rows = [r for r in default_rows(res.rows) if r["device_name"] == device
            and r["status"] in ("ok", "model_only") and _model_bytes(r) > 0]
    if not rows:
        plot.skipped = f"no rows with an IO model for {device}"
        return plot
    causal = not any(not r["causal"] for r in rows)
    rows = [r for r in rows if r["causal"] == causal]
    # one shape of K/V: square multi-head rows when there are any, else the commonest kind
    classes = [kv_class(r) for r in rows]
    kind = SQUARE if SQUARE in classes else max(set(classes), key=classes.count)
    if len(set(classes)) > 1:
        plot.notes.append(f"{sum(c != kind for c in classes)} row(s) of other K/V shapes "
                          "(H_kv ≠ H, N_kv ≠ N, a paged cache or lengths apart) are left out.")
    rows = [r for r, c in zip(rows, classes) if c == kind]
    by_n: dict[int, set[int]] = {}
    for r in rows:
        by_n.setdefault(r["N"], set()).add(r["d"])
    ns = [n for n, ds in by_n.items() if len(ds) >= 2]
    if not ns:
        plot.skipped = ("needs rows at two or more head dimensions d at one N (e.g. fa-bench "
                        "--N 4096 --d 64,128 --model-only)")
        return plot
    n = max(ns)
    rows = [r for r in rows if r["N"] == n]
    ds = sorted({r["d"] for r in rows})
    fig = _figure(8.2, 5.0)
    ax = fig.subplots()
    ax.set_yscale("log")
    variants = list(dict.fromkeys(r["label"] for r in rows))
    offset = _offsets(variants, 0.04)
    values: list[float] = []
    law = False
    for v in variants:
        vrows = sorted((r for r in rows if r["label"] == v), key=lambda r: r["d"])
        colour, marker = res.style(v)
        alg = vrows[0]["algorithm"]
        x = [r["d"] for r in vrows]
        y = [_model_bytes(r) for r in vrows]
        values += y
        ax.plot(x, y, color=colour, marker=marker, mfc="white", ms=5, lw=1.2,
                ls=(0, (4, 2)) if v in res.peers else "-", zorder=3, gid=f"model-{v}")
        k = _slope(list(zip(x, y)))
        text = f"{res.label(v)}: model" + (f" ∝ d^{k:.2f}" if k is not None else "")
        if all(has_budget(r) for r in vrows) and alg != "standard":
            ly = [r["model"]["bytes_asymptotic"] / (r["B"] * r["H"]) for r in vrows]
            ax.plot(x, ly, color=colour, lw=0.9, ls="-.", zorder=2, gid=f"law-{v}")
            values += ly
            law = True
            kl = _slope(list(zip(x, ly)))
            text += "; law" + (f" ∝ d^{kl:.2f}" if kl is not None else "")
        meas = [(r["d"] * offset[v], r["measured"]["dram_bytes"] / (r["B"] * r["H"]))
                for r in vrows if (r.get("measured") or {}).get("dram_bytes", 0) > 0]
        if meas:
            ax.plot([p[0] for p in meas], [p[1] for p in meas], color=colour, marker=marker,
                    ms=6, mec="black", mew=0.4, ls="none", zorder=4, gid=f"dram-{v}")
            values += [p[1] for p in meas]
        plot.notes.append(text + ".")
    # slope guides through the geometric middle of the values at the smallest d
    y0 = math.sqrt(min(values) * max(values))
    d0, d1 = ds[0], ds[-1]
    for k, style, gid, text in ((1, (0, (1, 2)), "guide-d1", "∝ d"),
                                (2, (0, (6, 2, 1, 2)), "guide-d2", "∝ d²")):
        ax.plot([d0, d1], [y0, y0 * (d1 / d0) ** k], color="#555555", ls=style, lw=1.0, zorder=1,
                gid=gid)
        ax.annotate(text, xy=(d1, y0 * (d1 / d0) ** k), xytext=(4, 0), textcoords="offset points",
                    va="center", fontsize=8, color="#555555")
        values.append(y0 * (d1 / d0) ** k)
    ax.set_ylim(min(values) / 2, max(values) * 2)
    _pow2_axis(ax, ds, "head dimension d")
    ax.yaxis.set_major_formatter(EngFormatter(unit="B", places=0, sep=" "))
    ax.set_ylabel("bytes per (batch·head), IO model")
    laws = [h for h in _law_handles(res, rows, variants, law, fig, 0.55)
            if not isinstance(h, Patch) and "compulsory" not in h.get_label()]
    laws.append(Line2D([], [], color="#555555", marker="o", ms=6, mec="black", mew=0.4,
                       ls="none", label="measured DRAM bytes"))
    series = _variant_handles(res, variants)
    rows_ = max(len(series), len(laws))  # series in the first column, the laws in the second
    blank = Line2D([], [], color="none", label=" ")
    fig.legend(handles=series + [blank] * (rows_ - len(series)) + laws
               + [blank] * (rows_ - len(laws)), loc="outside lower center", ncol=2,
               frameon=False)
    what = "causal" if causal else "non-causal"
    if kv_note(rows[0]):
        what += f", {kv_note(rows[0])}"
    _title(fig, f"Bytes against d at N = {n} ({what}): tile model ∝ d, the paper's law ∝ d²",
           rows, device)
    if not law:
        plot.notes.append("The paper's law is not drawn: these files predate "
                          "model.onchip_budget_bytes.")
    plot.figure = fig
    return plot


TILE_AXIS = {"fa1": ("block_kv", "Bc"), "fa2": ("block_q", "Br"), "fp8": ("block_q", "Br")}


@_styled
def plot_bytes_vs_tile(res: Results, device: str, name: str = "bytes-vs-tile") -> Plot:
    """Bytes per (batch·head) against the tile size whose inverse sets the re-reads (Br for
    fa2/fp8: K/V read N/Br times; Bc for fa1: Q and the state read N/Bc times), log-log:
    the IO model, measured DRAM and SM↔L2 bytes, a ∝ 1/tile guide, the compulsory floor and,
    where the files carry the budget M, the paper's law and its tile Br = M/(4d)."""
    plot = Plot(name, "Bytes against the tile size: which law holds")
    groups: dict[tuple, list[dict]] = {}
    for r in res.rows:
        if (r["device_name"] != device or r["peer"] or r["algorithm"] not in TILE_AXIS
                or r["status"] not in ("ok", "model_only") or r["tiles"]["block_q"] <= 0):
            continue
        key = (r["algorithm"], r["d"], r["causal"], r["N"], r["B"], r["H"], r["block_order"],
               r["run_index"], r["family"], r["config_rest"], r["H_kv"], r["N_kv"],
               *kv_cache_key(r))
        groups.setdefault(key, []).append(r)
    groups = {k: g for k, g in groups.items()
              if len({r["tiles"][TILE_AXIS[k[0]][0]] for r in g}) >= 2}
    if not groups:
        plot.skipped = ("needs fa1/fa2/fp8 rows at two or more tile sizes of one configuration "
                        "(fa-bench --block-q 64,128 --block-kv 32,64,128)")
        return plot
    chosen: dict[tuple, tuple] = {}
    for key in groups:
        alg, d, causal, n = key[:4]
        line = (alg, d, key[8], key[9])
        best = chosen.get(line)
        if best is None or (not causal, n) > (not best[2], best[3]):
            chosen[line] = key
    families = sorted({"fa1" if k[0] == "fa1" else "fa2" for k in chosen.values()})
    fig = _figure(5.2 * len(families) + 0.6, 4.8)
    axes = dict(zip(families, fig.subplots(1, len(families), squeeze=False)[0]))
    handles = []
    dash = ["-", "--", "-.", ":"]
    d_style = {d: dash[i % 4] for i, d in enumerate(sorted({k[1] for k in chosen.values()}))}
    law = False
    for key in sorted(chosen.values(), key=lambda k: (k[:8], k[8], str(k[9]))):
        alg, d, causal, n = key[:4]
        field, sym = TILE_AXIS[alg]
        ax = axes["fa1" if alg == "fa1" else "fa2"]
        g = sorted(groups[key], key=lambda r: (r["tiles"][field], r["tiles"]["block_q"],
                                              r["tiles"]["block_kv"]))
        name = g[0]["base"]
        colour, marker = res.style(name)
        ls = d_style[d]
        x = [r["tiles"][field] for r in g]
        model = [_model_bytes(r) for r in g]
        ax.plot(x, model, color=colour, ls=ls, lw=1.0, marker=marker, mfc="white", ms=5,
                zorder=3, gid=f"model-{name}-{d}")
        parts = [f"model ∝ {sym}^{_slope(list(zip(x, model))):.2f}"]
        for level, mkey, style in (("DRAM", "dram_bytes", {"mec": "black", "mew": 0.4, "ms": 6}),
                                   ("L2↔SM", "l2_bytes", {"mfc": "none", "mew": 1.6, "ms": 9})):
            pts = [(xi, r["measured"][mkey] / (r["B"] * r["H"])) for xi, r in zip(x, g)
                   if (r.get("measured") or {}).get(mkey, 0) > 0]
            if pts:
                ax.plot([p[0] for p in pts], [p[1] for p in pts], color=colour, marker=marker,
                        ls="none", zorder=4, gid=f"{mkey.split('_')[0]}-{name}-{d}", **style)
                k = _slope(pts)
                if k is not None:
                    parts.append(f"measured {level} ∝ {sym}^{k:.2f}")
        # ∝ 1/tile guide from 1.5× the model's point at the smallest tile (beside the model
        # line, not on it); the compulsory floor
        x0, x1 = min(x), max(x)
        y0 = 1.5 * max(m for xi, m in zip(x, model) if xi == x0)
        ax.plot([x0, x1], [y0, y0 * x0 / x1], color="#555555", ls=(0, (1, 2)), lw=1.0,
                zorder=2, gid=f"guide-{name}-{d}")
        floor = min(r["model"]["bytes_compulsory"] for r in g) / (g[0]["B"] * g[0]["H"])
        ax.plot([x0, x1], [floor, floor], color="black", ls=":", lw=1.3, zorder=2,
                gid=f"compulsory-{name}-{d}")
        budget = [r for r in g if has_budget(r)]
        if budget:
            law = True
            r0 = budget[0]
            ax.plot([x0, x1], [r0["model"]["bytes_asymptotic"] / (r0["B"] * r0["H"])] * 2,
                    color=colour, ls="-.", lw=0.9, zorder=2, gid=f"law-{name}-{d}")
            paper_br = r0["model"]["onchip_budget_bytes"] / (4 * d * _element_bytes(r0))
            if alg != "fa1":
                ax.axvline(paper_br, color=colour, ls=(0, (2, 3)), lw=0.8,
                           gid=f"paper-br-{name}-{d}")
                parts.append(f"the paper's tile Br = M/(4d) = {paper_br:.0f}")
        label = f"{name}{_bwd(g[0])} d={d} {_n_words(g[0])}{' causal' if causal else ''}"
        plot.notes.append(f"{label}: " + ", ".join(parts) + ".")
        handles.append(Line2D([], [], color=colour, ls=ls, marker=marker, mfc="white",
                              label=label))
    for fam, ax in axes.items():
        ax.set_yscale("log")
        sym = "Bc" if fam == "fa1" else "Br"
        tiles = sorted({r["tiles"][TILE_AXIS[k[0]][0]] for k in chosen.values()
                        if ("fa1" if k[0] == "fa1" else "fa2") == fam for r in groups[k]})
        what = ("fa1: Q and the O, ℓ, m state re-read N/Bc times" if fam == "fa1"
                else "fa2/fp8: K/V re-read N/Br times")
        _pow2_axis(ax, tiles, f"tile size {sym} [rows]")
        ax.set_title(what, loc="left")
        ax.yaxis.set_major_formatter(EngFormatter(unit="B", places=0, sep=" "))
        ax.set_ylabel("bytes per (batch·head)")
    handles += [
        Line2D([], [], color="#555555", marker="o", mfc="white", lw=1.0, label="IO model"),
        Line2D([], [], color="#555555", marker="o", mec="black", mew=0.4, ls="none",
               label="measured DRAM"),
        Line2D([], [], color="#555555", marker="o", mfc="none", mew=1.6, ms=9, ls="none",
               label="measured L2↔SM"),
        Line2D([], [], color="#555555", ls=(0, (1, 2)), label="slope ∝ 1/tile (the re-reads)"),
        Line2D([], [], color="black", ls=":", lw=1.3, label="compulsory"),
    ]
    if law:
        handles.append(Line2D([], [], color="#555555", ls="-.", lw=0.9, label=SEED_LAW))
    fig.legend(handles=handles, loc="outside lower center", ncol=3, frameon=False)
    rows = [r for k in chosen.values() for r in groups[k]]
    _title(fig, "Bytes against the tile size: the tile model's 1/tile against what the memory "
           "sees", rows, device)
    if not law:
        plot.notes.append("The paper's law is not drawn: these files predate "
                          "model.onchip_budget_bytes.")
    plot.figure = fig
    return plot


# ---------------------------------------------------------------------------------------------
# 6. Energy (docs/energy.md): rows whose energy window gave the counter's figure; the others are
# left out and counted in the plot's notes.


def energy_mj(r: dict) -> float | None:
    """The row's energy per launch in mJ (the counter's), None when it has none."""
    e = r.get("energy") or {}
    return e.get("energy_per_launch_mj") if e.get("status") == "ok" else None


def energy_bytes(r: dict) -> tuple[float, str]:
    """The DRAM bytes the energy model charged the row with, and their basis: the model's
    breakdown when the file has one, else the counters' bytes, else the IO model's."""
    m = (r.get("energy") or {}).get("model")
    if m and m.get("bytes"):
        return float(m["bytes"]), m["bytes_basis"]
    measured = r.get("measured") or {}
    if measured.get("dram_bytes"):
        return float(measured["dram_bytes"]), "counters"
    return float(r["model"]["bytes_read"] + r["model"]["bytes_written"]), "model"


def energy_fit(res: Results, device: str) -> dict | None:
    """The device's fitted energy model (status ok) from its newest file that has one."""
    runs = sorted((run for run in res.runs if run.device == device),
                  key=lambda run: run.doc.get("created_utc", ""), reverse=True)
    for run in runs:
        fit = (run.doc.get("ceilings") or {}).get("energy_model")
        if fit and fit.get("status") == "ok":
            return fit
    return None


def _energy_rows(res: Results, device: str, plot: Plot) -> list[dict]:
    """Timed default rows with energy; the plot's notes say how many were left out and why."""
    timed = default_rows(res.ok(device))
    rows = [r for r in timed if energy_mj(r)]
    reasons: dict[str, int] = {}
    for r in timed:
        if energy_mj(r):
            continue
        e = r.get("energy")
        why = f"{e['status']}: {e['reason']}" if e else "no energy in the file"
        reasons[why] = reasons.get(why, 0) + 1
    for why, n in sorted(reasons.items(), key=lambda kv: -kv[1]):
        plot.notes.append(f"{n} row(s) without energy left out ({why}).")
    return rows


@_styled
def plot_energy(res: Results, device: str, name: str = "energy") -> Plot:
    plot = Plot(name, "Energy per attention against N, one panel per head dimension")
    rows = _energy_rows(res, device, plot)
    if not rows:
        plot.skipped = f"no row with energy for {device}"
        return plot
    rows = _square_in_n(rows, plot)
    if not rows:
        plot.skipped = f"no row with energy of {device} whose K/V length is N"
        return plot
    fig, axes = _lines_against_n(res, rows, energy_mj, "energy", False)
    for ax in axes:
        ax.set_yscale("log")
    axes[0].set_ylabel("energy per launch [mJ]\n(NVML energy counter, launches back to back)")
    _title(fig, "Energy per attention against sequence length", rows, device)
    plot.figure = fig
    return plot


def energy_roof(fit: dict, prec: str, intensity: float, peak: float = 0.0,
                bandwidth: float = 0.0) -> float | None:
    """FLOPs per joule the fitted model allows at an arithmetic intensity (FLOP per DRAM byte):
    1 / (eps_flop + eps_byte / I), and with the constant power paid for the time roofline's
    time when peak and bandwidth are given: + P · max(1 / peak, 1 / (I · bandwidth)), P the
    constant power and what busy SMs and active DRAM add to it (busy_w, dram_active_w, absent in
    files before them)."""
    eps_flop = fit["eps_flop8_pj"] if prec == "fp8" else fit["eps_flop16_pj"]
    if eps_flop is None:
        return None
    joules = (eps_flop + fit["eps_byte_pj"] / intensity) * 1e-12
    if peak > 0 and bandwidth > 0:
        power = fit["idle_w"] + (fit.get("busy_w") or 0.0) + (fit.get("dram_active_w") or 0.0)
        joules += power * max(1.0 / peak, 1.0 / (intensity * bandwidth))
    return 1.0 / joules if joules > 0 else None


@_styled
def plot_energy_roofline(res: Results, device: str, name: str = "energy-roofline") -> Plot:
    plot = Plot(name, "Energy roofline: FLOPs per joule against arithmetic intensity")
    rows = _energy_rows(res, device, plot)
    fit = energy_fit(res, device)
    if not rows:
        plot.skipped = f"no row with energy for {device}"
        return plot
    if fit is None:
        plot.skipped = f"no fitted energy model for {device} (its files' ceilings have none)"
        return plot
    roofs = res.roofs(device)
    precs = sorted({"fp8" if precision(r) == "fp8" else "bf16/fp16" for r in rows},
                   key=lambda p: p == "fp8")
    fig = _figure(4.6 * len(precs) + 1.8, 4.2)
    axes = fig.subplots(1, len(precs), squeeze=False, sharey=True)[0]
    variants = list(dict.fromkeys(r["label"] for r in rows))
    for ax, prec in zip(axes, precs):
        mine = [r for r in rows if ("fp8" if precision(r) == "fp8" else "bf16/fp16") == prec]
        pts = [(r["model"]["flops_matrix"] / energy_bytes(r)[0],
                r["model"]["flops_matrix"] / (energy_mj(r) * 1e-3), r) for r in mine]
        lo = min(p[0] for p in pts) / 3
        hi = max(p[0] for p in pts) * 3
        xs = [lo * (hi / lo) ** (i / 199) for i in range(200)]
        key = "fp8" if prec == "fp8" else "bf16"
        arch = [energy_roof(fit, key, x) for x in xs]
        if all(a is not None for a in arch):
            ax.plot(xs, arch, color=ROOF_COLOUR, ls="--", lw=1.2,
                    label="FLOPs and bytes alone: 1 / (ε_flop + ε_byte / I)")
            if roofs is not None and roofs.dram > 0 and roofs.tensor.get(key, 0) > 0:
                full = [energy_roof(fit, key, x, roofs.tensor[key], roofs.dram) for x in xs]
                ax.plot(xs, full, color=ROOF_COLOUR, lw=1.6,
                        label="with constant power over the time roofline's time")
        for v in variants:
            colour, marker = res.style(v)
            vp = [(x, y) for x, y, r in pts if r["label"] == v]
            if vp:
                ax.scatter([p[0] for p in vp], [p[1] for p in vp], color=colour, marker=marker,
                           edgecolor="black", linewidth=0.4, s=26, zorder=3, label=res.label(v))
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("arithmetic intensity [matrix FLOP per DRAM byte]")
        eps = fit["eps_flop8_pj"] if key == "fp8" else fit["eps_flop16_pj"]
        inst = (f", ε_inst {fit['eps_inst_pj']:.3g} pJ" if fit.get("eps_inst_pj") is not None
                else "")
        busy = f" + {fit['busy_w']:.0f} W busy" if fit.get("busy_w") else ""
        ax.set_title(f"{prec}: ε_flop {eps:.3g} pJ{inst}, ε_byte {fit['eps_byte_pj']:.3g} pJ, "
                     f"constant {fit['idle_w']:.0f} W{busy}", loc="left", fontsize=9)
    axes[0].set_ylabel("energy efficiency [matrix FLOP per joule]")
    # Every panel's series in the one legend (each panel holds its own precision's variants).
    entries = {}
    for ax in axes:
        for handle, label in zip(*ax.get_legend_handles_labels()):
            entries.setdefault(label, handle)
    axes[-1].legend(handles=list(entries.values()), labels=list(entries), loc="upper left",
                    bbox_to_anchor=(1.02, 1.0), frameon=False)
    plot.notes.append(f"Fit residuals: rms {100 * fit['residual_rms']:.1f}%, "
                      f"max {100 * fit['residual_max']:.1f}% over "
                      f"{len(fit['points'])} calibration kernels.")
    if fit.get("eps_inst_pj") is not None:
        models = [r["energy"].get("model") or {} for r in rows]
        shares = sorted(m["inst_mj"] / m["total_mj"] for m in models
                        if m.get("inst_mj") is not None and m.get("total_mj"))
        median = (f" (median {shares[len(shares) // 2]:.0%} of these rows' modelled energy)"
                  if shares else "")
        plot.notes.append(
            f"The roofs hold FLOPs, DRAM bytes and constant power at the device's highest SM "
            f"clock ({fit.get('f_ref_mhz') or 0:.0f} MHz); the energy of the instructions a kernel "
            f"issues (ε_inst per warp instruction){median} is its own and not in them: it is part "
            "of a point's distance below the roofs, as is a clock held below the highest (the "
            f"dynamic energies scale with its power {fit.get('clock_exponent', 2):.2f}).")
    if fit.get("eps_mma16_pj") is not None:
        mma8 = fit.get("eps_mma8_pj")
        plot.notes.append(
            f"The roofs use the GEMMs' energy per FLOP (cuBLASLt: wgmma on Hopper); the ldmatrix + "
            f"mma.sync calibration loop costs {fit['eps_mma16_pj']:.3g} pJ per bf16/fp16 FLOP"
            + (f" and {mma8:.3g} per fp8 FLOP" if mma8 is not None else "")
            + ", the figure the model gives the rows of mma.sync kernels (fa1, fa2, fp8-sm89).")
    if fit.get("eps_l2_byte_pj") is not None:
        knee = fit.get("clock_knee_mhz") or 0
        plot.notes.append(
            f"Bytes between the SMs and the L2 cost {fit['eps_l2_byte_pj']:.3g} pJ each (a "
            f"cp.async stream from the L2 into shared memory), the SMs' running warps "
            f"{fit.get('busy_w', 0):.0f} W above the constant power (a pointer chase)"
            + (f", HBM {fit['dram_active_w']:.0f} W while it moves bytes"
               if fit.get("dram_active_w") else "")
            + (f", and the dynamic energies stop falling below {knee:.0f} MHz (the voltage's "
               "floor)" if knee > 0 else "")
            + ": a point's distance below the roofs includes them.")
    _title(fig, "Energy roofline (Choi et al., IPDPS 2013), fitted on this device", rows, device)
    plot.figure = fig
    return plot


# The model's parts, bottom to top. l2_mj is absent in files before the L2 term and inst_mj in
# files before the instruction term: such a record's parts are the others (energy_parts).
ENERGY_PARTS = (("flop_mj", "FLOPs", "#4c72b0"), ("inst_mj", "instructions", "#55a868"),
                ("l2_mj", "SM ↔ L2 bytes", "#c44e52"),
                ("byte_mj", "DRAM bytes (and HBM's active power)", "#dd8452"),
                ("idle_mj", "constant power (and busy SMs) × time", "#8c8c8c"))


def energy_parts(m: dict) -> list[tuple[str, str, str]]:
    """The parts of ENERGY_PARTS a row's model breakdown has."""
    return [part for part in ENERGY_PARTS if m.get(part[0]) is not None]


def energy_split_rows(rows: list[dict]) -> list[dict]:
    """Per (d, causal and K/V shape, kv_class): the rows at the largest N that has a standard row
    with the model's breakdown, standard first: what the split plot and its table show."""
    out = []
    with_model = [r for r in rows if (r.get("energy") or {}).get("model") and energy_mj(r)]
    for d, causal, kind in sorted({(r["d"], r["causal"], kv_class(r)) for r in with_model}):
        mine = [r for r in with_model
                if r["d"] == d and r["causal"] == causal and kv_class(r) == kind]
        std = [r for r in mine if r["algorithm"] == "standard" and not r["peer"]]
        if not std:
            continue
        n = max(r["N"] for r in std)
        group = [r for r in mine if r["N"] == n]
        group.sort(key=lambda r: (r["algorithm"] != "standard", r["peer"], r["label"]))
        out += group
    return out


@_styled
def plot_energy_split(res: Results, device: str, name: str = "energy-split") -> Plot:
    plot = Plot(name, "Where the energy goes at the largest N: FLOPs, instructions, SM ↔ L2 "
                      "bytes, DRAM, constant power")
    rows = energy_split_rows(_energy_rows(res, device, plot))
    if not rows:
        plot.skipped = (f"no standard row with energy and the model's breakdown for {device} "
                        "(needs an energy model: measured ceilings, not --no-energy)")
        return plot
    groups = list(dict.fromkeys((r["d"], r["causal"], r["N"], kv_class(r)) for r in rows))
    fig = _figure(max(5.0, 0.9 * len(rows) + 2.5), 4.2)
    ax = fig.subplots()
    x = 0.0
    ticks, labels = [], []
    for g in groups:
        for r in [r for r in rows if (r["d"], r["causal"], r["N"], kv_class(r)) == g]:
            m = r["energy"]["model"]
            bottom = 0.0
            for key, _, colour in energy_parts(m):
                ax.bar(x, m[key], bottom=bottom, color=colour, width=0.7, edgecolor="white",
                       linewidth=0.5)
                bottom += m[key]
            ax.plot([x - 0.38, x + 0.38], [energy_mj(r)] * 2, color="black", lw=1.6)
            ticks.append(x)
            note = f"\n{kv_note(r)}" if kv_note(r) else ""
            labels.append(f"{res.label(r['label'])}\nd={g[0]}{' causal' if g[1] else ''}{note}")
            x += 1
        x += 0.6
    ax.set_xticks(ticks)
    ax.set_xticklabels(labels, fontsize=7.5, rotation=30, ha="right")
    ax.set_ylabel("energy per launch [mJ]")
    ax.set_yscale("log")
    shown = {part for r in rows for part in energy_parts(r["energy"]["model"])}
    handles = [Patch(color=c, label=f"model: {label}") for key, label, c in ENERGY_PARTS
               if (key, label, c) in shown]
    if any(r["energy"]["model"].get("inst_mj") is None for r in rows):
        plot.notes.append("Rows of files before the model's instruction term have no "
                          "instruction part.")
    handles.append(Line2D([], [], color="black", lw=1.6, label="measured (energy counter)"))
    ax.legend(handles=handles, loc="upper left", bbox_to_anchor=(1.02, 1.0), frameon=False)
    _title(fig, f"Energy split at N = {', '.join(str(n) for n in sorted({g[2] for g in groups}))}",
           rows, device)
    plot.figure = fig
    return plot


def _element_bytes(r: dict) -> float:
    return 1.0 if r["algorithm"] == "fp8" else 2.0


PLOTS = (plot_roofline, plot_io_scaling, plot_bytes_vs_d, plot_block_size, plot_bytes_vs_tile,
         plot_throughput, plot_fp8_accuracy, plot_energy, plot_energy_roofline, plot_energy_split)


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
