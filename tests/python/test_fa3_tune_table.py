"""scripts/fa3_tune_table.py on hand-made result files: the winner per (d, causal) and the exit
codes; each check can fail."""

import importlib.util
import json
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "fa3_tune_table.py"
spec = importlib.util.spec_from_file_location("fa3_tune_table", SCRIPT)
table = importlib.util.module_from_spec(spec)
spec.loader.exec_module(table)


def row(variant, tflops, schedule=None, tile=(128, 128), status="ok", passed=True):
    r = {"variant": variant, "status": status, "direction": "forward",
         "derived": {"tflops_convention": tflops} if status == "ok" else None,
         "verification": {"passed": passed} if status in ("ok", "failed") else None}
    if variant == "fa3":
        r["options"] = {"schedule": schedule}
        r["kernel_config"] = {"block_q": tile[0], "block_kv": tile[1]}
    return r


def doc(rows_by_n, d=64, causal=False):
    return {"configs": [{"d": d, "causal": causal, "N": n, "results": rs}
                        for n, rs in rows_by_n.items()]}


def write(tmp_path, d):
    p = tmp_path / "r.json"
    p.write_text(json.dumps(d))
    return str(p)


def test_winner_is_the_best_geomean_that_ran_everywhere(tmp_path, capsys):
    d = doc({
        4096: [row("cudnn", 500), row("fa3", 450, "full"), row("fa3", 480, "dynamic"),
               row("fa3", 600, "tma-store")],
        8192: [row("cudnn", 500), row("fa3", 450, "full"), row("fa3", 490, "dynamic"),
               row("fa3", None, "tma-store", status="unsupported", passed=None)],
    })
    rows = table.collect(d)
    w = table.winners(rows)[(64, False)]
    # tma-store is faster at 4096 but did not run at 8192: it does not win.
    assert w[0][0] == "dynamic@128x128"
    assert abs(w[0][1] - ((480 / 500) * (490 / 500)) ** 0.5) < 1e-9
    assert [x[0] for x in w] == ["dynamic@128x128", "full@128x128"]
    assert table.main(["x", write(tmp_path, d)]) == 0
    out = capsys.readouterr().out
    assert "winner d=64 non-causal: dynamic@128x128" in out
    assert "default_plan(64, false, 128) -> {Grid::dynamic, Epilogue::registers}" in out


def test_a_failed_row_never_wins_and_fails_the_run(tmp_path, capsys):
    d = doc({4096: [row("cudnn", 500), row("fa3", 450, "full"),
                    row("fa3", 700, "dynamic-tma-store", status="failed", passed=False)]},
            d=128, causal=True)
    w = table.winners(table.collect(d))[(128, True)]
    assert [x[0] for x in w] == ["full@128x128"]
    assert table.main(["x", write(tmp_path, d)]) == 3
    out = capsys.readouterr().out
    assert "default_plan unchanged" in out
    assert "d=128 causal=1 N=4096 dynamic-tma-store@128x128" in out


def test_no_fa3_rows_or_no_file(tmp_path, capsys):
    assert table.main(["x", write(tmp_path, doc({4096: [row("cudnn", 500)]}))]) == 1
    assert table.main(["x", str(tmp_path / "missing.json")]) == 1
    assert "error" in capsys.readouterr().err
