"""fa-bench/1 result documents as fa-bench/2 ones, for running the report tests on both.

The rows get the specs the C++ reader gives a /1 row (bench/result_json.cpp spec_from_v1): the
variant is the name up to its first '@' or '~'; tiled rows keep two tile buffers in flight
(stages 2, no warpgroups, cluster 1x1x1); fa2 (not a peer) declares block_order ("blocks"
when the file has none), fp8 (not a peer) declares prequantized (the file's setting); every row
is forward. default_config: the /1 name had no tiles appended (/1 named other tiles
fa2@64x64).
"""

from __future__ import annotations

import copy
import json
import os
import tempfile
from pathlib import Path

from reports import schema


def as_v2(doc):
    """A fa-bench/1 document as fa-bench/2; anything else (a /2 document, a broken one, not a
    document at all) unchanged, so that a reader's verdict on it stays its own."""
    if not isinstance(doc, dict) or doc.get("schema") != "fa-bench/1":
        return doc
    try:
        out = copy.deepcopy(doc)
        prequantized = bool((out.get("settings") or {}).get("fp8_prequantized", False))
        for config in out["configs"]:
            for r in config["results"]:
                name = r["variant"]
                tiles = r["tiles"]
                options = {}
                if not r["peer"] and r["algorithm"] == "fa2":
                    options["block_order"] = r.get("block_order") or "blocks"
                if not r["peer"] and r["algorithm"] == "fp8":
                    options["prequantized"] = prequantized
                tiled = tiles["block_q"] > 0 and tiles["block_kv"] > 0
                r.update(
                    variant=name.split("@")[0].split("~")[0], direction="forward",
                    kernel_config={"block_q": tiles["block_q"], "block_kv": tiles["block_kv"],
                                   "stages": 2, "warpgroups": 0, "cluster": [1, 1, 1]}
                    if tiled else None,
                    options=options, default_config="@" not in name)
        out["schema"] = "fa-bench/2"
        return out
    except (KeyError, TypeError, AttributeError, IndexError):
        return doc


def as_v2_file(path: str | os.PathLike, folder: str | os.PathLike | None = None) -> Path:
    """A valid fa-bench/1 file written again as fa-bench/2 (same name, in ``folder`` or a new
    temporary folder); any other path is returned as it is."""
    path = Path(path)
    try:
        doc = schema.validate(json.loads(path.read_text()))
    except (OSError, ValueError):  # SchemaError and JSONDecodeError are ValueErrors
        return path
    if doc.get("schema") != "fa-bench/1":
        return path
    folder = Path(folder) if folder else Path(tempfile.mkdtemp(prefix="v2-"))
    out = folder / path.name
    out.write_text(json.dumps(as_v2(doc), indent=1))
    return out
