"""Result files merged into one list of rows, with the helpers every plot and table shares:
device groups, roofs, consistent colours and markers per variant, and title parts.

Reads only what ``docs/results-schema.md`` documents; optional keys (``measured``, ``counters``,
``block_order``, ``derived.best_peer``, ``default_config`` ...) are used when present and never
required.

Rows are told apart by their identity, never by parsing a name. Each flat row carries:
- ``variant``: as the file says it (fa-bench/2: the plain registry name, ``fa2``);
- ``label``: the row's name in the report, for display, grouping, colours, legends and tables.
  fa-bench/2 rows: ``schema.row_labels`` (fa-bench's own naming: ``fa2@64x64``, ``fa2~heads``)
  with every fa-bench/2 row of the report as siblings, so that one identity keeps one name over
  configurations and files, and rows of one variant (which declare the same options) that
  differ get different names; fa-bench/1 rows: their ``variant``, which /1 decorated already;
- ``console_label``: the name fa-bench's console gave the row (siblings: its configuration);
- ``base``: the variant's plain name (/1: the name up to its first ``@`` or ``~``) and ``family``:
  the identity without the kernel configuration (variant, direction, options);
- ``tiles``, ``block_order``: from ``kernel_config`` and ``options`` in fa-bench/2;
- ``tile_variant``: a non-default tile row of a configuration that also holds the default one.

Every row also has ``H_kv`` and ``N_kv`` (K/V heads and length; H and N before fa-bench/4),
``page_size`` and ``kv_lengths`` (the K/V cache's pages and each sequence's length, a tuple; 0
and None before fa-bench/5), part of its configuration's identity; :func:`kv_class`,
:func:`kv_note`, :func:`n_cell` and :func:`bh_cell` tell grouped-query, non-square, paged and
ragged rows apart and name them, square contiguous rows as they always were.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field

from reports.schema import kv_cache_notes, load_results, option_text, rows

# Okabe-Ito colours (colour-blind safe) for the variants the tool knows; peers get their own.
KNOWN_COLOURS = {
    "standard": "#D55E00",
    "fa1": "#E69F00",
    "fa2": "#0072B2",
    "fp8": "#009E73",
    "cudnn": "#CC79A7",
    "cudnn-fp8": "#882255",
    "torch-flash": "#56B4E9",
    "torch-efficient": "#332288",
    "torch-cudnn": "#999933",
    "torch-math": "#444444",
}
# Further colours for variants the tool does not know (tile variants, other peers): distinct from
# the ones above and from each other (Paul Tol's muted and light sets, then matplotlib's tab20).
EXTRA_COLOURS = ("#44AA99", "#AA4499", "#117733", "#DDCC77", "#661100", "#6699CC", "#88CCEE",
                 "#AA3377", "#BBBB00", "#EE8866", "#77AADD", "#99DDFF", "#EEDD88", "#FFAABB",
                 "#AAAA00", "#1F77B4", "#FF7F0E", "#2CA02C", "#D62728", "#9467BD", "#8C564B",
                 "#E377C2", "#7F7F7F", "#BCBD22", "#17BECF")
KNOWN_MARKERS = {"standard": "s", "fa1": "^", "fa2": "o", "fp8": "D"}
PEER_MARKERS = ("P", "X", "*", "h", "p", "v", "<", ">")
OTHER_MARKERS = ("v", "<", ">", "d", "8", "H", "p", "h", "*", "X", "P")


@dataclass
class Roofs:
    """One device's roofs in bytes/s and FLOP/s; 0 = unknown."""

    measured: bool  # False: the values are the datasheet's (``--datasheet-roofs`` or no GPU)
    source: str
    dram: float
    l2: float
    tensor: dict[str, float]  # dtype ("bf16", "fp16", "fp8") -> FLOP/s
    datasheet_dram: float = 0.0
    datasheet_tensor: dict[str, float] = field(default_factory=dict)

    def peak_for(self, algorithm: str, dtype: str) -> float:
        return self.tensor.get("fp8" if algorithm == "fp8" else dtype, 0.0)


