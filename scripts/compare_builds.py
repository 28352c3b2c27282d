#!/usr/bin/env python3
"""Two builds of fa-bench on the same sweep, run interleaved in one call, and the gate's verdict.

    scripts/compare_builds.py --base REV [--current REV] [-- FA-BENCH ARGS]
    scripts/compare_builds.py --base-cmake=-DX=OFF --current-cmake=-DX=ON [-- FA-BENCH ARGS]
    scripts/compare_builds.py --base-bin A/fa-bench --current-bin B/fa-bench [-- FA-BENCH ARGS]

A side is a git revision (--base REV, --current REV; without one, the working tree as it stands,
uncommitted edits included) with CMake options (--base-cmake, --current-cmake: -DNAME=VALUE or
-UNAME words in one quoted argument), or a fa-bench already built (--base-bin, --current-bin).
A revision is checked out with `git worktree` into build-compare/<side>/src (its .venv and .whl
are the working tree's, so it finds the same CuTe and cudnn-frontend headers); each side builds
fa-bench alone, Release with Ninja, into build-compare/<side>/build, so the next comparison
rebuilds only what changed. The two sides must differ.

Runs: every configuration of the sweep (fa-bench's --shard i/n, n = the configurations it plans
for the arguments) runs on both builds back to back, base first in odd rounds and current first
in even ones, for --rounds rounds (default 3). Both get the same arguments: FA-BENCH ARGS
(default --N 4096 --d 64 --variants all, as scripts/run.sh) with --repetitions 30 unless
--repetitions or --min-time is given, plus --require-gpu. A row's rounds become one row: their
samples together, the statistics and throughput figures recomputed from them, the first round's
counters; a round in which the row failed or errored makes it that round's row. `fa-bench merge`
then joins a side's configurations into OUT/base.json and OUT/current.json, and the current
build's `fa-bench gate --baseline OUT/base.json --current OUT/current.json` (with --time-only
when the runs have --no-counters, and --gate-args) judges them. Printed: per row, each side's
TFLOP/s, the speed current/base (above 1: current is faster) and its range over the rounds; then
the gate's table and verdict. Every run's output and log stays in OUT (--out; default
results/compare-<UTC time>).

Exit codes: the gate's (0 pass, 1 a regression or a failed row, 2 the comparison cannot be
made); 2 also for bad arguments (one line naming the flag); 3 a build or a run failed (its log
named).
"""

from __future__ import annotations

import argparse
import copy
import datetime
import json
import os
import shlex
import shutil
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))
from reports import schema  # noqa: E402  (the repository's reader: statistics and row names)

SIDES = ("base", "current")
DEFAULT_BENCH_ARGS = ["--N", "4096", "--d", "64", "--variants", "all"]
DEFAULT_REPETITIONS = "30"
# fa-bench flags the tool sets itself, and why a user may not.
RESERVED = {
    "--json": "each side's result file is OUT/base.json and OUT/current.json",
    "--csv": "the tool writes the result files",
    "--markdown": "the tool writes the result files (fa-bench gate --markdown: --gate-args)",
    "--shard": "the tool runs the sweep one configuration at a time",
    "--devices": "both builds run on one GPU (--device K picks it)",
    "--model-only": "a comparison needs measurements",
    "--list-variants": "a comparison runs a sweep",
    "--worker-configs": "the tool runs the sweep one configuration at a time",
}
GATE_RESERVED = ("--baseline", "--current", "--calibrate")
VALUE_FLAGS = ("--base", "--current", "--base-cmake", "--current-cmake", "--base-bin",
               "--current-bin", "--rounds", "--out", "--gate-args")
# Throughput figures (in `derived`; older files also in `measured`): they scale with 1 / median.
TIME_SCALED = ("tflops_convention", "tflops_model", "effective_gbps", "roofline_fraction")


class Failure(Exception):
    """Ends the comparison: message on stderr, exit code."""

    def __init__(self, message: str, code: int):
        super().__init__(message)
        self.code = code


