#!/usr/bin/env python3
"""Validates fa-bench result files against schema/fa-bench-result.schema.json (the one
definition of the file; fa-bench/5, /4, /3, /2 and /1), run by jsonschema, plus the rules JSON
Schema cannot say (reports/json_schema.py: a known schema version, integers written as integers,
finite numbers, unique configurations -- (B, H, H_kv, N, N_kv, d, causal, dtype, page_size,
kv_lengths) and the GPU, H_kv and N_kv being H and N before fa-bench/4, page_size and kv_lengths
0 and null before fa-bench/5 --, H_kv a divisor of H, page_size 0 or a power of two, kv_lengths
B lengths of at most N_kv, unique rows and calibration rows), each problem in the words
`python -m reports` uses.

    .venv/bin/python scripts/validate_results.py FILE...

Prints one line per problem, "<file>: <key path>: <problem>", on stderr, and a summary on
stdout. Exit status: 0 every file valid; 1 one or more files invalid (or unreadable);
2 bad usage, or the schema file or the jsonschema package missing.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from reports import json_schema  # noqa: E402


def main(argv: list[str]) -> int:
    if not argv or argv[0] in ("-h", "--help"):
        print(__doc__.strip(), file=sys.stderr if not argv else sys.stdout)
        return 2 if not argv else 0
    try:
        json_schema.validator()
    except ImportError as e:
        print(f"validate_results: error: {e} (run scripts/setup.sh)", file=sys.stderr)
        return 2
    except (OSError, ValueError) as e:
        print(f"validate_results: error: {json_schema.SCHEMA_FILE}: {e}", file=sys.stderr)
        return 2
    bad = 0
    for name in argv:
        try:
            lines = json_schema.check_file(name)
        except OSError as e:
            lines = [f"{name}: cannot read ({e.strerror})"]
        for line in lines:
            print(line, file=sys.stderr)
        bad += bool(lines)
    rel = json_schema.SCHEMA_FILE.relative_to(json_schema.SCHEMA_FILE.parents[1])
    print(f"validate_results: {len(argv) - bad} of {len(argv)} files valid against {rel}"
          + (f"; {bad} invalid" if bad else ""))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
