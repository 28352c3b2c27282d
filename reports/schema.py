"""Reader, validator and writer for fa-bench result files, schemas ``fa-bench/2`` and ``/1``.

The one definition of the file is ``schema/fa-bench-result.schema.json`` (JSON Schema 2020-12,
explained in ``docs/results-schema.md``); the C++ side (``bench/result_json.cpp``) writes and
reads the same documents. This module checks the same rules by hand, standard library only, to
name the file and key of a problem in plain words; tests/python/test_json_schema.py holds both
to the same verdict on the same documents (``reports/json_schema.py`` runs the JSON Schema).

Every problem is reported as a :class:`SchemaError` whose message reads
``"<file>: <key path>: <problem>"``, e.g.
``"r.json: configs[2].results[0].status: expected one of ok|failed|..., got 'bad'"``.
"""

from __future__ import annotations

import datetime
import json
import math
import os
import re
import subprocess
import tempfile
from pathlib import Path
from typing import Any, Iterable

UNDERSTOOD_VERSIONS = ("fa-bench/1", "fa-bench/2", "fa-bench/3")
# What new_document() writes. fa-bench/1 until the C++ reader reads fa-bench/2 (issue 14: the
# C++ side moves to /2 with its vocabulary; ctest has the C++ reader read this writer's output);
# make_result()/new_document() write /2 when asked.
SCHEMA_VERSION = "fa-bench/2"

DTYPES = ("bf16", "fp16")
ALGORITHMS = ("standard", "fa1", "fa2", "fp8")  # IO patterns the C++ IO model knows
STATUSES = ("ok", "failed", "skipped", "unsupported", "error", "model_only", "interrupted")
DIRECTIONS = ("forward", "backward")
BLOCK_ORDERS = ("blocks", "heads", "")
CONFIG_KEY = ("B", "H", "N", "d", "causal", "dtype")  # with the GPU: what makes a configuration unique
L2_MODES = ("cold", "warm")
INPUTS = ("normal", "outliers", "uniform", "heavy")  # --inputs (kernels/common/fill.hpp)
DEVICE_REQUIRED = ("index", "name", "uuid", "compute_capability", "sm_count", "memory_bytes",
                   "l2_bytes")
PLACEMENT_BASES = ("counters", "compulsory")
PLACEMENT_BOUNDS = ("compute", "dram", "l2")
OLD_BOUNDS = ("memory", "compute", "")  # derived.bound / measured.bound of older files
METRICS = ("row_ratio", "max_abs_error", "rmse")
COUNTER_STATUSES = ("ok", "unavailable", "error", "skipped")
MODEL_NUMBERS = (
    "flops_matrix",
    "flops_convention",
    "flops_nonmatrix",
    "bytes_read",
    "bytes_written",
    "bytes_compulsory",
    "bytes_asymptotic",
)
VERIFICATION_REQUIRED = ("passed", "all_finite", "nonfinite_count", "max_abs_error", "rmse",
                         "baseline_max_abs_error", "tolerance", "rows_checked", "heads_checked")
ERROR_FIGURES = ("max_abs_error", "rmse", "baseline_max_abs_error", "baseline_rmse", "tolerance",
                 "lse_max_abs_error", "worst_row_ratio", "lse_worst_row_ratio", "relative_rmse",
                 "baseline_relative_rmse")
TIMES = ("median_ms", "q1_ms", "q3_ms", "min_ms", "max_ms", "mean_ms")
DERIVED_NUMBERS = ("tflops_convention", "tflops_model", "effective_gbps", "arithmetic_intensity")
MEASURED_NUMBERS = ("dram_bytes", "dram_over_model", "dram_over_compulsory", "l2_bytes",
                    "l2_over_model", "tensor_flops", "tensor_over_model", "fp32_flops",
                    "intensity_dram", "intensity_l2")
