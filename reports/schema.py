"""Reader and writer for fa-bench result files, schemas ``fa-bench/5``, ``/4``, ``/3``, ``/2`` and
``/1``.

The one definition of the file is ``schema/fa-bench-result.schema.json`` (JSON Schema 2020-12,
explained in ``docs/results-schema.md``); the C++ side (``bench/result_json.cpp``) writes and
reads the same documents. Every document read or written here is checked against it by
``reports/json_schema.py`` (the pinned ``jsonschema`` package, its errors said in plain words).

Every problem is reported as a :class:`SchemaError` whose message reads
``"<file>: <key path>: <problem>"``, e.g.
``"r.json: configs[2].results[0].status: expected one of ok|failed|..., got 'bad'"``.
"""

from __future__ import annotations

import datetime
import json
import math
import os
import subprocess
import tempfile
from pathlib import Path
from typing import Any, Iterable

UNDERSTOOD_VERSIONS = ("fa-bench/1", "fa-bench/2", "fa-bench/3", "fa-bench/4", "fa-bench/5")
# The version fa-bench writes now.
CURRENT_VERSION = "fa-bench/5"
# Versions whose configurations have no H_kv and N_kv: square multi-head attention (H_kv = H,
# N_kv = N), whatever keys of those names a file may carry (the C++ reader ignores them too).
SQUARE_VERSIONS = ("fa-bench/1", "fa-bench/2", "fa-bench/3")
# Versions whose configurations have no page_size and kv_lengths: K/V contiguous, every sequence
# N_kv long (page_size 0, kv_lengths null), whatever keys of those names a file may carry.
CONTIGUOUS_VERSIONS = (*SQUARE_VERSIONS, "fa-bench/4")
# Versions whose configurations say the GPU they ran on.
GPU_VERSIONS = ("fa-bench/3", "fa-bench/4", "fa-bench/5")
# What new_document() writes. fa-bench/1 until the C++ reader reads fa-bench/2 (issue 14: the
# C++ side moves to /2 with its vocabulary; ctest has the C++ reader read this writer's output);
# make_result()/new_document() write /2 when asked.
SCHEMA_VERSION = "fa-bench/2"

# With the GPU: what makes a configuration unique (H_kv and N_kv: H and N before fa-bench/4;
# page_size and kv_lengths: 0 and None before fa-bench/5).
CONFIG_KEY = ("B", "H", "H_kv", "N", "N_kv", "d", "causal", "dtype", "page_size", "kv_lengths")
MODEL_NUMBERS = (
    "flops_matrix",
    "flops_convention",
    "flops_nonmatrix",
    "bytes_read",
    "bytes_written",
    "bytes_compulsory",
    "bytes_asymptotic",
)
MEASURED_NUMBERS = ("dram_bytes", "dram_over_model", "dram_over_compulsory", "l2_bytes",
                    "l2_over_model", "tensor_flops", "tensor_over_model", "fp32_flops",
                    "intensity_dram", "intensity_l2")


class SchemaError(ValueError):
    """A result document that does not follow the schema (or is not JSON at all)."""

    def __init__(self, source: str | None, path: str, problem: str):
        self.source = source
        self.path = path
        self.problem = problem
        parts = [p for p in (source, path) if p]
        super().__init__(": ".join([*parts, problem]))


# --------------------------------------------------------------------------------------------
# Reading and validation


def load_results(path: str | os.PathLike) -> dict:
    """Read, parse and validate a result file; returns the document.

    Raises SchemaError for a file that is not UTF-8 JSON or does not follow the schema, and
    OSError when the file cannot be read.
    """
    return validate(read_document(path), os.fspath(path))


def read_document(path: str | os.PathLike) -> Any:
    """Read and parse a JSON file strictly (UTF-8; no NaN/Infinity), without checking the
    schema. Raises SchemaError naming the file, OSError when it cannot be read."""
    source = os.fspath(path)
    data = Path(path).read_bytes()
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise SchemaError(source, "", f"not UTF-8 text (byte {e.start})") from None
    try:
        doc = json.loads(text, parse_constant=_refuse_constant)
    except json.JSONDecodeError as e:
        raise SchemaError(
            source, "", f"invalid JSON at line {e.lineno} column {e.colno}: {e.msg}"
        ) from None
    except _NonStandardConstant as e:
        raise SchemaError(source, "", f"invalid JSON: {e.args[0]} is not a JSON value") from None
    return doc