def roofs_of(doc: dict) -> Roofs:
    c = doc.get("ceilings") or {}
    source = str(c.get("source", ""))
    tensor = {k: float(v) for k, v in (c.get("tensor_flops_per_s") or {}).items()
              if isinstance(v, (int, float)) and v > 0}
    measured = source.startswith("measured")
    sheet = c.get("datasheet") or {}
    sheet_tensor = {k[len("tensor_flops_per_s_"):]: float(v) for k, v in sheet.items()
                    if k.startswith("tensor_flops_per_s_") and isinstance(v, (int, float)) and v > 0}
    return Roofs(
        measured=measured,
        source=source,
        dram=float(c.get("dram_bytes_per_s") or 0.0),
        l2=float(c.get("l2_bytes_per_s") or 0.0),
        tensor=tensor,
        datasheet_dram=float(sheet.get("dram_bytes_per_s") or 0.0),
        datasheet_tensor=sheet_tensor,
    )


@dataclass
class Run:
    """One result file."""

    path: str
    doc: dict

    @property
    def device(self) -> str:
        dev = self.doc.get("device")
        return dev["name"] if dev else "no GPU"

    @property
    def date(self) -> str:
        return str(self.doc.get("created_utc", ""))[:10]


def split_by_gpu(run: Run) -> list[Run]:
    """A file whose configurations ran on several GPUs (fa-bench/3 ``devices``: ``--devices``,
    ``fa-bench merge``) as one run per GPU, each with that GPU's device and ceilings, so that
    several GPUs in one file sit side by side as several files do. Any other file: itself."""
    devices = run.doc.get("devices") or []
    if len(devices) < 2:
        return [run]
    out = []
    for dev in devices:
        doc = {k: v for k, v in run.doc.items() if k not in ("devices", "configs")}
        doc["device"] = {k: v for k, v in dev.items() if k != "ceilings"}
        doc["ceilings"] = dev["ceilings"]
        doc["configs"] = [c for c in run.doc["configs"]
                          if (c.get("gpu") or {}).get("uuid") == dev["uuid"]]
        out.append(Run(run.path, doc))
    return out


class Results:
    """Several result files as one list of flat rows (``schema.rows`` plus file and device)."""

    def __init__(self, runs: list[Run]):
        runs = [part for run in runs for part in split_by_gpu(run)]
        self.runs = runs
        self.rows: list[dict] = []
        v2_rows: list[dict] = []
        for run_index, run in enumerate(runs):
            settings = run.doc.get("settings") or {}
            v1 = run.doc.get("schema") == "fa-bench/1"
            for r in rows(run.doc):
                r["run_index"] = run_index
                r["source"] = run.path
                r["device_name"] = run.device
                r["date"] = run.date
                r["inputs"] = settings.get("inputs", "normal")
                r["l2_setting"] = settings.get("l2", "")
                r["peer"] = bool(r.get("peer"))
                r["console_label"] = r["label"]
                _identity_fields(r, v1)
                self.rows.append(r)
                if not v1:
                    v2_rows.append(r)
        for r, label in zip(v2_rows, series_labels(v2_rows)):
            r["label"] = label
        for r in self.rows:
            r["kernel_text"] = kernel_text(r)
        self._mark_tile_rows()
        self.peers = {r["label"] for r in self.rows if r["peer"]}
        self.colours, self.markers = _styles(sorted({r["label"] for r in self.rows}),
                                             self.peers)
        seen: dict[str, None] = {}
        for r in self.rows:
            seen.setdefault(r["device_name"], None)
        for run in runs:
            seen.setdefault(run.device, None)
        self._devices = list(seen)
        self.many_inputs = len({r["inputs"] for r in self.rows}) > 1
        self._roofs: dict[str, Roofs | None] = {}
        file_roofs = [roofs_of(run.doc) for run in runs]
        for r in self.rows:
            r["place"] = placement(r, file_roofs[r["run_index"]])

    @classmethod
    def load(cls, paths: list[str]) -> Results:
        """Read and validate every file; raises SchemaError / OSError naming the bad file."""
        return cls([Run(os.fspath(p), load_results(p)) for p in paths])

    def _mark_tile_rows(self) -> None:
        # A non-default tile row: not a peer, and its configuration holds the default row of
        # the same family (the same identity but for the kernel configuration), which stands
        # for the variant in the per-variant plots. fa-bench/2: the default is the row marked
        # default_config (files without that key say nothing: no row is marked); fa-bench/1:
        # the row named as its algorithm (/1 named other tiles fa2@64x64).
        by_config: dict[tuple, list[dict]] = {}
        for r in self.rows:
            by_config.setdefault((r["run_index"], r["config_index"]), []).append(r)
        for group in by_config.values():
            v1 = group[0]["v1"]
            defaults: dict[tuple, dict] = {}
            for r in group:
                if r["peer"]:
                    continue
                if (r["variant"] == r["algorithm"]) if v1 else r.get("default_config") is True:
                    defaults[(r["algorithm"], r["block_order"]) if v1 else r["family"]] = r
            for r in group:
                d = defaults.get((r["algorithm"], r["block_order"]) if v1 else r["family"])
                if v1:
                    other = d is not None and d["tiles"] != r["tiles"]
                else:
                    other = d is not None and r.get("default_config") is False
                r["tile_variant"] = bool(not r["peer"] and d is not r and other)

    # -- selections ------------------------------------------------------------------------------

    def devices(self) -> list[str]:
        return list(self._devices)

    @property
    def many_devices(self) -> bool:
        return len(self._devices) > 1

    def ok(self, device: str | None = None) -> list[dict]:
        return [r for r in self.rows if r["status"] == "ok" and r["median_ms"]
                and (device is None or r["device_name"] == device)]

    def roofs(self, device: str) -> Roofs | None:
        """The device's roofs: the newest file with measured roofs, else the newest file's."""
        if device not in self._roofs:
            self._roofs[device] = self._find_roofs(device)
        return self._roofs[device]

    def _find_roofs(self, device: str) -> Roofs | None:
        runs = [run for run in self.runs if run.device == device]
        if not runs:
            return None
        runs.sort(key=lambda run: run.doc.get("created_utc", ""), reverse=True)
        all_roofs = [roofs_of(run.doc) for run in runs]
        best = next((r for r in all_roofs if r.measured), all_roofs[0])
        if not best.datasheet_tensor:  # a datasheet-only file may carry what the measured lacks
            sheet = next((r for r in all_roofs if not r.measured), None)
            if sheet is not None and best.measured:
                best.datasheet_dram = best.datasheet_dram or sheet.dram
                best.datasheet_tensor = dict(sheet.tensor)
        return best

    def style(self, label: str) -> tuple[str, str]:
        """The colour and marker of a row label (``r["label"]``), the same in every plot."""
        return self.colours.get(label, "#888888"), self.markers.get(label, "o")

    def label(self, label: str) -> str:
        """A row label as legends and tables show it: peers marked."""
        return f"{label} (peer)" if label in self.peers else label


