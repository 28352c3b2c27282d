"""The check of a result document: ``schema/fa-bench-result.schema.json``, the one definition of
the fa-bench result file, run by the pinned ``jsonschema`` package (reports/requirements.txt),
with each of jsonschema's errors said in plain words: ``"<key path>: <problem>"``, e.g.
``configs[2].results[0].status: expected one of ok|failed|..., got 'bad'``.

JSON Schema as written there, plus what JSON Schema cannot say, as small explicit checks:
- the document's ``schema`` is a version this reader knows (checked first, so that a newer file
  gets that one line rather than its differences);
- an integer is written as one (``5``, not ``5.0``) and a number is finite (``1e999`` parses
  to inf): the type checker says so, as the C++ reader does;
- a configuration (B, H, H_kv, N, N_kv, d, causal, dtype, page_size, kv_lengths, H_kv and N_kv
  being H and N before fa-bench/4, page_size and kv_lengths 0 and null before fa-bench/5;
  fa-bench/3 on: and gpu.uuid) appears once per file, a row's identity once per configuration
  (fa-bench/1: variant; fa-bench/2 on: variant, direction, kernel_config, options), a
  ``gate_calibration`` row once; a ``shard`` index is below its count; fa-bench/4 on: a
  configuration's H_kv divides its H; fa-bench/5: its page_size is 0 or a power of two, its
  kv_lengths (when not null) holds B lengths, none above its N_kv.

Speed: jsonschema descends into every value (a 20,000-row sweep holds millions). The schema is
loaded with its ``$ref``s inlined, and a value whose subschema is a leaf (type, bounds, enum,
const, length, pattern, and any/all/if of leaves) is first tried with that leaf's test compiled
once; only a value that fails it is descended into, so every error still comes from jsonschema.
tests/python/test_json_schema.py holds this to plain jsonschema's verdict on every bad document.
"""

from __future__ import annotations

import json
import math
import os
import re
from functools import lru_cache
from pathlib import Path
from typing import Any, Callable

from reports.schema import (
    CONFIG_KEY,
    CONTIGUOUS_VERSIONS,
    SQUARE_VERSIONS,
    UNDERSTOOD_VERSIONS,
    SchemaError,
    config_key,
    read_document,
    row_identity,
    shape_values,
)

SCHEMA_FILE = Path(__file__).resolve().parents[1] / "schema" / "fa-bench-result.schema.json"
TAG = "x-def"  # the $defs name an inlined subschema came from (an annotation jsonschema ignores)

# What a value of a named definition is, in words ("expected a positive time, got 0.0") ...
WORDS = {
    "time_ms": "a positive time",
    "positive": "a positive number",
    "positive_count": "a positive integer",
    "count": "an integer >= 0",
    "nonnegative": "a number >= 0",
    "error_figure": "an error or count >= 0",
    "nonnegative_if_number": "a number >= 0",
}
# ... and a number >= 0 by the object that holds it ("a counter value >= 0").
HELD_IN = {
    "model": "a count >= 0",
    "derived": "a value >= 0",
    "measured": "a measured value >= 0",
    "counter_values": "a counter value >= 0",
    "verification": "an error or count >= 0",
}
TYPE_WORDS = {"object": "an object", "array": "a list", "string": "a string",
              "boolean": "true or false", "integer": "an integer", "number": "a number",
              "null": "null"}


# -- the validator ---------------------------------------------------------------------------


def _is_int(x: Any) -> bool:
    return type(x) is int


def _is_number(x: Any) -> bool:
    return type(x) is int or (type(x) is float and math.isfinite(x))


TYPES: dict[str, Callable[[Any], bool]] = {
    "object": lambda x: type(x) is dict, "array": lambda x: type(x) is list,
    "string": lambda x: type(x) is str, "boolean": lambda x: type(x) is bool,
    "null": lambda x: x is None, "integer": _is_int, "number": _is_number,
}


