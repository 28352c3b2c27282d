#!/usr/bin/env python3
"""Rewrites result files as compact JSON (no indentation), the same values key for key.

    scripts/compact_json.py FILE.json [FILE.json ...]

Why: result files kept in the repository (tests/data fixtures, docs/results) are read by
programs, not people; indented, a record is about 1.5 times its compact size.

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
    """The file text a record is stored as."""
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