def _identity_fields(r: dict, v1: bool) -> None:
    """Fills ``v1``, ``base``, ``family``, ``config_rest`` (the kernel configuration but for its
    tiles: what one block-size line keeps fixed), ``tiles`` and ``block_order`` of a flat row
    (see the module's docstring)."""
    r["v1"] = v1
    if v1:
        r["base"] = r["variant"].split("@")[0].split("~")[0]
        r["block_order"] = r.get("block_order") or ""
        r["family"] = (r["base"], "forward", r["block_order"])
        r["config_rest"] = None
        return
    kc = r.get("kernel_config")
    options = r.get("options") or {}
    r["base"] = r["variant"]
    if kc is not None:
        r["tiles"] = {"block_q": kc["block_q"], "block_kv": kc["block_kv"]}
    elif "tiles" not in r:
        r["tiles"] = {"block_q": 0, "block_kv": 0}
    order = options.get("block_order")
    r["block_order"] = order if isinstance(order, str) else ""
    r["family"] = (r["variant"], r.get("direction", "forward"),
                   json.dumps(options, sort_keys=True))
    r["config_rest"] = None if kc is None else (kc["stages"], kc["warpgroups"],
                                                tuple(kc["cluster"]))


CONFIG_PARTS = ("tiles", "stages", "warpgroups", "cluster")


def _config_parts(r: dict) -> dict:
    kc = r.get("kernel_config")
    if kc is None:
        return {}
    return {"tiles": (kc["block_q"], kc["block_kv"]), "stages": kc["stages"],
            "warpgroups": kc["warpgroups"], "cluster": tuple(kc["cluster"])}


def _option_parts(r: dict) -> dict:
    return {name: (type(v) is bool, v) for name, v in (r.get("options") or {}).items()}


def _shown(r: dict, parts, refs: list[dict], group: list[dict], alike: list[dict] | None) -> list:
    """The parts of a row that name its series: those that differ from the variant's default
    (``refs``: rows marked default at the nearest shape); without a marked default, those
    that differ within the row's configuration (``group``); for a row marked non-default with
    no default to compare against, the parts that all such rows of its variant share
    (``alike``: a run of ``--fp8-prequantized`` alone is ``fp8~...~prequantized=true`` at every
    shape, whatever schedule each shape picks)."""
    mine = parts(r)
    if refs:
        ref_parts = [parts(x) for x in refs]
        out = [k for k in mine if all(p.get(k) != mine[k] for p in ref_parts)]
        return out or [k for k in mine if any(p.get(k) != mine[k] for p in ref_parts)]
    varying = [k for k in mine if len({repr(parts(x).get(k)) for x in group}) > 1]
    if varying or alike is None:
        return varying
    others = [parts(x) for x in alike]
    shared = [k for k in mine if all(p.get(k) == mine[k] for p in others)]
    return shared or list(mine)