# the gate's --calibrate (docs/ci-gates.md): /2 keys rows by their spec, /1 by their old name
CALIBRATION_SCHEMA = "fa-bench-gate-calibration/2"
CALIBRATION_SCHEMAS = ("fa-bench-gate-calibration/1", CALIBRATION_SCHEMA)
CALIBRATION_METRICS = ("time", "dram_bytes", "l2_bytes", "tensor_flops", "instructions")


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
    doc = read_document(path)
    # NaN and Infinity are refused while parsing; a literal too large for a double (1e999)
    # parses to inf. A quick walk finds one; the walk that names its key path runs only then.
    v = _Validator(os.fspath(path), check_finite=_has_non_finite(doc))
    v.document(doc)
    return doc


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


def _has_non_finite(value: Any) -> bool:
    """Whether a parsed document holds inf or nan anywhere (fast: no key paths)."""
    if type(value) is float:
        return value - value != 0
    if type(value) is not dict and type(value) is not list:
        return False
    stack = [value]
    while stack:
        item = stack.pop()
        values = item.values() if type(item) is dict else item
        for v in values:
            t = type(v)
            if t is float:
                if v - v != 0:
                    return True
            elif t is dict or t is list:
                stack.append(v)
    return False


class _NonStandardConstant(Exception):
    pass


def _refuse_constant(name: str) -> Any:
    # Python's json accepts NaN/Infinity; strict JSON readers (the C++ side) do not.
    raise _NonStandardConstant(name)


def validate(doc: Any, source: str | None = "<document>") -> dict:
    """Check ``doc`` against its schema (fa-bench/2 or /1); returns it unchanged, raises
    SchemaError."""
    v = _Validator(source)
    v.document(doc)
    return doc


def _join(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


def _show(value: Any) -> str:
    """A value as a message shows it: JSON spelling for null and booleans, short."""
    if value is None or isinstance(value, bool):
        return json.dumps(value)
    if isinstance(value, (list, tuple)):
        return "a list"
    if isinstance(value, dict):
        return "an object"
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _got(value: Any) -> str:
    """"string 'x'", "number 1.5", "null", "an object": what was found instead."""
    shown = _show(value)
    kind = _kind(value)
    return shown if kind in ("null", "boolean", "list", "object") else f"{kind} {shown}"


def _kind(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, (int, float)):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, (list, tuple)):
        return "list"
    if isinstance(value, dict):
        return "object"
    return type(value).__name__


