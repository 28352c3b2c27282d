"""Validate fa-bench result files and print one compact table per file, or write a report.

    python -m reports FILE.json [MORE.json ...]             validate, print a table per file
    python -m reports FILE.json [MORE.json ...] -o OUTDIR   also write plots (PNG, SVG),
                                                            OUTDIR/report.md and report.html

Several files merge into one report (a sweep split over runs; runs from several GPUs side by
side, labelled by device). Exit status 0 when every file is valid and the report was written;
2 when any file is not valid (one line per bad file on stderr), when OUTDIR cannot be written
(a file, a read-only folder, ...) or writing fails (disk full): one line on stderr, and nothing
of the report is left behind (it is built in a hidden folder next to OUTDIR, then moved in).
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
from pathlib import Path

from reports.schema import SchemaError, load_results, rows

COLUMNS = ("variant", "B", "H", "N", "d", "causal", "dtype", "status", "median_ms",
           "TFLOP/s", "max_err", "bound", "of_roof")


def _cell(value, fmt: str = "{}") -> str:
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    return fmt.format(value)


def _kv_cell(value: int, kv: int, name: str) -> str:
    """"32", or "32 (H_kv 8)" where the K/V figure differs."""
    return str(value) + (f" ({name} {kv})" if kv != value else "")


def table(doc: dict) -> str:
    from reports.data import n_cell, placement, roofs_of

    roofs = roofs_of(doc)
    lines = []
    for r in rows(doc):
        place = placement(r, roofs) or {}
        lines.append((
            r["label"] + (" (peer)" if r["peer"] else ""),
            # H_kv and N_kv beside H and N where they differ (grouped-query, non-square), the
            # cache's pages and each sequence's length beside N (n_cell)
            _cell(r["B"]), _kv_cell(r["H"], r["H_kv"], "H_kv"), n_cell(r), _cell(r["d"]),
            _cell(r["causal"]), r["dtype"], r["status"],
            _cell(r["median_ms"], "{:.4f}"),
            _cell(r["tflops_convention"], "{:.4g}"),
            _cell(r["max_abs_error"], "{:.2e}"),
            place.get("bound", "-"),
            f"{100 * place['fraction']:.0f}%" if place else "-",
        ))
    if not lines:
        return "  (no results)"
    widths = [max(len(c), *(len(line[i]) for line in lines)) for i, c in enumerate(COLUMNS)]
    left = {0, 6, 7, 11}  # text columns
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


def output_problem(outdir: str) -> str:
    """Why OUTDIR cannot receive a report ("" when it can): checked before anything is read."""
    path = Path(outdir)
    if path.exists() or path.is_symlink():
        if not path.is_dir():
            return f"{outdir}: exists and is not a directory"
        if not os.access(path, os.W_OK | os.X_OK):
            return f"{outdir}: directory is not writable"
        return ""
    parent = path.absolute().parent
    while not parent.exists():
        if parent.is_symlink():
            return f"{outdir}: {parent} is a broken link"
        parent = parent.parent
    if not parent.is_dir():
        return f"{outdir}: {parent} is not a directory"
    if not os.access(parent, os.W_OK | os.X_OK):
        return f"{outdir}: cannot create it: {parent} is not writable"
    return ""


def write_report(res, outdir: str, log=print) -> None:
    """Build the report in a hidden folder, then move it into place: a new OUTDIR is renamed
    into place whole; into an existing one each file is moved by rename (atomic per file).
    Raises OSError; then nothing of this report is left in or next to OUTDIR."""
    from reports.report import build

    target = Path(outdir)
    exists = target.is_dir()
    if exists:
        stage_parent = target
    else:
        target.absolute().parent.mkdir(parents=True, exist_ok=True)
        stage_parent = target.absolute().parent
    stage = Path(tempfile.mkdtemp(prefix=f".{target.name or 'report'}.", suffix=".tmp",
                                  dir=stage_parent))
    try:
        build(res, stage, log=lambda msg: log(msg.replace(str(stage), str(target))))
        os.chmod(stage, 0o777 & ~_umask())
        if exists:
            for f in sorted(stage.iterdir()):
                os.replace(f, target / f.name)
            stage.rmdir()
        else:
            os.rename(stage, target)
    except BaseException:
        shutil.rmtree(stage, ignore_errors=True)
        raise


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def _report(files: list[str], outdir: str) -> int:
    from reports.data import Results, Run

    problem = output_problem(outdir)
    if problem:
        print(f"error: {problem}; no report written", file=sys.stderr)
        return 2
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
    try:
        write_report(Results(runs), outdir)
    except OSError as e:
        print(f"error: {outdir}: cannot write the report: {e.strerror or e}; no report written",
              file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    import signal

    signal.signal(signal.SIGPIPE, signal.SIG_DFL)  # `... | head` ends quietly, as cat does
    sys.exit(main())