def series_labels(rows_: list[dict]) -> list[str]:
    """The series each fa-bench/2 row belongs to in plots, tables and colours: the variant's
    name for the rows that run its default for their shape (a default tile or schedule chosen
    per shape is an attribute of the point, ``kernel_text``, not a series), and the variant with
    the parts that differ from that default for rows the file marks as not the default
    (``default_config``/``default_options`` false: ``--block-q 64``, ``--fa3-schedule full``),
    in fa-bench's spelling (``fa2@64x64``, ``fa3~full``, ``fa2~heads``, `` bwd``). A file
    without those marks: a row is the default unless its configuration holds other rows of its
    variant, and then it is named by what differs among them, as fa-bench's console names it.
    """
    def shape(r):
        return (r["device_name"], r["inputs"], r["B"], r["H"], r["N"], r["d"], r["causal"],
                r["dtype"], r["H_kv"], r["N_kv"], *kv_cache_key(r))

    def family(r):
        return (r["variant"], r.get("direction", "forward"))

    groups: dict[tuple, list[dict]] = {}
    defaults: dict[tuple, dict[tuple, list[dict]]] = {"config": {}, "options": {}}
    marked: dict[tuple, dict[tuple, list[dict]]] = {"config": {}, "options": {}}
    for r in rows_:
        groups.setdefault((shape(r), family(r)), []).append(r)
        for kind, key in (("config", "default_config"), ("options", "default_options")):
            if r.get(key) is False:
                marked[kind].setdefault(family(r), []).append(r)
        for kind, key in (("config", "default_config"), ("options", "default_options")):
            if r.get(key) is True:
                for near in ((shape(r)[2:],), (r["d"], r["causal"], r["dtype"]), ()):
                    defaults[kind].setdefault((family(r), *near), []).append(r)

    def refs(kind: str, r: dict) -> list[dict]:
        for near in ((shape(r)[2:],), (r["d"], r["causal"], r["dtype"]), ()):
            found = defaults[kind].get((family(r), *near))
            if found:
                return found
        return []

    out = []
    for r in rows_:
        group = groups[(shape(r), family(r))]
        label = r["variant"]
        config = options = []
        if r.get("default_config") is False:
            near = refs("config", r)
            config = _shown(r, _config_parts, near, group, marked["config"][family(r)])
            if not near and "tiles" in config:
                config = ["tiles"]  # with nothing to compare, the tile names the kernel
        elif "default_config" not in r:
            config = _shown(r, _config_parts, [], group, None)
        if r.get("default_options") is False:
            options = _shown(r, _option_parts, refs("options", r), group,
                             marked["options"][family(r)])
        elif "default_options" not in r:
            options = _shown(r, _option_parts, [], group, None)
        kc = r.get("kernel_config")
        if kc is not None:
            if "tiles" in config:
                label += f"@{kc['block_q']}x{kc['block_kv']}"
            if "stages" in config:
                label += f" s{kc['stages']}"
            if "warpgroups" in config:
                label += f" wg{kc['warpgroups']}"
            if "cluster" in config:
                label += " c" + "x".join(map(str, kc["cluster"]))
        opts = r.get("options") or {}
        for name in sorted(options):
            value = opts[name]
            label += "~" + ("" if isinstance(value, str) else f"{name}=") + option_text(value)
        if r.get("direction") == "backward":
            label += " bwd"
        out.append(label)
    return out


def kernel_text(r: dict) -> str:
    """What ran for a point, in words for tables: tiles, stages, warpgroups, cluster and option
    values ("192×128, 2 stages, 4 warpgroups; schedule no-pingpong"); "" for a row without."""
    kc = r.get("kernel_config")
    parts = []
    if kc is not None:
        text = f"{kc['block_q']}×{kc['block_kv']}"
        if kc["stages"] != 1:
            text += f", {kc['stages']} stages"
        if kc["warpgroups"]:
            text += f", {kc['warpgroups']} warpgroups"
        if tuple(kc["cluster"]) != (1, 1, 1):
            text += ", cluster " + "×".join(map(str, kc["cluster"]))
        parts.append(text)
    elif r.get("tiles") and r["tiles"].get("block_q"):
        parts.append(f"{r['tiles']['block_q']}×{r['tiles']['block_kv']}")
    opts = r.get("options") or {}
    if opts:
        parts.append(", ".join(f"{k} {option_text(v)}" for k, v in sorted(opts.items())))
    return "; ".join(parts)