class _NonStandardConstant(Exception):
    pass


def _refuse_constant(name: str) -> Any:
    # Python's json accepts NaN/Infinity; strict JSON readers (the C++ side) do not.
    raise _NonStandardConstant(name)


def validate(doc: Any, source: str | None = "<document>") -> dict:
    """Check ``doc`` against the schema (reports/json_schema.py); returns it unchanged, raises
    SchemaError naming ``source``, the key path and the first problem."""
    from reports import json_schema

    json_schema.check(doc, source)
    return doc


def kv_shape(config: dict, version: str | None = None) -> tuple[int, int]:
    """(H_kv, N_kv) of a configuration (or of a flat row): the K/V heads and the K/V length.
    fa-bench/4 writes both; older versions (``version`` one of SQUARE_VERSIONS) and a dict
    without them mean square multi-head attention: (H, N)."""
    if version in SQUARE_VERSIONS:
        return config["H"], config["N"]
    return config.get("H_kv", config["H"]), config.get("N_kv", config["N"])


def kv_cache(config: dict, version: str | None = None) -> tuple[int, tuple[int, ...] | None]:
    """(page_size, kv_lengths) of a configuration (or of a flat row): 0 for K/V kept contiguous,
    else the rows of a page; None when every sequence holds N_kv keys, else each sequence's own
    K/V length, as a tuple (hashable: it is part of the configuration's key). fa-bench/5 writes
    both; older versions (``version`` one of CONTIGUOUS_VERSIONS) and a dict without them mean
    (0, None)."""
    if version in CONTIGUOUS_VERSIONS:
        return 0, None
    lengths = config.get("kv_lengths")
    return config.get("page_size", 0), tuple(lengths) if lengths is not None else None


def shape_values(config: dict, version: str | None = None) -> dict:
    """The configuration's CONFIG_KEY values by name, H_kv and N_kv (kv_shape), page_size and
    kv_lengths (kv_cache: a tuple or None) filled in."""
    h_kv, n_kv = kv_shape(config, version)
    page_size, kv_lengths = kv_cache(config, version)
    filled = {"H_kv": h_kv, "N_kv": n_kv, "page_size": page_size, "kv_lengths": kv_lengths}
    return {k: filled[k] if k in filled else config[k] for k in CONFIG_KEY}


def config_key(config: dict, version: str | None = None) -> tuple:
    """What makes a configuration unique in a file: its shape (CONFIG_KEY: B, H, H_kv, N, N_kv,
    d, causal, dtype, page_size, kv_lengths) and, fa-bench/3 on, the UUID of the GPU it ran on
    (one file may hold the same shape on several GPUs). H_kv and N_kv are H and N in files
    before fa-bench/4 (see kv_shape), page_size and kv_lengths 0 and None before fa-bench/5 (see
    kv_cache), so that keys compare across versions."""
    values = shape_values(config, version)
    gpu = config.get("gpu")
    return (*(values[k] for k in CONFIG_KEY), gpu.get("uuid") if isinstance(gpu, dict) else None)


def kv_lengths_text(lengths) -> str:
    """Each sequence's K/V length as fa-bench writes it (kernels/problem.cpp kv_lengths_text):
    the lengths joined by "," for a batch of 4 or fewer (``100,4096``), else
    ``MIN..MAX/sum=S`` (``512..4096/sum=147456``)."""
    lengths = list(lengths)
    if len(lengths) <= 4:
        return ",".join(str(x) for x in lengths)
    return f"{min(lengths)}..{max(lengths)}/sum={sum(lengths)}"


