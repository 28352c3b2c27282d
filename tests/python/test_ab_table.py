"""scripts/ab_table.py: the side-by-side TFLOP/s table of scripts/exp2_ab.sh and
scripts/fp8_quant_sweep.sh (ratios to the first side; failed and unverified rows show their
status and no ratio)."""

import importlib.util
import json
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "ab_table.py"
spec = importlib.util.spec_from_file_location("ab_table", SCRIPT)
ab_table = importlib.util.module_from_spec(spec)
spec.loader.exec_module(ab_table)


def result(rows):
    """A result document with one config per (d, causal, N) and the given rows in it."""
    configs = {}
    for variant, d, causal, n, tflops, status, passed in rows:
        c = configs.setdefault((d, causal, n), {"d": d, "causal": causal, "N": n, "results": []})
        r = {"variant": variant, "status": status, "derived": {"tflops_convention": tflops}}
        if passed is not None:
            r["verification"] = {"passed": passed}
        if variant == "fp8":
            r["kernel_config"] = {"block_q": 128, "block_kv": 128}
            r["options"] = {"fp8_schedule": "tiles"}
        c["results"].append(r)
    return {"configs": list(configs.values())}


def write(tmp_path, name, doc):
    path = tmp_path / name
    path.write_text(json.dumps(doc))
    return str(path)


def test_ratio_to_the_first_side(tmp_path):
    base = write(tmp_path, "base.json", result([("fp8", 128, False, 4096, 600.0, "ok", True)]))
    cand = write(tmp_path, "cand.json", result([("fp8", 128, False, 4096, 660.0, "ok", True)]))
    sides = [("base", ab_table.read_rows(base)), ("cand", ab_table.read_rows(cand))]
    lines = ab_table.table(sides)
    assert len(lines) == 2
    assert "fp8@128x128~tiles" in lines[1]
    assert lines[1].split()[-1] == "1.100"


def test_unverified_and_failed_rows_have_no_ratio(tmp_path):
    base = write(tmp_path, "base.json", result([("fa2", 64, True, 1024, 300.0, "ok", True),
                                                ("cudnn", 64, True, 1024, 310.0, "ok", True)]))
    cand = write(tmp_path, "cand.json", result([("fa2", 64, True, 1024, 330.0, "ok", False),
                                                ("cudnn", 64, True, 1024, None, "failed", None)]))
    lines = ab_table.table([("base", ab_table.read_rows(base)), ("cand", ab_table.read_rows(cand))])
    by_variant = {line.split()[0]: line.split() for line in lines[1:]}
    assert by_variant["fa2"][-2:] == ["unverifie", "-"]
    assert by_variant["cudnn"][-2:] == ["failed", "-"]


def test_a_missing_file_is_a_side_without_rows(tmp_path):
    base = write(tmp_path, "base.json", result([("fp8", 64, False, 4096, 500.0, "ok", True)]))
    sides = [("base", ab_table.read_rows(base)),
             ("gone", ab_table.read_rows(str(tmp_path / "absent.json")))]
    lines = ab_table.table(sides)
    assert lines[1].split()[-2:] == ["-", "-"]


def test_usage_without_sides():
    assert ab_table.main(["ab_table.py"]) == 2
    assert ab_table.main(["ab_table.py", "no-equals-sign"]) == 2