def _styles(variants: list[str], peers: set[str]) -> tuple[dict[str, str], dict[str, str]]:
    """A colour and a marker per variant: the fixed ones for known variants, then colours no
    other variant of the report has (24 more before any repeats) and marker shapes that differ
    between neighbours, so that 13 or more series stay apart."""
    colours: dict[str, str] = {}
    markers: dict[str, str] = {}
    used = {KNOWN_COLOURS[v] for v in variants if v in KNOWN_COLOURS}
    extra = [c for c in EXTRA_COLOURS if c not in used]
    peer_markers = iter(PEER_MARKERS * 8)
    other_markers = iter(OTHER_MARKERS * 8)
    k = 0
    for v in variants:
        if v in KNOWN_COLOURS:
            colours[v] = KNOWN_COLOURS[v]
        else:
            colours[v] = extra[k % len(extra)]
            k += 1
        if v in peers:
            markers[v] = next(peer_markers)
        else:
            markers[v] = KNOWN_MARKERS.get(v) or next(other_markers)
    return colours, markers


# -- words for titles ---------------------------------------------------------------------------


def bh_text(rows_: list[dict]) -> str:
    """"B·H = 128" when one value, else the range with the convention behind it."""
    bh = sorted({r["B"] * r["H"] for r in rows_})
    if not bh:
        return ""
    if len(bh) == 1:
        return f"B·H = {bh[0]}"
    text = f"B·H = {bh[0]}–{bh[-1]}"
    bn = {r["B"] * r["N"] for r in rows_}
    hd = {r["H"] * r["d"] for r in rows_}
    if len(bn) == 1 and len(hd) == 1:
        text += f" (B·N = {bn.pop()}, H·d = {hd.pop()})"
    return text


def dtype_text(rows_: list[dict]) -> str:
    dtypes = sorted({r["dtype"] for r in rows_})
    text = "/".join(dtypes)
    if any(r["algorithm"] == "fp8" for r in rows_):
        text += " (fp8 rows: E4M3 tensor cores)"
    return text


def date_text(rows_: list[dict]) -> str:
    dates = sorted({r["date"] for r in rows_ if r["date"]})
    if not dates:
        return ""
    return dates[0] if len(dates) == 1 else f"{dates[0]} – {dates[-1]}"


def title_line(rows_: list[dict], device: str) -> str:
    parts = [device, dtype_text(rows_), bh_text(rows_), date_text(rows_)]
    return " · ".join(p for p in parts if p)


def slug(text: str) -> str:
    out = "".join(ch.lower() if ch.isalnum() else "-" for ch in text)
    while "--" in out:
        out = out.replace("--", "-")
    return out.strip("-") or "device"


def config_key(r: dict) -> tuple:
    return (r["dtype"], r["d"], r["causal"], r["N"], r["B"], r["H"], r["H_kv"], r["N_kv"],
            *kv_cache_key(r))


# -- grouped-query, non-square, paged and ragged rows -------------------------------------------


def kv_cache_key(r: dict) -> tuple[int, tuple[int, ...]]:
    """(page_size, kv_lengths) of a row as a key part that sorts: (0, ()) for a contiguous
    cache with every sequence N_kv long (kv_lengths None)."""
    return (r.get("page_size", 0), tuple(r.get("kv_lengths") or ()))


# kv_class of square multi-head attention on a contiguous cache.
SQUARE = (0, 0, 0, ())


def kv_class(r: dict) -> tuple[int, int, int, tuple[int, ...]]:
    """(H_kv, N_kv, page_size, kv_lengths): H_kv and N_kv where they differ from H and N, 0 where
    they do not; page_size 0 for a contiguous cache; kv_lengths () where every sequence holds
    N_kv keys. SQUARE, (0, 0, 0, ()), for square multi-head attention. Rows of one class may
    share a line or a panel; rows of two may not (an 8-head K/V row is not the next point of a
    32-head one, nor a paged cache's the next of a contiguous one)."""
    return (r["H_kv"] if r["H_kv"] != r["H"] else 0, r["N_kv"] if r["N_kv"] != r["N"] else 0,
            *kv_cache_key(r))