def usage_error(message: str) -> Failure:
    return Failure(message, 2)


# ---- Arguments -----------------------------------------------------------------------------


class ArgumentError(Exception):
    pass


class _Parser(argparse.ArgumentParser):
    def error(self, message):  # raised, so that main() prints one line and returns 2
        raise ArgumentError(message)


def parser() -> argparse.ArgumentParser:
    p = _Parser(
        prog="scripts/compare_builds.py",
        usage="%(prog)s [--base REV] [--base-cmake ARGS | --base-bin PATH] [--current REV] "
              "[--current-cmake ARGS | --current-bin PATH] [--rounds R] [--out DIR] "
              "[--gate-args ARGS] [-- FA-BENCH ARGS]",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    for side in SIDES:
        p.add_argument(f"--{side}", metavar="REV",
                       help=f"{side} side: a git revision (default: the working tree)")
        p.add_argument(f"--{side}-cmake", metavar="ARGS", default="",
                       help=f"{side} side: CMake options, e.g. \"-DFA_HOPPER_HANG_REPORT=ON\"")
        p.add_argument(f"--{side}-bin", metavar="PATH",
                       help=f"{side} side: a fa-bench already built (no revision, no build)")
    p.add_argument("--rounds", metavar="R", default="3",
                   help="runs of each configuration per side, interleaved (default 3)")
    p.add_argument("--out", metavar="DIR",
                   help="where results and logs go (default results/compare-<UTC time>)")
    p.add_argument("--gate-args", metavar="ARGS", default="",
                   help="more arguments for fa-bench gate, e.g. \"--strict --markdown sum.md\"")
    return p


def parse_args(argv: list[str]):
    """(options, fa-bench arguments). Raises Failure(code 2) naming the flag at fault."""
    own, bench = (argv[: argv.index("--")], argv[argv.index("--") + 1:]) if "--" in argv else (argv, [])
    # "--base-cmake -DX=1": a value that starts with '-' would read as a flag to argparse.
    joined, i = [], 0
    while i < len(own):
        if own[i] in VALUE_FLAGS and i + 1 < len(own):
            joined.append(f"{own[i]}={own[i + 1]}")
            i += 2
        else:
            joined.append(own[i])
            i += 1
    try:
        o = parser().parse_args(joined)
    except ArgumentError as e:
        raise usage_error(f"{e} (see --help)") from None

    try:
        o.rounds = int(o.rounds)
    except ValueError:
        raise usage_error(f"--rounds: '{o.rounds}' is not a number (accepted: 1 or more)") from None
    if o.rounds < 1:
        raise usage_error(f"--rounds: {o.rounds} (accepted: 1 or more)")

    for side in SIDES:
        flag = f"--{side}"
        cmake_flag = f"{flag}-cmake"
        try:
            words = shlex.split(getattr(o, f"{side}_cmake"))
        except ValueError as e:
            raise usage_error(f"{cmake_flag}: {e} (accepted: -DNAME=VALUE or -UNAME words)") from None
        for w in words:
            if not (w.startswith(("-D", "-U")) and len(w) > 2):
                raise usage_error(f"{cmake_flag}: '{w}' (accepted: -DNAME=VALUE or -UNAME words; "
                                  "the tool sets the source, build folder and generator)")
        setattr(o, f"{side}_cmake", words)
        binary = getattr(o, f"{side}_bin")
        if binary is not None:
            if getattr(o, side) is not None or words:
                raise usage_error(f"{flag}-bin: a prebuilt binary takes no {flag} or {cmake_flag} "
                                  "(accepted: a revision with CMake options, or a binary)")
            path = Path(binary)
            if not (path.is_file() and os.access(path, os.X_OK)):
                raise usage_error(f"{flag}-bin: '{binary}' is not an executable file "
                                  "(accepted: a built fa-bench)")
            setattr(o, f"{side}_bin", path.resolve())
        rev = getattr(o, side)
        if rev is not None:
            sha = git("rev-parse", "--verify", "--quiet", f"{rev}^{{commit}}", check=False)
            if not sha:
                raise usage_error(f"{flag}: '{rev}' is not a commit of this repository "
                                  "(accepted: a branch, tag or commit)")
            setattr(o, side, sha)
    if o.base_bin is not None and o.current_bin is not None:
        if o.base_bin == o.current_bin:
            raise usage_error("--base-bin and --current-bin are the same file (accepted: two builds)")
    elif (o.base_bin is None and o.current_bin is None and o.base == o.current
          and o.base_cmake == o.current_cmake):
        raise usage_error("the two sides are the same build (accepted: --base REV or --current REV "
                          "naming another revision, or different --base-cmake/--current-cmake, "
                          "or --base-bin/--current-bin)")

    for a in bench:
        name = a.split("=", 1)[0]
        if name in RESERVED:
            raise usage_error(f"fa-bench argument {name}: set by the tool ({RESERVED[name]})")
    if bench[:1] and not bench[0].startswith("-"):
        raise usage_error(f"fa-bench argument '{bench[0]}': a sweep is compared, not a subcommand "
                          "(accepted: fa-bench's sweep flags after --)")
    bench = list(bench) or list(DEFAULT_BENCH_ARGS)
    if not any(a.split("=", 1)[0] in ("--repetitions", "--min-time") for a in bench):
        bench += ["--repetitions", DEFAULT_REPETITIONS]

    try:
        o.gate_args = shlex.split(o.gate_args)
    except ValueError as e:
        raise usage_error(f"--gate-args: {e}") from None
    for a in o.gate_args:
        if a.split("=", 1)[0] in GATE_RESERVED:
            raise usage_error(f"--gate-args: {a.split('=', 1)[0]} is set by the tool (the two "
                              "sides' files)")
    if "--require-gpu" not in bench:
        bench.append("--require-gpu")  # no GPU: stop at the first run, not at the gate
    if "--no-counters" in bench and "--time-only" not in o.gate_args:
        o.gate_args.append("--time-only")
    return o, bench


def git(*args: str, check: bool = True, where: Path = REPO) -> str:
    run = subprocess.run(["git", "-C", str(where), *args], capture_output=True, text=True)
    if check and run.returncode != 0:
        raise Failure(f"git {' '.join(args)}: {run.stderr.strip()}", 3)
    return run.stdout.strip() if run.returncode == 0 else ""


# ---- Building ------------------------------------------------------------------------------


def log_run(cmd: list, log: Path) -> int:
    with open(log, "a") as f:
        f.write(f"$ {shlex.join(map(str, cmd))}\n")
        f.flush()
        return subprocess.run(list(map(str, cmd)), stdout=f, stderr=subprocess.STDOUT).returncode


def tail(path: Path, lines: int = 15) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return ""


def source_of(side: str, sha: str | None) -> Path:
    """The working tree, or a worktree of `sha` in build-compare/<side>/src."""
    if sha is None:
        return REPO
    src = REPO / "build-compare" / side / "src"
    git("worktree", "prune")
    if (src / ".git").exists():
        git("checkout", "-q", "--detach", "--force", sha, where=src)
        git("clean", "-fdq", where=src)
    else:
        if src.exists():
            shutil.rmtree(src)
        git("worktree", "add", "-q", "--detach", "-f", str(src), sha)
    for name in (".venv", ".whl"):
        link = src / name
        if (REPO / name).exists() and not link.exists() and not link.is_symlink():
            link.symlink_to(REPO / name)
    return src


def build(side: str, sha: str | None, cmake_args: list[str], out: Path) -> Path:
    src = source_of(side, sha)
    folder = REPO / "build-compare" / side / "build"
    folder.mkdir(parents=True, exist_ok=True)
    log = out / f"build-{side}.log"
    log.write_text("")
    # Configured afresh: CMake's cache would keep an option an earlier comparison gave this side
    # (the objects stay, so only what the options change is rebuilt).
    (folder / "CMakeCache.txt").unlink(missing_ok=True)
    what = f"{side}: {'revision ' + sha[:12] if sha else 'working tree'}" + (
        f" with {' '.join(cmake_args)}" if cmake_args else "")
    print(f"compare: building {what} in {folder} (log: {log})", file=sys.stderr)
    ok = log_run(["cmake", "-S", src, "-B", folder, "-G", "Ninja", "-DCMAKE_BUILD_TYPE=Release",
                  "-DFA_BUILD_TESTS=OFF", *cmake_args], log) == 0
    ok = ok and log_run(["cmake", "--build", folder, "--target", "fa-bench"], log) == 0
    binary = folder / "bin" / "fa-bench"
    if not ok or not binary.is_file():
        raise Failure(f"{tail(log)}\ncompare: the {side} build failed (log: {log})", 3)
    return binary


# ---- Running -------------------------------------------------------------------------------


def plan_size(binary: Path, bench: list[str], out: Path) -> int:
    """How many configurations fa-bench plans for the arguments (a --model-only run: no GPU)."""
    plan, log = out / "plan.json", out / "plan.log"
    plan.unlink(missing_ok=True)
    log.write_text("")
    plan_args = [a for a in bench if a != "--require-gpu"]
    rc = log_run([binary, *plan_args, "--model-only", "--json", plan], log)
    if rc != 0:
        raise Failure(f"{tail(log)}\ncompare: fa-bench refused the arguments (exit {rc}; "
                      f"log: {log})", 2 if rc == 2 else 3)
    n = len(json.loads(plan.read_text())["configs"])
    if n == 0:
        raise usage_error("fa-bench arguments: the sweep has no configuration")
    return n


def run_order(rounds: int, configs: int) -> list[tuple[int, int, str]]:
    """(round, configuration, side) in run order: each configuration on both sides back to
    back, base first in odd rounds (1, 3, ...) and current first in even ones."""
    order = []
    for r in range(rounds):
        sides = SIDES if r % 2 == 0 else SIDES[::-1]
        for c in range(configs):
            order += [(r, c, s) for s in sides]
    return order


def run_all(binaries: dict, bench: list[str], rounds: int, configs: int, out: Path) -> dict:
    """Runs the sweep; {(side, configuration): [result document per round]}."""
    runs = out / "runs"
    runs.mkdir(parents=True, exist_ok=True)
    docs: dict = {}
    order = run_order(rounds, configs)
    for k, (r, c, side) in enumerate(order):
        stem = runs / f"{side}-c{c}-r{r}"
        shard = ["--shard", f"{c}/{configs}"] if configs > 1 else []
        json_path, log = stem.with_suffix(".json"), stem.with_suffix(".log")
        json_path.unlink(missing_ok=True)  # a file left by an earlier comparison in OUT
        log.write_text("")
        t0 = time.monotonic()
        rc = log_run([binaries[side], *bench, *shard, "--json", json_path], log)
        print(f"compare: [{k + 1}/{len(order)}] round {r + 1}/{rounds}, configuration "
              f"{c + 1}/{configs}, {side}: exit {rc}, {time.monotonic() - t0:.1f} s",
              file=sys.stderr)
        # 0: done; 1: a row failed (the gate reports it); anything else: no usable file.
        if rc not in (0, 1) or not json_path.is_file():
            raise Failure(f"{tail(log)}\ncompare: the {side} fa-bench run failed (exit {rc}; log: "
                          f"{log})", 2 if rc == 2 else 3)
        docs.setdefault((side, c), []).append(json.loads(json_path.read_text()))
    return docs


# ---- Combining rounds ----------------------------------------------------------------------


def _bad(row: dict) -> bool:
    return row.get("status") in ("failed", "error") or \
        (row.get("verification") or {}).get("passed") is False


def _rows_by_identity(config: dict, version: str) -> dict:
    return {json.dumps(schema.row_identity(r, version)): r for r in config["results"]}


def combine_rounds(docs: list[dict]) -> dict:
    """One result document from several runs of the same configurations with one build."""
    out = copy.deepcopy(docs[0])
    version = out.get("schema", "")
    for config in out["configs"]:
        key = schema.config_key(config, version)
        others = [_rows_by_identity(c, version) for d in docs[1:] for c in d["configs"]
                  if schema.config_key(c, d.get("schema")) == key]
        changed = False
        for i, row in enumerate(config["results"]):
            ident = json.dumps(schema.row_identity(row, version))
            rounds = [row] + [o[ident] for o in others if ident in o]
            worst = next((r for r in rounds if _bad(r)), None)
            if worst is not None:
                config["results"][i] = copy.deepcopy(worst)
                continue
            if len(rounds) < 2 or any(r.get("status") != "ok" or not r.get("timing")
                                      for r in rounds):
                continue
            timing = row["timing"]
            old = timing["median_ms"]
            timing["samples_ms"] = [s for r in rounds for s in r["timing"]["samples_ms"]]
            timing.update(schema.summarize(timing["samples_ms"]))
            for edge in ("before", "after"):
                mhz = [r["timing"]["sm_clock_mhz"][edge] for r in rounds]
                if all(m > 0 for m in mhz):
                    timing["sm_clock_mhz"][edge] = round(sum(mhz) / len(mhz))
            scale = old / timing["median_ms"] if timing["median_ms"] > 0 else 1.0
            for block in ("derived", "measured"):
                for name in TIME_SCALED:
                    if isinstance((row.get(block) or {}).get(name), (int, float)):
                        row[block][name] *= scale
            if isinstance(row.get("placement"), dict) and "fraction" in row["placement"]:
                row["placement"]["fraction"] *= scale
            changed = True
        if changed:
            _recompare_peers(config)
    return out


def _recompare_peers(config: dict) -> None:
    """speed_vs_best_peer from the combined medians, against the peer the first round named."""
    labels = dict(zip(map(id, config["results"]), schema.row_labels(config["results"])))
    for row in config["results"]:
        derived = row.get("derived") or {}
        if row.get("peer") or row.get("status") != "ok" or not derived.get("best_peer"):
            continue
        peer = next((p for p in config["results"] if p.get("peer") and p.get("status") == "ok"
                     and labels[id(p)] == derived["best_peer"]), None)
        if peer is not None:
            derived["speed_vs_best_peer"] = peer["timing"]["median_ms"] / row["timing"]["median_ms"]


# ---- Table and verdict ---------------------------------------------------------------------


def _config_label(c: dict, version: str | None = None) -> str:
    """fa-bench's shape text (H_kv and N_kv where they differ from H and N), mask and dtype."""
    return f"{schema.shape_text(c, version)} {'causal' if c['causal'] else 'full'} {c['dtype']}"


def _medians(docs: list[dict]) -> dict:
    """{(config label, row label): [(median ms or None, status, TFLOP/s or None) per doc]}."""
    out: dict = {}
    for doc in docs:
        for c in doc["configs"]:
            for row, label in zip(c["results"], schema.row_labels(c["results"])):
                ok = row.get("status") == "ok" and not _bad(row) and row.get("timing")
                status = "unverified" if (row.get("verification") or {}).get("passed") is False \
                    else row.get("status", "?")
                out.setdefault((_config_label(c, doc.get("schema")), label), []).append(
                    (row["timing"]["median_ms"] if ok else None, status,
                     (row.get("derived") or {}).get("tflops_convention") if ok else None))
    return out


def table(rounds: dict, combined: dict) -> list[str]:
    """The per-row lines: TFLOP/s per side, speed current/base, its range over the rounds.
    rounds: {side: [document per round]} (configurations of a round may be spread over several
    documents: pass them all); combined: {side: merged document}."""
    per_round = {s: _medians(d) for s, d in rounds.items()}
    whole = {s: _medians([d]) for s, d in combined.items()}
    keys = list(dict.fromkeys(k for s in SIDES for k in whole[s]))
    width = max([len(k[0]) for k in keys] + [6])
    rwidth = max([len(k[1]) for k in keys] + [3])
    lines = ["TFLOP/s of each build; speed = base time / current time (above 1: current is "
             "faster), over all rounds, and its range over the rounds one by one",
             f"{'config':<{width}}  {'row':<{rwidth}}  {'base':>12}  {'current':>12}  "
             f"{'speed':>8}  rounds"]
    for key in keys:
        b = whole["base"].get(key, [(None, "missing", None)])[0]
        c = whole["current"].get(key, [(None, "missing", None)])[0]
        cells = [f"{x[2]:12.1f}" if x[2] is not None else f"{x[1][:12]:>12}" for x in (b, c)]
        speed, spread = "-", ""
        if b[0] and c[0]:
            speed = f"{b[0] / c[0]:.3f}"
            pairs = zip(per_round["base"].get(key, []), per_round["current"].get(key, []))
            ratios = [pb[0] / pc[0] for pb, pc in pairs if pb[0] and pc[0]]
            if len(ratios) > 1:
                spread = f"{min(ratios):.3f}-{max(ratios):.3f}"
        lines.append(f"{key[0]:<{width}}  {key[1]:<{rwidth}}  {cells[0]}  {cells[1]}  "
                     f"{speed:>8}  {spread}".rstrip())
    return lines


def merge_side(binary: Path, files: list[Path], target: Path, out: Path) -> None:
    log = out / f"merge-{target.stem}.log"
    log.write_text("")
    rc = log_run([binary, "merge", *files, "-o", target], log)
    if rc != 0:
        raise Failure(f"{tail(log)}\ncompare: fa-bench merge failed (exit {rc}; log: {log})", 3)


def compare(o, bench: list[str]) -> int:
    out = Path(o.out or f"results/compare-{datetime.datetime.now(datetime.timezone.utc):%Y%m%d-%H%M%S}")
    out.mkdir(parents=True, exist_ok=True)
    out = out.resolve()
    binaries = {s: getattr(o, f"{s}_bin") for s in SIDES}
    if any(b is None for b in binaries.values()):
        rc = subprocess.run([str(REPO / "scripts" / "setup.sh"), "--cxx"]).returncode
        if rc != 0:
            raise Failure(f"compare: scripts/setup.sh --cxx failed (exit {rc})", 3)
        for s in SIDES:
            if binaries[s] is None:
                binaries[s] = build(s, getattr(o, s), getattr(o, f"{s}_cmake"), out)
    configs = plan_size(binaries["current"], bench, out)
    print(f"compare: {configs} configuration(s) x {o.rounds} round(s) x 2 builds: "
          f"fa-bench {shlex.join(bench)}", file=sys.stderr)
    docs = run_all(binaries, bench, o.rounds, configs, out)

    merged = {}
    for side in SIDES:
        folder = out / side
        folder.mkdir(exist_ok=True)
        files = []
        for c in range(configs):
            path = folder / f"c{c}.json"
            path.write_text(json.dumps(combine_rounds(docs[(side, c)]), allow_nan=False))
            files.append(path)
        merge_side(binaries["current"], files, out / f"{side}.json", out)
        merged[side] = json.loads((out / f"{side}.json").read_text())
    print("\n".join(table({s: [d for c in range(configs) for d in docs[(s, c)]] for s in SIDES},
                          merged)))
    print(flush=True)
    gate = [str(binaries["current"]), "gate", "--baseline", str(out / "base.json"),
            "--current", str(out / "current.json"), *o.gate_args]
    print(f"compare: {shlex.join(gate)}", file=sys.stderr, flush=True)
    return subprocess.run(gate).returncode


def main(argv: list[str]) -> int:
    if any(a in ("-h", "--help") for a in argv[: argv.index("--") if "--" in argv else len(argv)]):
        parser().print_help()
        return 0
    try:
        o, bench = parse_args(argv)
        return compare(o, bench)
    except Failure as e:
        print(f"compare_builds: error: {e}" if e.code == 2 else str(e), file=sys.stderr)
        return e.code
    except KeyboardInterrupt:
        print("compare: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
