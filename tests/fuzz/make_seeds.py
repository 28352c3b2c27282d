"""Write small seed inputs for the result-reader fuzzer (scripts/fuzz.sh) into a directory.

    python3 tests/fuzz/make_seeds.py OUT_DIR

Seeds are cut down from a real H200 result file (tests/data/gate-h200-base.json): one or two
rows, a dozen samples, plus variants with nulls and a failed row, so the fuzzer starts from
inputs the reader accepts and mutates them quickly (small inputs run fast).
"""

from __future__ import annotations

import copy
import json
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def main() -> int:
    out = Path(sys.argv[1])
    out.mkdir(parents=True, exist_ok=True)
    doc = json.loads((REPO / "tests" / "data" / "gate-h200-base.json").read_text())
    doc.pop("derived_from", None)
    config = doc["configs"][0]
    config["results"] = [r for r in config["results"] if r["variant"] in ("standard", "fa2")]
    for r in config["results"]:
        r["timing"]["samples_ms"] = r["timing"]["samples_ms"][:12]
        r["model"]["terms"] = r["model"]["terms"][:2]
    doc["configs"] = [config]
    seeds = {"small.json": doc}

    one = copy.deepcopy(doc)
    one["configs"][0]["results"] = one["configs"][0]["results"][1:]
    one["configs"][0]["results"][0]["counters"] = None
    one["configs"][0]["results"][0]["measured"] = None
    seeds["no-counters.json"] = one

    failed = copy.deepcopy(doc)
    r = failed["configs"][0]["results"][0]
    r["status"] = "failed"
    r["verification"]["passed"] = False
    for k in ("timing", "derived", "counters", "measured"):
        r[k] = None
    seeds["failed.json"] = failed

    no_gpu = copy.deepcopy(doc)
    no_gpu["device"] = None
    no_gpu["settings"]["model_only"] = True
    for r in no_gpu["configs"][0]["results"]:
        r["status"] = "model_only"
        for k in ("verification", "timing", "derived", "counters", "measured"):
            r[k] = None
    seeds["no-gpu.json"] = no_gpu

    # Impossible values the reader refuses (issue 13): the fuzzer starts next to the checks.
    def changed(change) -> dict:
        d = copy.deepcopy(doc)
        change(d, d["configs"][0]["results"][0])
        return d

    def set_all_samples(value):
        def change(_d, r):
            r["timing"]["samples_ms"] = [value] * len(r["timing"]["samples_ms"])

        return change

    seeds["dup-config.json"] = changed(lambda d, _r: d["configs"].append(copy.deepcopy(d["configs"][0])))
    seeds["negative-sample.json"] = changed(lambda _d, r: r["timing"]["samples_ms"].__setitem__(0, -5.04))
    seeds["zero-samples.json"] = changed(set_all_samples(0))
    seeds["empty-samples.json"] = changed(lambda _d, r: r["timing"].update(samples_ms=[]))
    seeds["negative-counter.json"] = changed(
        lambda _d, r: r["counters"]["values"].update({k: -1.0 for k in r["counters"]["values"]})
    )
    seeds["null-counter.json"] = changed(
        lambda _d, r: r["counters"]["values"].update({next(iter(r["counters"]["values"])): None})
    )
    seeds["negative-tflops.json"] = changed(lambda _d, r: r["derived"].update(tflops_convention=-109.0))
    seeds["negative-model-bytes.json"] = changed(lambda _d, r: r["model"].update(bytes_read=-1))

    for name, d in seeds.items():
        (out / name).write_text(json.dumps(d, separators=(",", ":")))
    (out / "compact-indent.json").write_text(json.dumps(doc, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