def _n_kv_notes(r: dict) -> list[str]:
    """What tells a row's K/V length and cache apart (kv_cache_notes)."""
    _, n_kv, page_size, lengths = kv_class(r)
    return kv_cache_notes(n_kv, r["N_kv"], page_size, lengths)


def kv_note(r: dict) -> str:
    """"H_kv 8", "N_kv 4096", "H_kv 8, N_kv 4096", "N_kv 4096, pages of 64",
    "N_kv ≤4096, lengths 512..4096/sum=20000, pages of 64"; "" for a square multi-head row on a
    contiguous cache."""
    h_kv = kv_class(r)[0]
    return ", ".join(([f"H_kv {h_kv}"] if h_kv else []) + _n_kv_notes(r))


def n_cell(r: dict) -> str:
    """A table's N cell: "4096"; "1 (N_kv 4096)" where the K/V length differs; "1 (N_kv 4096,
    pages of 64)" for a paged cache, "1 (N_kv ≤4096, lengths 100,4096)" where the sequences'
    lengths differ."""
    notes = _n_kv_notes(r)
    return str(r["N"]) + (f" ({', '.join(notes)})" if notes else "")


def bh_cell(r: dict) -> str:
    """A table's B×H cell: "4×32"; "4×32 (H_kv 8)" for grouped-query attention."""
    h_kv = kv_class(r)[0]
    return f"{r['B']}×{r['H']}" + (f" (H_kv {h_kv})" if h_kv else "")


def default_rows(rows_: list[dict]) -> list[dict]:
    """Rows that are not non-default tile rows (those belong to the block-size plot)."""
    return [r for r in rows_ if not r.get("tile_variant")]


def precision(r: dict) -> str:
    """The precision a row computes in: "fp8" for FP8 rows (fp8, cudnn-fp8), else its dtype.
    Picks its tensor roof and the peers it is compared with."""
    return "fp8" if r["algorithm"] == "fp8" else r["dtype"]


def placement(r: dict, roofs: Roofs) -> dict | None:
    """The row's place on the roofline: the file's ``placement`` object when it has one (written
    by fa-bench), else the same computed here from the file's fields (older files), marked
    ``"computed": True``. None for rows without a time or without roofs.

    The formula (docs/reports.md, docs/results-schema.md): attained = model matrix FLOPs /
    median time; basis "counters" when the row has measured DRAM bytes (intensity_dram = matrix
    FLOPs / measured DRAM bytes, intensity_l2 = matrix FLOPs / measured SM<->L2 bytes), else
    "compulsory" (intensity_dram = matrix FLOPs / compulsory bytes, intensity_l2 null);
    attainable = min(tensor roof of the row's precision, intensity_dram x DRAM roof,
    intensity_l2 x L2 roof when both are known); fraction = attained / attainable; bound = the
    roof that set the minimum (compute, dram, l2; on a tie the first of these).
    """
    if r.get("status") != "ok" or not r.get("median_ms"):
        return None
    given = r.get("placement")
    if isinstance(given, dict):
        return {**given, "computed": False}
    flops = r["model"]["flops_matrix"]
    peak = roofs.tensor.get(precision(r), 0.0)
    if flops <= 0 or peak <= 0 or roofs.dram <= 0:
        return None
    m = r.get("measured") or {}
    if (m.get("dram_bytes") or 0) > 0:
        basis = "counters"
        i_dram = flops / m["dram_bytes"]
        i_l2 = flops / m["l2_bytes"] if (m.get("l2_bytes") or 0) > 0 else None
    elif r["model"]["bytes_compulsory"] > 0:
        basis, i_dram, i_l2 = "compulsory", flops / r["model"]["bytes_compulsory"], None
    else:
        return None
    candidates = [("compute", peak), ("dram", i_dram * roofs.dram)]
    if i_l2 is not None and roofs.l2 > 0:
        candidates.append(("l2", i_l2 * roofs.l2))
    bound, attainable = candidates[0]
    for name, value in candidates[1:]:
        if value < attainable:
            bound, attainable = name, value
    attained = attained_flops(r)
    return {"basis": basis, "intensity_dram": i_dram, "intensity_l2": i_l2,
            "attainable_tflops": attainable / 1e12, "fraction": attained / attainable,
            "bound": bound, "computed": True}


def attained_flops(r: dict) -> float:
    """Matrix FLOP/s: what the kernel issues, per second (the roofline's y)."""
    return r["model"]["flops_matrix"] / (r["median_ms"] * 1e-3)