def _inline(node: Any, defs: dict) -> Any:
    """The schema with every ``#/$defs/...`` reference replaced by (a tagged copy of) its
    definition: jsonschema resolves a $ref on every use, a third of its time on a large file."""
    if isinstance(node, list):
        return [_inline(x, defs) for x in node]
    if not isinstance(node, dict):
        return node
    out = {k: _inline(v, defs) for k, v in node.items() if k != "$ref"}
    ref = node.get("$ref")
    if ref is None:
        return out
    name = ref.removeprefix("#/$defs/")
    if name == ref or name not in defs:
        raise ValueError(f"{SCHEMA_FILE.name}: cannot inline $ref {ref!r}")
    target = {**_inline(defs[name], defs), TAG: name}
    keywords = {k: v for k, v in out.items() if k not in ("description", "$comment")}
    return {**target, **out} if not keywords else {"allOf": [target], **out}


LEAF_KEYWORDS = {"type", "enum", "const", "minimum", "exclusiveMinimum", "maximum",
                 "exclusiveMaximum", "minLength", "pattern", "description", "$comment", TAG}


def _leaf_test(schema: Any) -> Callable[[Any], bool] | None:
    """A compiled test that is true exactly when ``schema`` accepts the value, for a leaf
    schema (LEAF_KEYWORDS; anyOf, allOf and if/then/else of leaves); None for any other."""
    if not isinstance(schema, dict) or not schema:
        return None
    tests: list[Callable[[Any], bool]] = []
    for key, value in schema.items():
        if key in ("anyOf", "allOf"):
            parts = [_leaf_test(s) for s in value]
            if any(p is None for p in parts):
                return None
            tests.append((lambda ps: lambda x: any(p(x) for p in ps))(parts) if key == "anyOf"
                         else (lambda ps: lambda x: all(p(x) for p in ps))(parts))
        elif key in ("if", "then", "else"):
            continue
        elif key not in LEAF_KEYWORDS:
            return None
    if "if" in schema:
        cond, then, other = (_leaf_test(schema.get(k, {"$comment": "true"}))
                             for k in ("if", "then", "else"))
        if cond is None or then is None or other is None:
            return None
        tests.append(lambda x: then(x) if cond(x) else other(x))
    kind = schema.get("type")
    if kind is not None:
        kinds = [TYPES[k] for k in ([kind] if isinstance(kind, str) else kind)]
        tests.append(kinds[0] if len(kinds) == 1 else (lambda x: any(k(x) for k in kinds)))
    number = lambda x: _is_number(x) and type(x) is not bool  # noqa: E731 (bounds apply to numbers)
    for key, op in (("minimum", lambda x, b: x >= b), ("exclusiveMinimum", lambda x, b: x > b),
                    ("maximum", lambda x, b: x <= b), ("exclusiveMaximum", lambda x, b: x < b)):
        if key in schema:
            bound = schema[key]
            tests.append((lambda op, b: lambda x: not number(x) or op(x, b))(op, bound))
    if "enum" in schema:
        allowed = schema["enum"]
        tests.append(lambda x: any(x == a and type(x) is type(a) for a in allowed))
    if "const" in schema:
        want = schema["const"]
        tests.append(lambda x: x == want and type(x) is type(want))
    if "minLength" in schema:
        n = schema["minLength"]
        tests.append(lambda x: type(x) is not str or len(x) >= n)
    if "pattern" in schema:
        pattern = re.compile(schema["pattern"])
        tests.append(lambda x: type(x) is not str or pattern.search(x) is not None)
    if not tests:
        return lambda x: True
    if len(tests) == 1:
        return tests[0]
    return lambda x: all(t(x) for t in tests)


def _number_list_test(schema: Any) -> Callable[[list], bool] | None:
    """For an array whose items are plain bounded numbers (timing samples, hundreds a row): one
    pass over the list instead of a test per item."""
    if not isinstance(schema, dict) or schema.get("type") != "number":
        return None
    if set(schema) - {"type", "minimum", "exclusiveMinimum", "description", "$comment", TAG}:
        return None
    low, strict = (schema["exclusiveMinimum"], True) if "exclusiveMinimum" in schema else (
        schema.get("minimum", -math.inf), False)

    def test(xs: list) -> bool:
        if not xs or not set(map(type, xs)) <= {int, float}:
            return not xs
        lo, hi = min(xs), max(xs)
        return (lo > low if strict else lo >= low) and math.isfinite(lo) and math.isfinite(hi)
    return test