class _Validator:
    def __init__(self, source: str | None, check_finite: bool = True,
                 version: str = SCHEMA_VERSION):
        self.source = source
        self.check_finite = check_finite
        self.version = version  # set from the document's "schema"

    def fail(self, path: str, problem: str) -> None:
        raise SchemaError(self.source, path, problem)

    # -- primitive checks; each returns the value ---------------------------------------------

    def get(self, obj: dict, path: str, key: str) -> Any:
        if key not in obj:
            self.fail(_join(path, key), "missing required key")
        return obj[key]

    def obj(self, value: Any, path: str, nullable: bool = False) -> dict | None:
        if value is None and nullable:
            return None
        if not isinstance(value, dict):
            want = "an object or null" if nullable else "an object"
            self.fail(path or "document", f"expected {want}, got {_got(value)}")
        return value

    def lst(self, value: Any, path: str) -> list:
        if not isinstance(value, list):
            self.fail(path, f"expected a list, got {_got(value)}")
        return value

    def string(self, value: Any, path: str) -> str:
        if not isinstance(value, str):
            self.fail(path, f"expected a string, got {_got(value)}")
        return value

    def boolean(self, value: Any, path: str) -> bool:
        if not isinstance(value, bool):
            self.fail(path, f"expected true or false, got {_got(value)}")
        return value

    def integer(self, value: Any, path: str, minimum: int | None = None) -> int:
        if isinstance(value, bool) or not isinstance(value, int):
            self.fail(path, f"expected an integer, got {_got(value)}")
        if minimum is not None and value < minimum:
            what = "a positive integer" if minimum == 1 else f"an integer >= {minimum}"
            self.fail(path, f"expected {what}, got {value}")
        return value

    def number(self, value: Any, path: str) -> float:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            self.fail(path, f"expected a number, got {_got(value)}")
        if not math.isfinite(value):
            self.fail(path, f"expected a finite number, got {value}")
        return value

    def positive(self, value: Any, path: str, what: str = "a positive number") -> float:
        self.number(value, path)
        if value <= 0:
            self.fail(path, f"expected {what}, got {value}")
        return value

    def non_negative(self, value: Any, path: str, what: str = "a number >= 0") -> float:
        self.number(value, path)
        if value < 0:
            self.fail(path, f"expected {what}, got {value}")
        return value

    def numbers_non_negative(self, obj: dict, path: str, what: str) -> None:
        """Every number directly in ``obj`` is >= 0 (byte and FLOP counts, errors, ratios)."""
        for key, value in obj.items():
            if (type(value) is float or type(value) is int) and not value >= 0:
                self.non_negative(value, _join(path, key), what)  # fails, naming the key

    def one_of(self, value: Any, path: str, allowed: tuple[str, ...]) -> str:
        if not isinstance(value, str) or value not in allowed:
            self.fail(path, f"expected one of {'|'.join(allowed)}, got {_show(value)}")
        return value

    def finite_everywhere(self, value: Any, path: str) -> None:
        # JSON has no NaN or Infinity: a document carrying one cannot be written or read back.
        if isinstance(value, float) and not math.isfinite(value):
            self.fail(path, f"non-finite number {value} cannot be stored in JSON (use null)")
        elif isinstance(value, dict):
            for k, item in value.items():
                if not isinstance(k, str):
                    self.fail(path or "document", f"object key {_show(k)} is not a string")
                self.finite_everywhere(item, _join(path, k))
        elif isinstance(value, (list, tuple)):
            if all(type(item) is int or (type(item) is float and math.isfinite(item))
                   for item in value):
                return  # fast path: a list of finite numbers (timing samples)
            for i, item in enumerate(value):
                self.finite_everywhere(item, f"{path}[{i}]")

    # -- structure ------------------------------------------------------------------------------

    def document(self, doc: Any) -> None:
        self.obj(doc, "")
        if "schema" not in doc:
            self.fail("schema", f"missing; this reader understands {', '.join(UNDERSTOOD_VERSIONS)}")
        if doc["schema"] not in UNDERSTOOD_VERSIONS:
            self.fail(
                "schema",
                f"unknown version {_show(doc['schema'])}; "
                f"this reader understands {', '.join(UNDERSTOOD_VERSIONS)}",
            )
        self.version = doc["schema"]
        if self.check_finite:
            self.finite_everywhere(doc, "")  # names the key path of the first non-finite number

        tool = self.obj(self.get(doc, "", "tool"), "tool")
        for key in ("name", "version", "git_revision"):
            self.string(self.get(tool, "tool", key), f"tool.{key}")
        self.string(self.get(doc, "", "created_utc"), "created_utc")
        self.string(self.get(doc, "", "command_line"), "command_line")
        self.boolean(self.get(doc, "", "complete"), "complete")

        device = self.obj(self.get(doc, "", "device"), "device", nullable=True)
        if device is not None:
            self.device(device, "device")
        if "no_gpu_reason" in doc:
            self.string(doc["no_gpu_reason"], "no_gpu_reason")

        self.settings(self.obj(self.get(doc, "", "settings"), "settings"), "settings")
        self.ceilings(self.obj(self.get(doc, "", "ceilings"), "ceilings"), "ceilings")

        if self.version == "fa-bench/3":
            if "devices" in doc:
                for i, dev in enumerate(self.lst(doc["devices"], "devices")):
                    self.device(self.obj(dev, f"devices[{i}]"), f"devices[{i}]")
                    self.ceilings(self.obj(self.get(dev, f"devices[{i}]", "ceilings"),
                                           f"devices[{i}].ceilings"), f"devices[{i}].ceilings")
            if "shard" in doc:
                shard = self.obj(doc["shard"], "shard")
                index = self.count(self.get(shard, "shard", "index"), "shard.index")
                count = self.positive_count(self.get(shard, "shard", "count"), "shard.count")
                if index >= count:
                    self.fail("shard.index", f"expected < count ({count}), got {index}")

        configs = self.lst(self.get(doc, "", "configs"), "configs")
        seen: dict[tuple, int] = {}
        for i, config in enumerate(configs):
            self.config(config, f"configs[{i}]")
            key = config_key(config)
            if key in seen:
                what = ", ".join(f"{k}={json.dumps(config[k])}" for k in CONFIG_KEY)
                if config.get("gpu"):
                    what += f", gpu {config['gpu']['uuid']}"
                self.fail(f"configs[{i}]", f"duplicate configuration ({what}; also at "
                          f"configs[{seen[key]}])")
            seen[key] = i
        if "gate_calibration" in doc:
            self.gate_calibration(doc["gate_calibration"], "gate_calibration")

    # -- the objects, each as schema/fa-bench-result.schema.json defines it ---------------------

    def keys(self, obj: dict, path: str, spec: dict, required: tuple = ()) -> None:
        """Checks each key of ``spec`` (key -> check(value, path)) present in ``obj``; the keys
        in ``required`` must be there."""
        for key in required:
            self.get(obj, path, key)
        for key, check in spec.items():
            if key in obj:
                check(obj[key], _join(path, key))

    def count(self, value: Any, path: str) -> int:
        return self.integer(value, path, minimum=0)

    def positive_count(self, value: Any, path: str) -> int:
        return self.integer(value, path, minimum=1)

    def clock(self, value: Any, path: str) -> int:
        return self.integer(value, path, minimum=-1)

    def error_figure(self, value: Any, path: str) -> None:
        """An error, ratio or tolerance: a number >= 0, or null (the value was not finite)."""
        if value is not None:
            self.non_negative(value, path, "an error or count >= 0")

    def enum(self, allowed: tuple[str, ...]):
        return lambda value, path: self.one_of(value, path, allowed)

    def device(self, device: dict, path: str) -> None:
        self.keys(device, path, {
            "index": self.count, "name": self.string, "uuid": self.string,
            "pci_bus_id": self.string, "compute_capability": self.compute_capability,
            "sm_count": self.positive_count, "memory_bytes": self.count, "l2_bytes": self.count,
            "smem_per_sm_bytes": self.count, "smem_per_block_optin_bytes": self.count,
            "memory_bus_bits": self.count, "sm_clock_max_mhz": self.clock,
            "mem_clock_max_mhz": self.clock, "driver_version": self.string,
            "cuda_driver_version": self.count, "cuda_runtime_version": self.count,
        }, DEVICE_REQUIRED)

    def compute_capability(self, value: Any, path: str) -> None:
        cc = self.string(value, path)
        if not re.fullmatch(r"[0-9]+\.[0-9]+", cc):
            self.fail(path, f"expected \"major.minor\", got {cc!r}")

    def settings(self, s: dict, path: str) -> None:
        self.keys(s, path, {
            "seed": self.count, "warmup": self.count, "repetitions": self.count,
            "min_time_s": self.non_negative, "l2": self.enum(L2_MODES),
            "model_only": self.boolean, "inputs": self.enum(INPUTS),
            "fp8_prequantized": self.boolean, "timing_engine": self.string,
            "model_smem_per_sm_bytes": self.count,
        }, ("seed", "warmup", "repetitions", "min_time_s", "l2", "model_only"))

    def ceilings(self, c: dict, path: str) -> None:
        def peaks(value: Any, p: str) -> None:
            self.keys(self.obj(value, p), p, dict.fromkeys(("bf16", "fp16", "fp8"),
                                                            self.non_negative))

        def datasheet(value: Any, p: str) -> None:
            self.keys(self.obj(value, p), p, dict.fromkeys(
                ("dram_bytes_per_s", "tensor_flops_per_s_bf16", "tensor_flops_per_s_fp8"),
                self.non_negative))

        self.keys(c, path, {
            "source": self.string, "dram_bytes_per_s": self.non_negative,
            "l2_bytes_per_s": self.non_negative, "fp32_flops_per_s": self.non_negative,
            "tensor_flops_per_s": peaks, "datasheet": datasheet,
        }, ("source", "dram_bytes_per_s", "tensor_flops_per_s"))

    def gate_calibration(self, cal: Any, path: str) -> None:
        self.obj(cal, path)
        if self.get(cal, path, "schema") not in CALIBRATION_SCHEMAS:
            self.fail(_join(path, "schema"), f"expected one of {', '.join(CALIBRATION_SCHEMAS)}, got "
                      f"{_show(cal['schema'])}")
        if "rule" in cal:
            self.string(cal["rule"], _join(path, "rule"))
        if "runs" in cal:
            for i, run in enumerate(self.lst(cal["runs"], _join(path, "runs"))):
                self.string(run, f"{_join(path, 'runs')}[{i}]")
        seen: dict[str, int] = {}
        for i, row in enumerate(self.lst(self.get(cal, path, "rows"), _join(path, "rows"))):
            rp = f"{_join(path, 'rows')}[{i}]"
            self.obj(row, rp)
            key = self.string(self.get(row, rp, "row"), _join(rp, "row"))
            if not key:
                self.fail(_join(rp, "row"), "must not be empty")
            self.calibration_metrics(self.get(row, rp, "tolerances"), _join(rp, "tolerances"))
            if "observed" in row:
                self.calibration_metrics(row["observed"], _join(rp, "observed"))
            if key in seen:
                self.fail(_join(rp, "row"), f"row {key!r} appears twice (also at rows[{seen[key]}])")
            seen[key] = i

    def calibration_metrics(self, m: Any, path: str) -> None:
        for metric, value in self.obj(m, path).items():
            p = _join(path, metric)
            self.one_of(metric, p, CALIBRATION_METRICS)
            self.number(value, p)
            if not 0 <= value < 10:
                self.fail(p, f"expected a fraction in [0, 10), got {value}")

    def config(self, config: Any, path: str) -> None:
        self.obj(config, path)
        for key in ("B", "H", "N", "d"):
            self.integer(self.get(config, path, key), _join(path, key), minimum=1)
        self.boolean(self.get(config, path, "causal"), _join(path, "causal"))
        self.one_of(self.get(config, path, "dtype"), _join(path, "dtype"), DTYPES)
        self.count(self.get(config, path, "seed"), _join(path, "seed"))
        if self.version == "fa-bench/3" or "gpu" in config:
            gpu = self.obj(self.get(config, path, "gpu"), _join(path, "gpu"), nullable=True)
            if gpu is not None:
                uuid = self.string(self.get(gpu, _join(path, "gpu"), "uuid"), _join(path, "gpu.uuid"))
                if not uuid:
                    self.fail(_join(path, "gpu.uuid"), "must not be empty")
                self.string(self.get(gpu, _join(path, "gpu"), "name"), _join(path, "gpu.name"))
        results = self.lst(self.get(config, path, "results"), _join(path, "results"))
        seen: dict[Any, int] = {}
        for j, result in enumerate(results):
            rpath = f"{path}.results[{j}]"
            self.result(result, rpath)
            key = row_identity(result, self.version)
            if key in seen:
                name = result["variant"]
                what = "" if self.version == "fa-bench/1" else \
                    " with the same direction, kernel_config and options"
                self.fail(
                    _join(rpath, "variant"),
                    f"variant {name!r}{what} appears twice in this configuration "
                    f"(also at results[{seen[key]}])",
                )
            seen[key] = j

    def result(self, r: Any, path: str) -> None:
        self.obj(r, path)

        def p(key: str) -> str:
            return _join(path, key)

        self.string(self.get(r, path, "variant"), p("variant"))
        if not r["variant"]:
            self.fail(p("variant"), "must not be empty")
        self.one_of(self.get(r, path, "algorithm"), p("algorithm"), ALGORITHMS)
        self.boolean(self.get(r, path, "peer"), p("peer"))
        status = self.one_of(self.get(r, path, "status"), p("status"), STATUSES)
        self.string(self.get(r, path, "reason"), p("reason"))

        tiles = self.obj(self.get(r, path, "tiles"), p("tiles"))
        for key in ("block_q", "block_kv"):
            self.integer(self.get(tiles, p("tiles"), key), f"{p('tiles')}.{key}", minimum=0)
        if "block_order" in r:
            self.one_of(r["block_order"], p("block_order"), BLOCK_ORDERS)

        # fa-bench/2: every row says its direction, kernel configuration and options.
        if self.version != "fa-bench/1":
            for key in ("direction", "kernel_config", "options"):
                self.get(r, path, key)
        if "direction" in r:
            self.one_of(r["direction"], p("direction"), DIRECTIONS)
        if r.get("kernel_config") is not None:
            self.kernel_config(r["kernel_config"], p("kernel_config"))
        if "default_config" in r:
            self.boolean(r["default_config"], p("default_config"))
        if "default_options" in r:
            self.boolean(r["default_options"], p("default_options"))
        if "options" in r:
            for name, value in self.obj(r["options"], p("options")).items():
                if not isinstance(value, (str, int, float)):
                    self.fail(_join(p("options"), name),
                              f"expected a string, number or boolean, got {_got(value)}")

        verification = self.obj(self.get(r, path, "verification"), p("verification"), nullable=True)
        if verification is not None:
            self.verification(verification, p("verification"))
            passed = verification["passed"]
            if passed and status == "failed":
                self.fail(p("verification.passed"), "is true but status is 'failed'")
            if not passed and status != "failed":
                self.fail(p("verification.passed"), f"is false but status is {status!r}, not 'failed'")
        elif status == "failed":
            self.fail(p("verification"), "is null but status is 'failed' (failed means verified and wrong)")

        timing = self.obj(self.get(r, path, "timing"), p("timing"), nullable=True)
        if timing is not None:
            self.timing(timing, p("timing"))
        if (timing is not None) != (status == "ok"):
            self.fail(
                p("timing"),
                f"must be non-null exactly when status is 'ok' (status is {status!r}, "
                f"timing is {'null' if timing is None else 'present'})",
            )

        self.model(self.obj(self.get(r, path, "model"), p("model")), p("model"))

        counters = self.obj(r.get("counters"), p("counters"), nullable=True)
        if counters is not None:
            self.counters(counters, p("counters"))
        measured = self.obj(r.get("measured"), p("measured"), nullable=True)
        if measured is not None:
            self.keys(measured, p("measured"), {**dict.fromkeys(MEASURED_NUMBERS, self.nn_measured),
                                                "roofline_fraction": self.nn_measured,
                                                "bound": self.enum(OLD_BOUNDS)}, MEASURED_NUMBERS)
            self.numbers_non_negative(measured, p("measured"), "a measured value >= 0")

        derived = self.obj(self.get(r, path, "derived"), p("derived"), nullable=True)
        if (derived is not None) != (status == "ok"):
            self.fail(
                p("derived"),
                f"must be non-null exactly when status is 'ok' (status is {status!r}, "
                f"derived is {'null' if derived is None else 'present'})",
            )
        if derived is not None:
            self.derived(derived, p("derived"))

        if r.get("placement") is not None:
            if timing is None:
                self.fail(p("placement"), "is present but the row has no timing")
            self.placement(r["placement"], p("placement"))

    def nn_value(self, value: Any, path: str) -> None:
        self.non_negative(value, path, "a value >= 0")

    def nn_measured(self, value: Any, path: str) -> None:
        self.non_negative(value, path, "a measured value >= 0")

    def nn_count(self, value: Any, path: str) -> None:
        self.non_negative(value, path, "a count >= 0")

    def kernel_config(self, kc: Any, path: str) -> None:
        self.obj(kc, path)

        def cluster(value: Any, p: str) -> None:
            dims = self.lst(value, p)
            if len(dims) != 3:
                self.fail(p, f"expected 3 integers [x, y, z], got {len(dims)}")
            for i, n in enumerate(dims):
                self.positive_count(n, f"{p}[{i}]")

        self.keys(kc, path, {"block_q": self.positive_count, "block_kv": self.positive_count,
                             "stages": self.positive_count, "warpgroups": self.count,
                             "cluster": cluster},
                  ("block_q", "block_kv", "stages", "warpgroups", "cluster"))

    def verification(self, v: dict, path: str) -> None:
        self.keys(v, path, {
            "metric": self.enum(METRICS), "passed": self.boolean, "all_finite": self.boolean,
            "nonfinite_count": self.count, "rows_checked": self.count,
            "heads_checked": self.count, "worst_head": self.clock, "worst_row": self.clock,
            "inputs_unchanged": self.boolean,
            **dict.fromkeys(ERROR_FIGURES, self.error_figure),
        }, VERIFICATION_REQUIRED)
        # unknown keys: a number there is >= 0 (worst_head/worst_row are -1 when no row checked)
        self.numbers_non_negative({k: x for k, x in v.items() if k not in ("worst_head", "worst_row")},
                                  path, "an error or count >= 0")

    def timing(self, timing: dict, path: str) -> None:
        def samples(value: Any, p: str) -> None:
            xs = self.lst(value, p)
            if not xs:
                self.fail(p, "is empty (a timed result has at least one sample)")
            # fast path (hundreds of samples per row, 50,000 rows): one pass, no call per sample
            if not (set(map(type, xs)) <= {float, int} and 0 < min(xs) and max(xs) < math.inf):
                for k, x in enumerate(xs):
                    self.positive(x, f"{p}[{k}]", "a positive time")

        def time(value: Any, p: str) -> None:
            self.positive(value, p, "a positive time")

        def clocks(value: Any, p: str) -> None:
            self.keys(self.obj(value, p), p, {"before": self.clock, "after": self.clock},
                      ("before", "after"))

        spec = {"l2": self.enum(L2_MODES), "warmup": self.count, "samples_ms": samples,
                **dict.fromkeys(TIMES, time), "stddev_ms": self.non_negative,
                "relative_iqr": self.non_negative, "sm_clock_mhz": clocks}
        # samples and the median first: their messages are the ones readers rely on
        self.keys(timing, path, spec, ("samples_ms", "median_ms", *spec))

    def model(self, model: dict, path: str) -> None:
        def terms(value: Any, p: str) -> None:
            for i, term in enumerate(self.lst(value, p)):
                tp = f"{p}[{i}]"
                self.keys(self.obj(term, tp), tp, {"name": self.string, "write": self.boolean,
                                                   "bytes": self.nn_count},
                          ("name", "write", "bytes"))

        self.keys(model, path, {**dict.fromkeys(MODEL_NUMBERS, self.nn_count),
                                "onchip_budget_bytes": self.nn_count, "terms": terms},
                  MODEL_NUMBERS)
        self.numbers_non_negative(model, path, "a count >= 0")

    def counters(self, c: dict, path: str) -> None:
        def values(value: Any, p: str) -> None:
            for name, x in self.obj(value, p).items():
                self.non_negative(x, _join(p, name), "a counter value >= 0")

        def kernels(value: Any, p: str) -> None:
            for i, k in enumerate(self.lst(value, p)):
                kp = f"{p}[{i}]"
                self.keys(self.obj(k, kp), kp, {"name": self.string, "values": values},
                          ("name", "values"))

        self.keys(c, path, {"status": self.enum(COUNTER_STATUSES), "reason": self.string,
                            "collect_seconds": self.non_negative, "values": values,
                            "kernels": kernels, "kernels_reason": self.string},
                  ("status", "reason", "values"))

    def derived(self, d: dict, path: str) -> None:
        self.keys(d, path, {**dict.fromkeys(DERIVED_NUMBERS, self.nn_value),
                            "roofline_attainable_tflops": self.nn_value,
                            "roofline_fraction": self.nn_value, "bound": self.enum(OLD_BOUNDS),
                            "best_peer": self.string, "speed_vs_best_peer": self.nn_value},
                  DERIVED_NUMBERS)
        if "best_peer" in d and "speed_vs_best_peer" not in d:
            self.fail(_join(path, "speed_vs_best_peer"), "missing (best_peer is set)")
        self.numbers_non_negative(d, path, "a value >= 0")

    def placement(self, pl: Any, path: str) -> None:
        self.obj(pl, path)
        basis = self.one_of(self.get(pl, path, "basis"), _join(path, "basis"), PLACEMENT_BASES)
        self.positive(self.get(pl, path, "intensity_dram"), _join(path, "intensity_dram"))
        l2 = self.get(pl, path, "intensity_l2")
        if l2 is not None:
            self.positive(l2, _join(path, "intensity_l2"), "a positive number or null")
            if basis == "compulsory":
                self.fail(_join(path, "intensity_l2"),
                          "must be null when basis is 'compulsory' (no counters)")
        self.positive(self.get(pl, path, "attainable_tflops"), _join(path, "attainable_tflops"))
        self.non_negative(self.get(pl, path, "fraction"), _join(path, "fraction"))
        bound = self.one_of(self.get(pl, path, "bound"), _join(path, "bound"), PLACEMENT_BOUNDS)
        if bound == "l2" and l2 is None:
            self.fail(_join(path, "bound"), "is 'l2' but intensity_l2 is null")