def kv_cache_notes(n_kv: int, capacity: int, page_size: int, lengths) -> list[str]:
    """What tells a row's K/V length and cache apart: ``N_kv 4096`` (n_kv: the K/V length where
    it differs from N, else 0); with lengths apart, the cache's capacity and the lengths,
    ``N_kv ≤4096``, ``lengths 512..4096/sum=20000``; ``pages of 64`` for a paged cache."""
    notes = []
    if lengths:
        notes += [f"N_kv ≤{capacity}", f"lengths {kv_lengths_text(lengths)}"]
    elif n_kv:
        notes.append(f"N_kv {n_kv}")
    if page_size:
        notes.append(f"pages of {page_size}")
    return notes


def shape_text(config: dict, version: str | None = None) -> str:
    """The shape as fa-bench's console writes it: ``B=4 H=32 N=4096 d=128``, with `` H_kv=8``
    after H and `` N_kv=65536`` after N only where they differ from H and N, then
    `` kv_lengths=...`` (:func:`kv_lengths_text`) where the sequences' lengths differ and
    `` page=64`` for a paged cache (a square, contiguous multi-head configuration's text is the
    same in every version):
    ``B=8 H=32 H_kv=8 N=1 N_kv=4096 kv_lengths=512..4096/sum=20000 page=64 d=128``."""
    h_kv, n_kv = kv_shape(config, version)
    page_size, kv_lengths = kv_cache(config, version)
    text = f"B={config['B']} H={config['H']}"
    if h_kv != config["H"]:
        text += f" H_kv={h_kv}"
    text += f" N={config['N']}"
    if n_kv != config["N"]:
        text += f" N_kv={n_kv}"
    if kv_lengths is not None:
        text += f" kv_lengths={kv_lengths_text(kv_lengths)}"
    if page_size > 0:
        text += f" page={page_size}"
    return text + f" d={config['d']}"


def flops_convention(*, B: int, H: int, N: int, d: int, causal: bool, N_kv: int | None = None,
                     kv_lengths=None) -> float:
    """The field's convention FLOPs of one forward pass, as fa-bench's model counts them
    (profiler/io_model.cpp): the two products over N x N_kv (query, key) pairs per query head,
    causal's N x N part halved: 4·B·H·d·pairs, pairs = N·N_kv (causal: N·N_kv − N²/2). With
    ``kv_lengths`` each sequence's own: 4·H·d·Σ_b pairs(N, L_b). A backward pass is 2.5 times
    the forward's."""
    n_kv = N if N_kv is None else N_kv
    if kv_lengths is None:
        pairs = N * n_kv - (N * N / 2 if causal else 0)
        return 4.0 * B * H * pairs * d
    pairs = 0.0
    for length in kv_lengths:
        pairs += N * length - (N * N / 2 if causal else 0)
    return 4.0 * H * pairs * d


def row_identity(result: dict, version: str) -> Any:
    """What makes a row unique within a configuration (what the gate matches on): fa-bench/1 the
    variant; fa-bench/2 (variant, direction, kernel_config, options)."""
    if version == "fa-bench/1":
        return result["variant"]
    return (result["variant"], result.get("direction"),
            json.dumps(result.get("kernel_config"), sort_keys=True),
            json.dumps(result.get("options"), sort_keys=True))


# A missing kernel_config compares as C++'s KernelConfig{}: tiles 0x0, 1 stage, 0 warpgroups,
# cluster 1x1x1.
_NO_KERNEL_CONFIG = {"block_q": 0, "block_kv": 0, "stages": 1, "warpgroups": 0,
                     "cluster": [1, 1, 1]}


def _kernel_config(result: dict) -> dict:
    return result.get("kernel_config") or _NO_KERNEL_CONFIG


def _option_value(result: dict, name: str) -> tuple | None:
    """An option's value as C++'s OptionValue compares it: a bool never equals a number, 2
    equals 2.0 (JSON numbers are doubles there); None when the row has no such option."""
    options = result.get("options") or {}
    if name not in options:
        return None
    v = options[name]
    if isinstance(v, bool):
        return ("bool", v)
    if isinstance(v, (int, float)):
        return ("number", float(v))
    return ("string", v)