class _Fast:
    """Leaf tests by subschema (compiled on first use)."""

    def __init__(self):
        self.tests: dict[int, Callable | None] = {}
        self.lists: dict[int, Callable | None] = {}
        self.keep: list = []  # the subschemas, so that their ids stay theirs

    def test(self, schema: Any) -> Callable | None:
        key = id(schema)
        if key not in self.tests:
            self.tests[key] = _leaf_test(schema)
            self.keep.append(schema)
        return self.tests[key]

    def list_test(self, schema: Any) -> Callable | None:
        key = id(schema)
        if key not in self.lists:
            self.lists[key] = _number_list_test(schema)
            self.keep.append(schema)
        return self.lists[key]


def _keywords(fast: _Fast) -> dict:
    """jsonschema's properties, items and additionalProperties, each trying the leaf test of a
    value's subschema before descending into it."""

    def properties(validator, properties, instance, schema):
        if type(instance) is not dict:
            return
        for name, sub in properties.items():
            if name in instance:
                test = fast.test(sub)
                if test is not None and test(instance[name]):
                    continue
                yield from validator.descend(instance[name], sub, path=name, schema_path=name)

    def items(validator, items, instance, schema):
        if type(instance) is not list or items is False:
            yield from _plain["items"](validator, items, instance, schema)
            return
        prefix = len(schema.get("prefixItems", []))
        rest = instance[prefix:]
        whole = fast.list_test(items)
        if whole is not None and whole(rest):
            return
        test = fast.test(items)
        for index in range(prefix, len(instance)):
            if test is not None and test(instance[index]):
                continue
            yield from validator.descend(instance[index], items, path=index)

    def additional(validator, extra, instance, schema):
        if type(instance) is not dict or not isinstance(extra, dict):
            yield from _plain["additionalProperties"](validator, extra, instance, schema)
            return
        known = schema.get("properties", {})
        if "patternProperties" in schema:
            yield from _plain["additionalProperties"](validator, extra, instance, schema)
            return
        test = fast.test(extra)
        for name, value in instance.items():
            if name in known or (test is not None and test(value)):
                continue
            yield from validator.descend(value, extra, path=name)

    def any_of(validator, branches, instance, schema):
        # the first branch that passes ends it, as in jsonschema; a branch whose leaf test fails
        # is not descended into (the nullable objects: null, else the object)
        for sub in branches:
            test = fast.test(sub)
            if test is not None:
                if test(instance):
                    return
                continue
            if next(validator.descend(instance, sub), None) is None:
                return
        yield from _plain["anyOf"](validator, branches, instance, schema)  # the error, in full

    return {"properties": properties, "items": items, "additionalProperties": additional,
            "anyOf": any_of}


_plain: dict = {}


@lru_cache(maxsize=1)
def _schema() -> dict:
    """The schema file, checked against its meta-schema, with its $refs inlined."""
    import jsonschema

    raw = json.loads(SCHEMA_FILE.read_text(encoding="utf-8"))
    jsonschema.Draft202012Validator.check_schema(raw)
    defs = raw.get("$defs", {})
    root = _inline({k: v for k, v in raw.items() if k != "$defs"}, defs)
    root["$defs"] = {name: {**_inline(d, defs), TAG: name} for name, d in defs.items()}
    return root


def _strict_class(fast: bool):
    """Draft 2020-12 with strict integers and finite numbers; ``fast``: with the leaf tests."""
    import jsonschema

    base = jsonschema.Draft202012Validator
    if not _plain:
        _plain.update(base.VALIDATORS)
    checker = base.TYPE_CHECKER.redefine_many({
        "integer": lambda _, x: _is_int(x),
        "number": lambda _, x: _is_number(x),
    })
    keywords = _keywords(_Fast()) if fast else {}
    return jsonschema.validators.extend(base, validators=keywords, type_checker=checker)


@lru_cache(maxsize=None)
def validator(definitions: tuple[str, ...] = (), fast: bool = True):
    """The validator of the whole document, or of a value that all of the schema's
    ``definitions`` describe (``("result", "result_v2")``: a fa-bench/2 row). ``fast=False``:
    jsonschema alone (the tests compare the two)."""
    root = _schema()
    if definitions:
        schema = {"allOf": [root["$defs"][name] for name in definitions]}
    else:
        schema = root
    return _strict_class(fast)(schema)


# -- errors in plain words -------------------------------------------------------------------


