"""Checks result documents against ``schema/fa-bench-result.schema.json``, the one definition of
the fa-bench result file, with the pinned ``jsonschema`` package (reports/requirements.txt).

JSON Schema as written there, plus what JSON Schema cannot say and the readers check:
- an integer is written as one (``5``, not ``5.0``): the C++ and Python readers refuse ``5.0``
  where an integer belongs, so "integer" here means a JSON integer literal;
- a number is finite (a literal such as ``1e999`` parses to inf and is refused);
- a configuration (B, H, N, d, causal, dtype; fa-bench/3: and gpu.uuid) appears once per file; a row's identity once per
  configuration (fa-bench/1: variant; fa-bench/2: variant, direction, kernel_config, options);
  a ``gate_calibration`` row once; a ``shard`` index is below its count.

Problems read like reports/schema.py's: ``"<file>: <key path>: <problem>"``.
"""

from __future__ import annotations

import json
import math
import os
from functools import lru_cache
from pathlib import Path
from typing import Any

from reports.schema import SchemaError, config_key, read_document, row_identity

SCHEMA_FILE = Path(__file__).resolve().parents[1] / "schema" / "fa-bench-result.schema.json"


@lru_cache(maxsize=1)
def validator():
    """The JSON Schema validator (Draft 2020-12, strict integers and finite numbers)."""
    import jsonschema  # imported here: reports/ itself runs without it

    schema = json.loads(SCHEMA_FILE.read_text(encoding="utf-8"))
    base = jsonschema.Draft202012Validator
    base.check_schema(schema)
    checker = base.TYPE_CHECKER.redefine_many({
        "integer": lambda _, x: type(x) is int,
        "number": lambda _, x: type(x) is int or (type(x) is float and math.isfinite(x)),
    })
    strict = jsonschema.validators.extend(base, type_checker=checker)
    return strict(schema)


def key_path(parts) -> str:
    """["configs", 0, "results", 2, "timing"] -> "configs[0].results[2].timing"."""
    out = ""
    for p in parts:
        out += f"[{p}]" if isinstance(p, int) else (f".{p}" if out else str(p))
    return out


def problems(doc: Any) -> list[tuple[str, str]]:
    """Every problem the schema finds, then those of the uniqueness rules: (key path, message)
    pairs, empty for a valid document. A document whose "schema" is unknown gets that one."""
    from jsonschema.exceptions import best_match

    found = []
    for e in sorted(validator().iter_errors(doc), key=lambda e: list(map(str, e.absolute_path))):
        e = best_match([e])  # an anyOf's failure: the branch that came closest, and its key
        message = e.message if len(e.message) <= 200 else e.message[:197] + "..."
        parts = list(e.absolute_path)
        if e.validator in ("required", "dependentRequired") and isinstance(e.instance, dict):
            # named at the missing key, as the readers name it
            missing = [k for k in _required_keys(e) if k not in e.instance and repr(k) in message]
            parts += missing[:1]
        found.append((key_path(parts), message))
    if found or not isinstance(doc, dict):
        return found
    return unique_rows(doc)


def _required_keys(e) -> list:
    if e.validator == "required":
        return list(e.validator_value)
    return [k for keys in e.validator_value.values() for k in keys]  # dependentRequired


def unique_rows(doc: dict) -> list[tuple[str, str]]:
    """The rules JSON Schema cannot say (the document has passed the schema)."""
    found = []
    configs: dict[tuple, int] = {}
    for i, c in enumerate(doc["configs"]):
        key = config_key(c)
        if key in configs:
            found.append((f"configs[{i}]", f"duplicate configuration (also at configs[{configs[key]}])"))
        configs.setdefault(key, i)
        rows: dict[Any, int] = {}
        for j, r in enumerate(c["results"]):
            ident = row_identity(r, doc["schema"])
            if ident in rows:
                found.append((f"configs[{i}].results[{j}].variant",
                              f"row {r['variant']!r} appears twice (also at results[{rows[ident]}])"))
            rows.setdefault(ident, j)
    shard = doc.get("shard")
    if isinstance(shard, dict) and shard["index"] >= shard["count"]:
        found.append(("shard.index", f"expected < count ({shard['count']}), got {shard['index']}"))
    cal = doc.get("gate_calibration")
    if cal is not None:
        seen: dict[str, int] = {}
        for i, row in enumerate(cal["rows"]):
            if row["row"] in seen:
                found.append((f"gate_calibration.rows[{i}].row",
                              f"row {row['row']!r} appears twice (also at rows[{seen[row['row']]}])"))
            seen.setdefault(row["row"], i)
    return found


def check_file(path: str | os.PathLike) -> list[str]:
    """Lines ``"<file>: <key path>: <problem>"`` for a file (empty when valid); a file that is not
    UTF-8 JSON gets the reader's line. OSError when it cannot be read."""
    source = os.fspath(path)
    try:
        doc = read_document(path)
    except SchemaError as e:
        return [str(e)]
    return [f"{source}: {p or 'document'}: {m}" for p, m in problems(doc)]
