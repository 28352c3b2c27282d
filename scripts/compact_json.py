#!/usr/bin/env python3
"""Rewrites result files as compact JSON (no indentation), the same values key for key.

    scripts/compact_json.py FILE.json [FILE.json ...]

Why: the device machine receives the repository's tracked files plus what a call carries, 64 MiB
in all (/work/.library/device/README.md), and the indented H200 records in tests/data/ had grown
to 56 MB of a 59 MB tree. Compact, the same records take 38 MB. tests/python/test_data_budget.py
keeps the tracked tree under its budget.

Each file is parsed, written compactly to a temporary file beside it, parsed back and compared
(as canonical text, so a NaN compares equal to itself), then moved over the original. A file that
does not parse is left alone and named on stderr (exit 1).
"""

import json
import os
import sys
import tempfile


def canonical(doc):
    return json.dumps(doc, sort_keys=True, separators=(",", ":"))


def compact_text(doc):
    """The file text a record is stored as (tests/python/test_data_budget.py holds the records to
    it)."""
    return json.dumps(doc, separators=(",", ":"), ensure_ascii=False) + "\n"


def compact(path):
    """'' when rewritten (or already compact), else why not."""
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
        doc = json.loads(text)
    except (OSError, ValueError) as e:
        return f"{path}: {e}"
    out = compact_text(doc)
    if out == text:
        return ""
    fd, tmp = tempfile.mkstemp(dir=os.path.dirname(path) or ".", suffix=".json.tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(out)
        with open(tmp, encoding="utf-8") as f:
            if canonical(json.load(f)) != canonical(doc):
                return f"{path}: the compact text does not read back the same"
        os.replace(tmp, path)
        tmp = None
    finally:
        if tmp and os.path.exists(tmp):
            os.unlink(tmp)
    return ""


def main(argv):
    if len(argv) < 2:
        print("usage: scripts/compact_json.py FILE.json [FILE.json ...]", file=sys.stderr)
        return 2
    errors = [e for e in map(compact, argv[1:]) if e]
    for e in errors:
        print(f"compact_json: {e}", file=sys.stderr)
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