def key_path(parts) -> str:
    """["configs", 0, "results", 2, "timing"] -> "configs[0].results[2].timing"."""
    out = ""
    for p in parts:
        out += f"[{p}]" if isinstance(p, int) else (f".{p}" if out else str(p))
    return out


def _show(value: Any) -> str:
    """A value as a message shows it: JSON spelling for null and booleans, short."""
    if value is None or isinstance(value, bool):
        return json.dumps(value)
    if isinstance(value, list):
        return "a list"
    if isinstance(value, dict):
        return "an object"
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _got(value: Any) -> str:
    """"string 'x'", "number 1.5", "null", "an object": what was found instead."""
    if value is None or isinstance(value, (bool, list, dict)):
        return _show(value)
    kind = "number" if isinstance(value, (int, float)) else type(value).__name__
    return f"{kind} {_show(value)}"


def _tags(root: dict, schema_path) -> list[str]:
    """The $defs names along a path through the (inlined) schema, outermost first."""
    node: Any = root
    out = [root[TAG]] if TAG in root else []
    for part in schema_path:
        try:
            node = node[part]
        except (KeyError, IndexError, TypeError):
            break
        if isinstance(node, dict) and TAG in node:
            out.append(node[TAG])
    return out


def _bound_words(error, root: dict) -> str:
    tags = _tags(root, error.absolute_schema_path)
    leaf = tags[-1] if tags else ""
    held = next((t for t in reversed(tags[:-1]) if t in HELD_IN), "")
    if leaf in ("nonnegative", "nonnegative_if_number", "error_figure") and held:
        return HELD_IN[held]
    if leaf in WORDS:
        return WORDS[leaf]
    integer = error.schema.get("type") == "integer" if isinstance(error.schema, dict) else False
    what = "an integer" if integer else "a number"
    sign = {"minimum": ">=", "exclusiveMinimum": ">", "maximum": "<=",
            "exclusiveMaximum": "<"}[error.validator]
    return f"{what} {sign} {error.validator_value}"


def _expected(schema: Any) -> str | None:
    """What a schema accepts, in words, when a type says it (None: it does not)."""
    if not isinstance(schema, dict):
        return None
    if schema.get(TAG) in WORDS and schema.get(TAG) != "nonnegative_if_number":
        return WORDS[schema[TAG]]
    kind = schema.get("type")
    if isinstance(kind, str):
        return TYPE_WORDS[kind]
    if "enum" in schema:
        return "one of " + "|".join(map(str, schema["enum"]))
    if "anyOf" in schema:
        parts = [_expected(s) for s in schema["anyOf"]]
        return None if None in parts else _either(parts)
    return None


def _either(parts: list[str]) -> str:
    parts = list(dict.fromkeys("a boolean" if p == "true or false" else p for p in parts))
    if "null" in parts and len(parts) == 2:
        return f"{next(p for p in parts if p != 'null')} or null"
    return parts[0] if len(parts) == 1 else ", ".join(parts[:-1]) + " or " + parts[-1]


def _condition(error, root: dict, doc: Any) -> str:
    """For a failure inside an if/then/else: "when status is 'failed'"; else ""."""
    path = list(error.absolute_schema_path)
    for i in range(len(path) - 1, -1, -1):
        if path[i] not in ("then", "else"):
            continue
        node: Any = root
        steps = []  # the instance keys from the document to the object the if looks at
        k = 0
        while k < i:
            part = path[k]
            node = node[part]
            if part in ("properties", "patternProperties", "prefixItems") and k + 1 < i:
                node = node[path[k + 1]]
                steps.append(error.absolute_path[len(steps)])
                k += 2
                continue
            if part in ("items", "additionalProperties"):
                steps.append(error.absolute_path[len(steps)])
            k += 1
        cond = node.get("if", {}).get("properties", {}) if isinstance(node, dict) else {}
        if len(cond) != 1:
            return ""
        (key, test), = cond.items()
        obj = _walk(doc, steps)[-1]
        actual = obj.get(key) if isinstance(obj, dict) else None
        if path[i] == "then" and "const" in test:
            return f"when {key} is {_show(test['const'])}"
        return f"when {key} is {_show(actual)}"
    return ""


def _walk(doc: Any, parts) -> list:
    """The instances along a path: the document, then each value on the way."""
    out = [doc]
    node = doc
    for p in parts:
        try:
            node = node[p]
        except (KeyError, IndexError, TypeError):
            break
        out.append(node)
    return out


