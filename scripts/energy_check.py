#!/usr/bin/env python3
"""Checks issue 43's "done when" on result files of one command run several times with one build:
every timed row has the energy counter's figure, the runs agree on it (spread = largest / smallest
- 1, per row), and the energy model predicts it (model / measured - 1, per row and run; where
some runs charged the row with the counters' DRAM bytes and others with the IO model's, as runs
with --no-counters do, the counters' runs judge the model).

    scripts/energy_check.py run1.json run2.json run3.json [--max-spread 3%] [--max-model-error 15%]

Prints one line per row (spread, worst model error, the model's DRAM share) and a verdict.
Exit: 0 every row within both bounds, 1 a row outside one (or without energy), 2 bad input.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from reports.schema import (  # noqa: E402
    SchemaError,
    load_results,
    read_document,
    rows,
    shape_text,
)


def load(path: str) -> dict:
    """The file, checked against the schema where jsonschema is installed (the GPU machines may
    lack it: the file is then read as fa-bench wrote it, and the check says so)."""
    try:
        return load_results(path)
    except ModuleNotFoundError as e:
        print(f"energy_check: {path}: not checked against the schema ({e})", file=sys.stderr)
        return read_document(path)


def fraction(text: str) -> float:
    """"3%" or "0.03" as 0.03."""
    try:
        value = float(text[:-1]) / 100 if text.endswith("%") else float(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(f"'{text}' (accepted: a fraction like 0.03 or 3%)") from e
    if not 0 < value < 10:
        raise argparse.ArgumentTypeError(f"'{text}' (accepted: a fraction above 0, like 3%)")
    return value


def row_key(r: dict) -> tuple:
    """A flat row's configuration (H_kv and N_kv: H and N in files before fa-bench/4; page_size
    and kv_lengths, a tuple or None: 0 and None before fa-bench/5) and label."""
    return (r["B"], r["H"], r["H_kv"], r["N"], r["N_kv"], r["page_size"], r["kv_lengths"],
            r["d"], r["causal"], r["dtype"], r["label"])


def key_text(key: tuple) -> str:
    b, h, h_kv, n, n_kv, page_size, kv_lengths, d, causal, dtype, label = key
    shape = shape_text({"B": b, "H": h, "H_kv": h_kv, "N": n, "N_kv": n_kv,
                        "page_size": page_size, "kv_lengths": kv_lengths, "d": d})
    return f"{label} {shape}{' causal' if causal else ''} {dtype}"


def energy_of(r: dict) -> tuple[float | None, dict, str]:
    """(measured mJ, the model's breakdown or {}, why not measured)."""
    e = r.get("energy")
    if not e:
        return None, {}, "no energy in the file (--no-energy or an older fa-bench)"
    model = e.get("model") or {}
    if e["status"] != "ok":
        return None, model, f"{e['status']}: {e['reason']}"
    return e["energy_per_launch_mj"], model, ""


def check(files: list[str], max_spread: float, max_model: float) -> tuple[list[str], bool]:
    runs = []
    for f in files:
        doc = load(f)
        runs.append({row_key(r): r for r in rows(doc) if r["status"] == "ok"})
    keys = list(dict.fromkeys(k for run in runs for k in run))
    lines, ok = [], True
    worst_spread = worst_model = 0.0
    for key in keys:
        problems = []
        measured, judged = [], []  # judged: (model error, DRAM share, bytes from the counters)
        no_model = "no fitted energy model in the file"  # or the row's own reason
        for f, run in zip(files, runs):
            r = run.get(key)
            if r is None:
                problems.append(f"{Path(f).name}: not timed")
                continue
            mj, model, why = energy_of(r)
            if mj is None:
                problems.append(f"{Path(f).name}: {why}")
                continue
            measured.append(mj)
            if r["energy"].get("model_reason"):  # counters off or failed: no instructions
                no_model = r["energy"]["model_reason"]
            if model.get("total_mj"):
                judged.append((model["total_mj"] / mj - 1, model["byte_mj"] / model["total_mj"],
                               model["bytes_basis"] == "counters"))
        if any(counted for _, _, counted in judged):
            judged = [j for j in judged if j[2]]
        errors = [j[0] for j in judged]
        shares = [j[1] for j in judged]
        spread = max(measured) / min(measured) - 1 if len(measured) > 1 else None
        model_error = max(errors, key=abs) if errors else None
        if spread is not None:
            worst_spread = max(worst_spread, spread)
            if spread > max_spread:
                problems.append(f"runs disagree by {spread:.1%} (bound {max_spread:.0%})")
        if model_error is not None:
            worst_model = max(worst_model, abs(model_error))
            if abs(model_error) > max_model:
                problems.append(f"model off by {model_error:+.1%} (bound {max_model:.0%})")
        elif measured:
            problems.append(f"no model figure ({no_model})")
        ok = ok and not problems
        cells = (f"{sum(measured) / len(measured):10.4g} mJ" if measured else f"{'-':>13}",
                 f"spread {spread:6.2%}" if spread is not None else "spread      -",
                 f"model {model_error:+7.1%}" if model_error is not None else "model       -",
                 f"DRAM {max(shares):4.0%}" if shares else "DRAM    -")
        lines.append(f"{'FAIL' if problems else 'ok  '} {key_text(key):<52} {'  '.join(cells)}"
                     + (f"  ({'; '.join(problems)})" if problems else ""))
    lines.append(f"{len(keys)} rows in {len(files)} runs; largest spread {worst_spread:.2%} "
                 f"(bound {max_spread:.0%}), largest model error {worst_model:.1%} "
                 f"(bound {max_model:.0%}): {'PASS' if ok and keys else 'FAIL'}")
    return lines, ok and bool(keys)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("files", nargs="+", help="result files of one command and one build")
    ap.add_argument("--max-spread", type=fraction, default=0.03,
                    help="largest / smallest energy of a row across the runs, minus 1 (default 3%%)")
    ap.add_argument("--max-model-error", type=fraction, default=0.15,
                    help="|model / measured - 1| of a row in any run (default 15%%)")
    try:
        args = ap.parse_args(argv)
    except SystemExit as e:
        return 2 if e.code else 0
    try:
        lines, ok = check(args.files, args.max_spread, args.max_model_error)
    except (SchemaError, OSError) as e:
        print(f"energy_check: {e}", file=sys.stderr)
        return 2
    print("\n".join(lines))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