def config_key(config: dict) -> tuple:
    """What makes a configuration unique in a file: its shape (CONFIG_KEY) and, fa-bench/3, the
    UUID of the GPU it ran on (one file may hold the same shape on several GPUs)."""
    gpu = config.get("gpu")
    return (*(config[k] for k in CONFIG_KEY), gpu.get("uuid") if isinstance(gpu, dict) else None)


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


def _option_text(value: Any) -> str:
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
                label += "~" + ("" if isinstance(value, str) else f"{name}=") + _option_text(value)
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
    ``version``: "fa-bench/1", or "fa-bench/2" (its rows made by ``make_result(version=...)``).

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


def make_config(
    *, B: int, H: int, N: int, d: int, causal: bool, dtype: str, seed: int, results=None
) -> dict:
    """One configuration (inputs N(0,1) from ``seed``) with its results."""
    return {
        "B": B,
        "H": H,
        "N": N,
        "d": d,
        "causal": causal,
        "dtype": dtype,
        "seed": seed,
        "results": list(results or []),
    }


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
    with statistics computed as the C++ side does (SM clocks -1 = unknown). ``model`` keys
    not given are 0 (not modelled), ``terms`` []. ``derived`` defaults, for status "ok", to
    :func:`derive` with unknown roofs.
    Raises SchemaError when the result breaks a schema rule.
    """
    timing = None
    if samples_ms is not None:
        samples = [float(x) for x in samples_ms]
        timing = {
            "l2": l2,
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
    v = _Validator("make_result", version=version)
    v.finite_everywhere(result, variant)
    v.result(result, variant)
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
    ``gpu_uuid`` and ``gpu_name``: the GPU the row ran on (fa-bench/3: its configuration's
    ``gpu``; older files: the file's ``device``), None without one.
    """
    v1 = doc.get("schema") == "fa-bench/1"
    out = []
    for ci, config in enumerate(doc["configs"]):
        cfields = {k: v for k, v in config.items() if k != "results"}
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
                relative_iqr=timing.get("relative_iqr"),
                tflops_convention=derived.get("tflops_convention"),
                tflops_model=derived.get("tflops_model"),
                effective_gbps=derived.get("effective_gbps"),
                max_abs_error=verification.get("max_abs_error"),
                passed=verification.get("passed"),
            )
            out.append(row)
    return out