def _explain(error, doc: Any, root: dict) -> tuple[list, str]:
    """One jsonschema error as (key path parts, plain words)."""
    parts = list(error.absolute_path)
    v, value, instance = error.validator, error.validator_value, error.instance
    if v == "anyOf":
        branches: dict[int, list] = {}
        for sub in error.context or []:
            branches.setdefault(sub.relative_schema_path[0], []).append(sub)
        fitting = [i for i, s in enumerate(value)
                   if not isinstance(s, dict) or "type" not in s or TYPES[s["type"]](instance)]
        if len(fitting) == 1 and fitting[0] in branches:
            from jsonschema.exceptions import best_match

            return _explain(best_match(branches[fitting[0]]), doc, root)
        what = _expected({"anyOf": value})
        return parts, f"expected {what or 'another value'}, got {_got(instance)}"
    if v == "required":
        missing = next((k for k in value if k not in instance), None)
        when = _condition(error, root, doc)  # a key a version requires: "when schema is ..."
        return (parts + ([missing] if missing else []),
                "missing required key" + (f" {when}" if when else ""))
    if v == "dependentRequired":
        for key, needs in value.items():
            if key in instance:
                lack = next((k for k in needs if k not in instance), None)
                if lack:
                    return parts + [lack], f"missing ({key} is set)"
        return parts, error.message
    if "propertyNames" in list(error.absolute_schema_path)[-2:]:  # the key is the instance
        words = f"; expected one of {'|'.join(value)}" if v == "enum" else ""
        return parts + [instance], f"unknown key {instance!r}{words}"
    when = _condition(error, root, doc)
    if when.startswith("when schema is "):  # a version's rule: the value is wrong in any version
        when = ""
    if v == "type":
        if type(instance) is float and not math.isfinite(instance):
            return parts, f"non-finite number {instance} cannot be stored in JSON (use null)"
        want = value if isinstance(value, str) else "|".join(value)
        words = TYPE_WORDS.get(want, want)
        if when:
            return parts, f"must be {words} {when}, not {_show(instance)}"
        return parts, f"expected {words}, got {_got(instance)}"
    if v == "const":
        if when:
            return parts, f"must be {_show(value)} {when}, not {_show(instance)}"
        return parts, f"expected {_show(value)}, got {_show(instance)}"
    if v == "enum":
        return parts, f"expected one of {'|'.join(map(str, value))}, got {_show(instance)}"
    if v in ("minimum", "exclusiveMinimum", "maximum", "exclusiveMaximum"):
        return parts, f"expected {_bound_words(error, root)}, got {instance}"
    if v == "minItems":
        if not instance:
            return parts, "is empty (at least one item)"
        return parts, f"expected {value} items, got {len(instance)}"
    if v == "maxItems":
        return parts, f"expected at most {value} items, got {len(instance)}"
    if v == "minLength":
        return parts, "must not be empty"
    if v == "pattern":
        return parts, f"expected a string matching {value}, got {instance!r}"
    return parts, error.message


def _order(doc: Any, parts) -> tuple:
    """Where a key path sits in the document (keys in the file's order)."""
    out = []
    node = doc
    for p in parts:
        if isinstance(node, dict):
            out.append(list(node).index(p) if p in node else -1)  # a missing key: first
            node = node.get(p)
        elif isinstance(node, list) and isinstance(p, int):
            out.append(p)
            node = node[p] if 0 <= p < len(node) else None
        else:
            out.append(0)
            node = None
    return tuple(out)


def version_problem(doc: Any) -> tuple[str, str] | None:
    """The document's ``schema`` when this reader does not know it."""
    if not isinstance(doc, dict):
        return None
    known = ", ".join(UNDERSTOOD_VERSIONS)
    if "schema" not in doc:
        return "schema", f"missing; this reader understands {known}"
    if doc["schema"] not in UNDERSTOOD_VERSIONS:
        return "schema", f"unknown version {_show(doc['schema'])}; this reader understands {known}"
    return None


