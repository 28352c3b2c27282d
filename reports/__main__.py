"""Validate fa-bench result files and print one compact table per file, or write a report.

    python -m reports FILE.json [MORE.json ...]             validate, print a table per file
    python -m reports FILE.json [MORE.json ...] -o OUTDIR   also write plots (PNG, SVG),
                                                            OUTDIR/report.md and report.html

Several files merge into one report (a sweep split over runs; runs from several GPUs side by
side, labelled by device). Exit status 0 when every file is valid, 2 when any is not (one line
per bad file on stderr; no report is written then).
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


def _split_args(args: list[str]) -> tuple[list[str], str | None, str]:
    """Files and the -o/--output directory; an error message when the arguments are wrong."""
    files: list[str] = []
    outdir = None
    i = 0
    while i < len(args):
        a = args[i]
        if a in ("-o", "--output"):
            if i + 1 >= len(args):
                return files, None, f"{a} needs a directory"
            outdir = args[i + 1]
            i += 2
            continue
        if a.startswith("--output="):
            outdir = a.split("=", 1)[1]
        elif a.startswith("-o") and len(a) > 2:
            outdir = a[2:]
        elif a.startswith("-") and a != "-":
            return files, None, f"unknown option {a}"
        else:
            files.append(a)
        i += 1
    if not files:
        return files, None, "no result files given"
    return files, outdir, ""


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if not args or any(a in ("-h", "--help") for a in args):
        print(__doc__.strip(), file=sys.stderr if not args else sys.stdout)
        return 2 if not args else 0
    files, outdir, problem = _split_args(args)
    if problem:
        print(f"error: {problem}", file=sys.stderr)
        print(__doc__.strip(), file=sys.stderr)
        return 2
    if outdir is not None:
        return _report(files, outdir)
    status = 0
    for i, path in enumerate(files):
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


def _report(files: list[str], outdir: str) -> int:
    from reports.data import Results, Run

    runs = []
    status = 0
    for path in files:
        try:
            runs.append(Run(path, load_results(path)))
        except SchemaError as e:
            print(f"error: {e}", file=sys.stderr)
            status = 2
        except OSError as e:
            print(f"error: {path}: cannot read: {e.strerror or e}", file=sys.stderr)
            status = 2
    if status:
        print("error: no report written (fix or leave out the files above)", file=sys.stderr)
        return status
    from reports.report import build

    build(Results(runs), outdir)
    return 0


if __name__ == "__main__":
    sys.exit(main())