def option_text(value: Any) -> str:
    """kernels/variant.cpp to_string(OptionValue): true/false, the string, a number as %.17g."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return "%.17g" % float(value)
    return str(value)


def row_label(result: dict, siblings: Iterable[dict]) -> str:
    """What a fa-bench/2 row is called, exactly as bench/result.cpp ``row_label`` names it on
    the console: the variant, then what tells it from the ``siblings`` of the same variant and
    direction (``siblings`` may hold ``result`` itself): ``@<block_q>x<block_kv>`` when tiles
    differ, `` s<stages>``, `` wg<warpgroups>``, `` c<x>x<y>x<z>`` (these only for a row with a
    kernel_config), ``~<value>`` per option, in key order, whose value differs
    (``~<key>=<value>`` for numbers and bools), and `` bwd`` for a backward row.
    """
    return row_labels([result, *(s for s in siblings if s is not result)])[0]


def row_labels(results: list[dict]) -> list[str]:
    """:func:`row_label` of each of ``results`` among all of them, in one pass (a part of a row
    differs from its siblings' exactly when the group of its variant and direction holds two or
    more values of that part). fa-bench names rows among their configuration's rows; the
    reports name them among every row of the report (reports/data.py), so that one series keeps
    one name across configurations and files.
    """
    groups: dict[tuple, list[dict]] = {}
    for r in results:
        groups.setdefault((r["variant"], r.get("direction", "forward")), []).append(r)
    # per group: the distinct values of each part (tiles, stages, warpgroups, cluster, option)
    values: dict[tuple, dict[Any, set]] = {}
    for key, group in groups.items():
        parts: dict[Any, set] = {"tiles": set(), "stages": set(), "warpgroups": set(),
                                 "cluster": set()}
        names = {name for r in group for name in (r.get("options") or {})}
        for r in group:
            kc = _kernel_config(r)
            parts["tiles"].add((kc["block_q"], kc["block_kv"]))
            parts["stages"].add(kc["stages"])
            parts["warpgroups"].add(kc["warpgroups"])
            parts["cluster"].add(tuple(kc["cluster"]))
            for name in names:
                parts.setdefault(("option", name), set()).add(_option_value(r, name))
        values[key] = parts
    out = []
    for r in results:
        direction = r.get("direction", "forward")
        parts = values[(r["variant"], direction)]
        label = r["variant"]
        kc = r.get("kernel_config")
        if kc is not None:
            if len(parts["tiles"]) > 1:
                label += f"@{kc['block_q']}x{kc['block_kv']}"
            if len(parts["stages"]) > 1:
                label += f" s{kc['stages']}"
            if len(parts["warpgroups"]) > 1:
                label += f" wg{kc['warpgroups']}"
            if len(parts["cluster"]) > 1:
                x, y, z = kc["cluster"]
                label += f" c{x}x{y}x{z}"
        options = r.get("options") or {}
        # std::map<std::string, ...> order: the UTF-8 keys' byte order, i.e. code point order
        for name in sorted(options):
            if len(parts[("option", name)]) > 1:
                value = options[name]
                label += "~" + ("" if isinstance(value, str) else f"{name}=") + option_text(value)
        if direction == "backward":
            label += " bwd"
        out.append(label)
    return out


# --------------------------------------------------------------------------------------------
# Writing


def summarize(samples_ms: list[float]) -> dict:
    """Timing statistics exactly as profiler/stats.cpp computes them.

    Quantiles by linear interpolation between order statistics (type 7, numpy's default),
    mean summed in sorted order, stddev with n - 1 (0 for one sample),
    relative_iqr = (q3 - q1) / median (0 when median is 0).
    """
    v = sorted(float(x) for x in samples_ms)
    if not v:
        raise ValueError("summarize: no samples")
    n = len(v)

    def quantile(q: float) -> float:
        pos = q * (n - 1)
        lo = math.floor(pos)
        hi = min(lo + 1, n - 1)
        return v[lo] + (v[hi] - v[lo]) * (pos - lo)

    mean = 0.0
    for x in v:
        mean += x
    mean /= n
    ss = 0.0
    for x in v:
        ss += (x - mean) * (x - mean)
    stddev = math.sqrt(ss / (n - 1)) if n > 1 else 0.0
    median, q1, q3 = quantile(0.5), quantile(0.25), quantile(0.75)
    return {
        "median_ms": median,
        "q1_ms": q1,
        "q3_ms": q3,
        "min_ms": v[0],
        "max_ms": v[-1],
        "mean_ms": mean,
        "stddev_ms": stddev,
        "relative_iqr": (q3 - q1) / median if median > 0 else 0.0,
    }


def derive(
    model: dict,
    median_ms: float,
    peak_flops_per_s: float = 0.0,
    bandwidth_bytes_per_s: float = 0.0,
) -> dict:
    """The ``derived`` object from a model and a median time, as profiler/roofline.cpp places it.

    Roofs of 0 mean unknown: the roofline fields are then 0 and ``bound`` is "".
    """
    seconds = median_ms * 1e-3
    nbytes = model["bytes_read"] + model["bytes_written"]
    intensity = model["flops_matrix"] / nbytes if nbytes > 0 else 0.0
    attained = model["flops_matrix"] / seconds if seconds > 0 else 0.0
    attainable, fraction, bound = 0.0, 0.0, ""
    if peak_flops_per_s > 0 and bandwidth_bytes_per_s > 0:
        memory_roof = intensity * bandwidth_bytes_per_s
        attainable = min(peak_flops_per_s, memory_roof)
        bound = "memory" if memory_roof < peak_flops_per_s else "compute"
        fraction = attained / attainable if attainable > 0 else 0.0
    return {
        "tflops_convention": model["flops_convention"] / seconds / 1e12 if seconds > 0 else 0.0,
        "tflops_model": attained / 1e12,
        "effective_gbps": nbytes / seconds / 1e9 if seconds > 0 else 0.0,
        "arithmetic_intensity": intensity,
        "roofline_attainable_tflops": attainable / 1e12,
        "roofline_fraction": fraction,
        "bound": bound,
    }


def _git_revision() -> str:
    try:
        out = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"],
            cwd=Path(__file__).resolve().parent,
            capture_output=True,
            text=True,
            timeout=10,
            check=True,
        )
        return out.stdout.strip() or "unknown"
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def new_document(
    command_line: str,
    device: dict | None = None,
    settings: dict | None = None,
    ceilings: dict | None = None,
    tool_version: str = "0.1.0",
    version: str = SCHEMA_VERSION,
) -> dict:
    """An empty, complete document; append configs (see :func:`make_config`) to ``configs``.
    ``version``: "fa-bench/1", or "fa-bench/2" on (its rows made by ``make_result(version=...)``,
    its configurations by ``make_config(version=...)``: /3 on add the gpu, /4 on H_kv and N_kv,
    /5 page_size and kv_lengths).

    ``settings`` and ``ceilings`` are laid over defaults (roofs of 0 = unknown).
    """
    base_settings = {
        "seed": 1234,
        "warmup": 0,
        "repetitions": 0,
        "min_time_s": 0.0,
        "l2": "cold",
        "model_only": device is None,
        "inputs": "normal",
        "timing_engine": "python",
    }
    base_ceilings = {
        "source": "unknown",
        "dram_bytes_per_s": 0.0,
        "tensor_flops_per_s": {"bf16": 0.0, "fp16": 0.0},
    }
    if version not in UNDERSTOOD_VERSIONS:
        raise ValueError(f"new_document: unknown version {version!r}")
    return {
        "schema": version,
        "tool": {"name": "fa-bench", "version": tool_version, "git_revision": _git_revision()},
        "created_utc": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "command_line": command_line,
        "complete": True,
        "device": device,
        "no_gpu_reason": "" if device is not None else "no device recorded",
        "settings": {**base_settings, **(settings or {})},
        "ceilings": {**base_ceilings, **(ceilings or {})},
        "configs": [],
    }


_ABSENT = object()  # make_config: no such key (null is a value: no GPU, no lengths apart)


def make_config(
    *, B: int, H: int, N: int, d: int, causal: bool, dtype: str, seed: int, results=None,
    H_kv: int | None = None, N_kv: int | None = None, page_size: int | None = None,
    kv_lengths: Any = _ABSENT, gpu: Any = _ABSENT, version: str | None = None,
) -> dict:
    """One configuration (inputs N(0,1) from ``seed``) with its results, keys in fa-bench's
    order. ``H_kv``/``N_kv`` (K/V heads and length), ``page_size`` and ``kv_lengths`` (a list
    of B lengths, or None) and ``gpu`` ({"uuid", "name"} or None) are written when given; a
    ``version`` document's required ones are written in any case: fa-bench/4 on H_kv and N_kv
    (default H and N: square multi-head attention), fa-bench/5 page_size and kv_lengths
    (default 0 and None: K/V contiguous, every sequence N_kv long), fa-bench/3 on the gpu
    (default None: no GPU)."""
    if version in GPU_VERSIONS and gpu is _ABSENT:
        gpu = None
    if version in ("fa-bench/4", "fa-bench/5"):
        H_kv = H if H_kv is None else H_kv
        N_kv = N if N_kv is None else N_kv
    if version == "fa-bench/5":
        page_size = 0 if page_size is None else page_size
        kv_lengths = None if kv_lengths is _ABSENT else kv_lengths
    config: dict[str, Any] = {"B": B, "H": H}
    if H_kv is not None:
        config["H_kv"] = H_kv
    config["N"] = N
    if N_kv is not None:
        config["N_kv"] = N_kv
    if page_size is not None:
        config["page_size"] = page_size
    if kv_lengths is not _ABSENT:
        config["kv_lengths"] = list(kv_lengths) if kv_lengths is not None else None
    config.update(d=d, causal=causal, dtype=dtype, seed=seed)
    if gpu is not _ABSENT:
        config["gpu"] = gpu
    config["results"] = list(results or [])
    return config


def make_result(
    variant: str,
    *,
    algorithm: str,
    status: str,
    reason: str = "",
    peer: bool = False,
    tiles: dict | None = None,
    verification: dict | None = None,
    samples_ms: list[float] | None = None,
    model: dict | None = None,
    derived: dict | None = None,
    l2: str = "cold",
    warmup: int = 0,
    launch: str | None = None,
    version: str = SCHEMA_VERSION,
    direction: str = "forward",
    kernel_config: dict | None = None,
    options: dict | None = None,
    default_config: bool | None = None,
    default_options: bool | None = None,
) -> dict:
    """One result of a ``version`` document. fa-bench/2 rows also get ``direction``,
    ``kernel_config`` (null: a configuration we do not choose, e.g. a peer's) and ``options``
    ({} when none); fa-bench/1 rows get them only when given; ``default_config`` (whether
    kernel_config is the variant's default) and ``default_options`` (whether every option value
    is the shape's default) are written when given. ``samples_ms`` (required exactly when status is "ok") becomes ``timing``
    with statistics computed as the C++ side does (SM clocks -1 = unknown) and, when given,
    ``launch`` ("stream" | "graph"; absent means stream). ``model`` keys
    not given are 0 (not modelled), ``terms`` []. ``derived`` defaults, for status "ok", to
    :func:`derive` with unknown roofs.
    Raises SchemaError when the result breaks a schema rule.
    """
    timing = None
    if samples_ms is not None:
        samples = [float(x) for x in samples_ms]
        timing = {
            "l2": l2,
            **({"launch": launch} if launch is not None else {}),
            "warmup": int(warmup),
            "samples_ms": samples,
            **(summarize(samples) if samples else {"median_ms": 0.0}),
            "sm_clock_mhz": {"before": -1, "after": -1},
        }
    # The C++ reader also requires flops_nonmatrix and bytes_asymptotic: 0 = not modelled.
    model = {
        **{key: 0.0 for key in MODEL_NUMBERS},
        "flops_nonmatrix": 0.0,
        "bytes_asymptotic": 0.0,
        "terms": [],
        **(model or {}),
    }
    if derived is None and status == "ok" and timing is not None:
        derived = derive(model, timing["median_ms"])
    result = {
        "variant": variant,
        "algorithm": algorithm,
        "peer": peer,
        "status": status,
        "reason": reason,
        "tiles": dict(tiles) if tiles is not None else {"block_q": 0, "block_kv": 0},
        **({"direction": direction, "kernel_config": kernel_config, "options": dict(options or {})}
           if version != "fa-bench/1" or kernel_config is not None or options is not None
           else {}),
        **({"default_config": default_config} if default_config is not None else {}),
        **({"default_options": default_options} if default_options is not None else {}),
        "verification": verification,
        "timing": timing,
        "model": model,
        "derived": derived,
    }
    from reports import json_schema

    rules = ("result",) if version == "fa-bench/1" else ("result", "result_v2")
    found = json_schema.problems(result, rules)
    if found:
        path, words = found[0]
        raise SchemaError("make_result", f"{variant}.{path}" if path else variant, words)
    return result


def write_results(doc: dict, path: str | os.PathLike) -> None:
    """Validate ``doc`` and write it to ``path`` atomically (temp file + os.replace)."""
    target = Path(path)
    validate(doc, source=os.fspath(path))
    text = json.dumps(doc, indent=1, allow_nan=False) + "\n"
    directory = target.parent
    directory.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=directory)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)
        os.replace(tmp, target)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise


# --------------------------------------------------------------------------------------------
# Reports


def rows(doc: dict) -> list[dict]:
    """One flat dict per (config, result): the config's fields, the result's fields, and
    shortcuts (None where absent): median_ms, relative_iqr, tflops_convention, tflops_model,
    effective_gbps, max_abs_error, passed, plus config_index and result_index, and ``label``:
    the row's name as fa-bench's console shows it (:func:`row_label` among the configuration's
    rows; a fa-bench/1 file's ``variant`` already is that name). ``variant`` stays the file's.
    ``gpu_uuid`` and ``gpu_name``: the GPU the row ran on (fa-bench/3 on: its configuration's
    ``gpu``; older files: the file's ``device``), None without one. ``H_kv`` and ``N_kv``: the
    K/V heads and length, H and N in files before fa-bench/4 (:func:`kv_shape`). ``page_size``
    and ``kv_lengths``: the K/V cache's page rows (0: contiguous) and each sequence's K/V length
    (a tuple, or None: N_kv each), 0 and None in files before fa-bench/5 (:func:`kv_cache`).
    ``launch``: how the row's timed samples were enqueued (``timing.launch``: "stream" or
    "graph"; "stream" where the file does not say), None for a row without timing.
    """
    version = doc.get("schema")
    v1 = version == "fa-bench/1"
    out = []
    for ci, config in enumerate(doc["configs"]):
        cfields = {k: v for k, v in config.items() if k != "results"}
        cfields["H_kv"], cfields["N_kv"] = kv_shape(config, version)
        cfields["page_size"], cfields["kv_lengths"] = kv_cache(config, version)
        labels = ([r["variant"] for r in config["results"]] if v1
                  else row_labels(config["results"]))
        for ri, result in enumerate(config["results"]):
            timing = result.get("timing") or {}
            derived = result.get("derived") or {}
            verification = result.get("verification") or {}
            row = {"config_index": ci, "result_index": ri, **cfields, **result}
            gpu = config.get("gpu") or doc.get("device") or {}
            row.update(
                gpu_uuid=gpu.get("uuid"),
                gpu_name=gpu.get("name"),
                label=labels[ri],
                median_ms=timing.get("median_ms"),
                launch=timing.get("launch", "stream") if timing else None,
                relative_iqr=timing.get("relative_iqr"),
                tflops_convention=derived.get("tflops_convention"),
                tflops_model=derived.get("tflops_model"),
                effective_gbps=derived.get("effective_gbps"),
                max_abs_error=verification.get("max_abs_error"),
                passed=verification.get("passed"),
            )
            out.append(row)
    return out