def problems(doc: Any, definitions: tuple[str, ...] = ()) -> list[tuple[str, str]]:
    """Every problem of a document (or of a value of ``definitions``, e.g. ``("result",)``): (key path,
    words) pairs in document order, empty when valid. An unknown ``schema`` is the one problem
    of its document; the rules JSON Schema cannot say are checked once the schema passes."""
    if not definitions:
        version = version_problem(doc)
        if version:
            return [version]
    check = validator(definitions)
    root = check.schema
    errors = list(check.iter_errors(doc))
    found: dict[tuple[str, str], tuple] = {}
    for e in errors:
        parts, words = _explain(e, doc, root)
        # a rule between keys (if/then) after the keys' own problems: "status: expected one
        # of ok|..." before "timing: must be null when status is 'great'"
        follows = any(p in ("then", "else") for p in e.absolute_schema_path)
        found.setdefault((key_path(parts), words), (follows, _order(doc, parts)))
    if found or definitions or not isinstance(doc, dict):
        return sorted(found, key=found.get)
    return unique_rows(doc)


def unique_rows(doc: dict) -> list[tuple[str, str]]:
    """The rules JSON Schema cannot say (the document has passed the schema)."""
    found = []
    configs: dict[tuple, int] = {}
    version = doc["schema"]
    v1 = version == "fa-bench/1"
    for i, c in enumerate(doc["configs"]):
        if version not in SQUARE_VERSIONS and c["H"] % c["H_kv"]:
            found.append((f"configs[{i}].H_kv",
                          f"expected a divisor of H ({c['H']}), got {c['H_kv']}"))
        if version not in CONTIGUOUS_VERSIONS:
            found += _kv_cache_problems(c, f"configs[{i}]")
        key = config_key(c, version)
        if key in configs:
            values = shape_values(c, version)
            # H_kv and N_kv named where they differ from H and N, page_size and kv_lengths where
            # the cache is paged or its lengths apart (square, contiguous rows read as before)
            same = {"H_kv": values["H"], "N_kv": values["N"], "page_size": 0, "kv_lengths": None}
            what = ", ".join(f"{k}={json.dumps(values[k])}" for k in CONFIG_KEY
                             if k not in same or values[k] != same[k])
            if c.get("gpu"):
                what += f", gpu {c['gpu']['uuid']}"
            found.append((f"configs[{i}]",
                          f"duplicate configuration ({what}; also at configs[{configs[key]}])"))
        configs.setdefault(key, i)
        rows: dict[Any, int] = {}
        for j, r in enumerate(c["results"]):
            ident = row_identity(r, doc["schema"])
            if ident in rows:
                same = "" if v1 else " with the same direction, kernel_config and options"
                found.append((f"configs[{i}].results[{j}].variant",
                              f"variant {r['variant']!r}{same} appears twice in this "
                              f"configuration (also at results[{rows[ident]}])"))
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


def _kv_cache_problems(c: dict, where: str) -> list[tuple[str, str]]:
    """A fa-bench/5 configuration's page_size (0 or a power of two) and kv_lengths (null, or B
    lengths from 1 to N_kv; JSON Schema holds each to >= 1)."""
    found = []
    page = c["page_size"]
    if page & (page - 1):
        found.append((f"{where}.page_size", f"expected 0 or a power of two, got {page}"))
    lengths = c["kv_lengths"]
    if lengths is not None:
        if len(lengths) != c["B"]:
            found.append((f"{where}.kv_lengths",
                          f"expected B ({c['B']}) lengths, one per sequence, got {len(lengths)}"))
        over = next((j for j, n in enumerate(lengths) if n > c["N_kv"]), None)
        if over is not None:
            found.append((f"{where}.kv_lengths[{over}]",
                          f"expected a length from 1 to N_kv ({c['N_kv']}), got {lengths[over]}"))
    return found


def check(doc: Any, source: str | None) -> None:
    """Raises SchemaError naming ``source``, the key path and the first problem of ``doc``."""
    found = problems(doc)
    if found:
        path, words = found[0]
        raise SchemaError(source, path or "document", words)


def check_file(path: str | os.PathLike) -> list[str]:
    """Lines ``"<file>: <key path>: <problem>"`` for a file (empty when valid); a file that is not
    UTF-8 JSON gets the reader's line. OSError when it cannot be read."""
    source = os.fspath(path)
    try:
        doc = read_document(path)
    except SchemaError as e:
        return [str(e)]
    return [f"{source}: {p or 'document'}: {m}" for p, m in problems(doc)]
