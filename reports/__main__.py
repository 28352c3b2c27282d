"""Validate fa-bench result files and print one compact table per file.

    python -m reports FILE.json [MORE.json ...]

Exit status 0 when every file is valid, 2 when any is not (one line per bad file on stderr).
"""

from __future__ import annotations

import sys

from reports.schema import SchemaError, load_results, rows

COLUMNS = ("variant", "B", "H", "N", "d", "causal", "dtype", "status", "median_ms",
           "TFLOP/s", "max_err")


def _cell(value, fmt: str = "{}") -> str:
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    return fmt.format(value)


def table(doc: dict) -> str:
    lines = []
    for r in rows(doc):
        lines.append((
            r["variant"] + (" (peer)" if r["peer"] else ""),
            _cell(r["B"]), _cell(r["H"]), _cell(r["N"]), _cell(r["d"]),
            _cell(r["causal"]), r["dtype"], r["status"],
            _cell(r["median_ms"], "{:.4f}"),
            _cell(r["tflops_convention"], "{:.4g}"),
            _cell(r["max_abs_error"], "{:.2e}"),
        ))
    if not lines:
        return "  (no results)"
    widths = [max(len(c), *(len(line[i]) for line in lines)) for i, c in enumerate(COLUMNS)]
    left = {0, 6, 7}  # text columns
    def fmt(cells):
        return "  " + "  ".join(
            c.ljust(w) if i in left else c.rjust(w) for i, (c, w) in enumerate(zip(cells, widths))
        ).rstrip()
    return "\n".join([fmt(COLUMNS), *(fmt(line) for line in lines)])


def header(path: str, doc: dict) -> str:
    device = doc["device"]
    where = device["name"] if device else "no GPU (" + (doc.get("no_gpu_reason") or "model only") + ")"
    state = "" if doc["complete"] else ", INCOMPLETE"
    return f"{path}: {doc['tool']['name']} {doc['tool']['version']} on {where}, {doc['created_utc']}{state}"


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if not args or any(a in ("-h", "--help") for a in args):
        print(__doc__.strip(), file=sys.stderr if not args else sys.stdout)
        return 2 if not args else 0
    status = 0
    for i, path in enumerate(args):
        try:
            doc = load_results(path)
        except SchemaError as e:
            print(f"error: {e}", file=sys.stderr)
            status = 2
            continue
        except OSError as e:
            print(f"error: {path}: cannot read: {e.strerror or e}", file=sys.stderr)
            status = 2
            continue
        if i:
            print()
        print(header(path, doc))
        print(table(doc))
    return status


if __name__ == "__main__":
    sys.exit(main())
