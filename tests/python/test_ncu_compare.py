"""scripts/ncu_compare.py with no GPU: ncu's CSV, the row matching, the verdicts, and a whole run
on stand-ins for fa-bench and ncu."""

import importlib.util
import os
import stat
import sys
import textwrap
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "ncu_compare.py"
spec = importlib.util.spec_from_file_location("ncu_compare", SCRIPT)
nc = importlib.util.module_from_spec(spec)
sys.modules["ncu_compare"] = nc
spec.loader.exec_module(nc)

# ncu --csv --page raw --print-units base with the script's metrics, two ranges, inside the
# program's own output: the header, the units row, one row per range.
HEADER = ('"ID","Process ID","Process Name","Host Name","Kernel Name","Context","Stream","Device",'
          '"CC","dram__bytes_read.sum","dram__bytes_write.sum",'
          '"sm__ops_path_tensor_src_bf16_dst_fp32.sum","sm__ops_path_tensor_src_fp16.sum",'
          '"sm__ops_path_tensor_src_fp8.sum"')
UNITS = '"","","","","","","","","","byte","byte","","",""'
CSV = "\n".join([
    "==PROF== Connected to process 4242 (/work/build/bin/fa-bench)",
    "| fa2 | 2048 | 64 | ok |",
    "==PROF== Profiling \"range\" - 0: 0%....50%....100% - 1 pass",
    HEADER,
    UNITS,
    '"0","4242","fa-bench","h200","range","1","","0","9.0","262,144,000","1,048,576","137,438,953,472","0","0"',
    '"1","4242","fa-bench","h200","range","1","","0","9.0","6.5e+08","2.0e+06","n/a","0","1.37439e+11"',
])


def test_results_in_base_units_with_the_slack_of_their_digits():
    results = nc.ncu_results(CSV)
    assert len(results) == 2
    assert results[0]["dram"] == 262_144_000 + 1_048_576
    assert results[0]["tensor"] == 137_438_953_472
    assert results[0]["tensor_slack"] == pytest.approx(1.5)  # three integers: half a unit each
    assert results[1]["dram"] == pytest.approx(6.52e8)
    assert results[1]["tensor"] == pytest.approx(1.37439e11)  # "n/a" counts as none
    assert results[1]["tensor_slack"] == pytest.approx(0.5 + 0.5 + 0.5e6)


def test_scaled_units_are_refused():
    scaled = CSV.replace(UNITS, UNITS.replace('"byte","byte"', '"Mbyte","byte"'))
    with pytest.raises(nc.NcuOutputError, match="--print-units base"):
        nc.ncu_results(scaled)


def test_csv_without_the_metrics_is_refused():
    with pytest.raises(nc.NcuOutputError):
        nc.ncu_results('"ID","Kernel Name","gpu__time_duration.sum"\n"0","k","12"')


def test_no_csv_is_no_result():
    assert nc.ncu_results("==PROF== Disconnected from process 4242\n") == []


def row(variant="fa2", direction="forward", status="ok", dram=1e9, tensor=1.0e11, ncu_dram=1e9,
        ncu_tensor=1.0e11, slack=0.5, kernels=0, reason=""):
    r = nc.Row(variant, direction, 2048, 64, False, "{}", status, reason, kernels=kernels,
               dram=dram, tensor=tensor)
    if ncu_dram is not None:
        r.ncu = {"dram": ncu_dram, "tensor": ncu_tensor, "tensor_slack": slack}
    return r


def test_one_kernel_within_two_percent_passes():
    assert nc.judge(row(dram=1.019e9)).ok
    assert nc.judge(row(dram=0.981e9)).ok


def test_one_kernel_off_by_more_than_two_percent_fails():
    v = nc.judge(row(dram=1.025e9))
    assert not v.ok and "DRAM +2.50% (limit 2%)" in v.text


@pytest.mark.parametrize("variant,direction,kernels", [
    ("standard", "forward", 0), ("fp8", "forward", 0), ("fp8-sm89", "forward", 2),
    ("fa2", "backward", 0), ("cudnn", "backward", 0), ("fa3", "forward", 2)])
def test_several_kernels_get_three_percent(variant, direction, kernels):
    assert nc.judge(row(variant, direction, kernels=kernels, dram=1.025e9)).ok
    assert not nc.judge(row(variant, direction, kernels=kernels, dram=1.035e9)).ok


def test_tensor_operations_must_be_equal():
    v = nc.judge(row(tensor=1.0e11 + 4096))
    assert not v.ok and "tensor ops" in v.text
    # ncu printed "1.00000e+11": the count may be anywhere within half its last digit.
    assert nc.judge(row(tensor=1.0e11 + 4096, slack=0.5e6)).ok


def test_no_tensor_operations_on_either_side_pass():
    assert nc.judge(row(tensor=0.0, ncu_tensor=0.0)).ok


def test_rows_without_figures_fail():
    assert "no ncu result" in nc.judge(row(ncu_dram=None)).text
    assert not nc.judge(row(ncu_dram=None)).ok
    unbuilt = row("fa3", status="unsupported", reason="unsupported: fa3 not built")
    assert not nc.judge(unbuilt).ok and "fa3 not built" in nc.judge(unbuilt).text
    assert not nc.judge(row(dram=None)).ok
    assert not nc.judge(row(ncu_dram=0.0)).ok


def test_a_pass_the_variant_lacks_is_not_checked():
    assert not nc.applicable(row("fa1", "backward", "unsupported",
                                 reason="unsupported: fa1 has no backward pass"))
    assert nc.applicable(row("fa3", status="unsupported", reason="unsupported: fa3 not built"))


def test_ranges_match_the_rows_that_opened_one():
    rows = [row("fa3", status="ok"), row("fa3", status="skipped"), row("fa3", status="failed")]
    rows[2].N = 4096
    results = [{"dram": 1.0}, {"dram": 2.0}]
    matched, why = nc.match_ranges(rows, results)
    assert why == "" and matched[rows[0].key]["dram"] == 1.0 and matched[rows[2].key]["dram"] == 2.0
    matched, why = nc.match_ranges(rows, results[:1])
    assert matched == {} and "1 results for 2 verified rows" in why


def test_table_marks_failures_and_counts_them():
    lines, failures = nc.table([row(), row(dram=1.1e9), row(ncu_dram=None)])
    assert failures == 2
    assert lines[0].startswith("| variant | direction | N | d | fa-bench DRAM | ncu DRAM | ratio")
    assert lines[2].endswith("pass (DRAM within 2%) |")
    assert "FAIL: DRAM +10.00%" in lines[3]
    assert "missing: no ncu result" in lines[4]


def test_rows_of_tell_kv_shapes_apart():
    """fa-bench/4: configurations that differ only by their K/V heads or length are rows of their
    own, and the table says which (square rows as ever)."""
    result = {"variant": "fa2", "direction": "forward", "options": {}, "status": "ok"}
    record = {"configs": [
        {"H": 32, "H_kv": 32, "N": 2048, "N_kv": 2048, "d": 64, "causal": False,
         "results": [result]},
        {"H": 32, "H_kv": 8, "N": 2048, "N_kv": 2048, "d": 64, "causal": False,
         "results": [result]},
        {"H": 32, "H_kv": 32, "N": 1, "N_kv": 4096, "d": 64, "causal": False,
         "results": [result]},
        {"N": 2048, "d": 64, "causal": False, "results": [result]}]}  # an older record
    rows = nc.rows_of(record)
    assert [r.kv for r in rows] == [(0, 0), (8, 0), (0, 4096), (0, 0)]
    assert len({r.key for r in rows}) == 3 and rows[0].key == rows[3].key
    lines, _ = nc.table(rows[:3])
    assert [line.split(" | ")[2] for line in lines[2:]] == ["2048", "2048 (H_kv 8)", "1 (N_kv 4096)"]


def test_rows_of_tell_pages_and_lengths_apart():
    """fa-bench/5: configurations that differ only by their cache's pages or their sequences'
    lengths are rows of their own, and the table says which (contiguous rows as ever)."""
    result = {"variant": "fa2", "direction": "forward", "options": {}, "status": "ok"}
    shape = {"H": 32, "H_kv": 8, "N": 1, "N_kv": 4096, "d": 64, "causal": False}
    lengths = [512, 4096, 1024, 2048, 4096, 3000, 2712, 2512]
    record = {"configs": [
        {**shape, "page_size": 0, "kv_lengths": None, "results": [result]},
        {**shape, "page_size": 64, "kv_lengths": None, "results": [result]},
        {**shape, "page_size": 64, "kv_lengths": lengths, "results": [result]},
        {**shape, "page_size": 0, "kv_lengths": [7, 4096], "results": [result]},
        {**shape, "results": [result]}]}  # a fa-bench/4 record
    rows = nc.rows_of(record)
    assert [r.cache for r in rows] == [(0, ()), (64, ()), (64, tuple(lengths)), (0, (7, 4096)),
                                       (0, ())]
    assert len({r.key for r in rows}) == 4 and rows[0].key == rows[4].key
    lines, _ = nc.table(rows[:4])
    assert [line.split(" | ")[2] for line in lines[2:]] == [
        "1 (H_kv 8, N_kv 4096)", "1 (H_kv 8, N_kv 4096, pages of 64)",
        "1 (H_kv 8, N_kv ≤4096, lengths 512..4096/sum=20000, pages of 64)",
        "1 (H_kv 8, N_kv ≤4096, lengths 7,4096)"]


# A whole run on stand-ins: fa-bench writes a record of the rows it was asked for (its fa3
# backward row plays a variant without that pass, in fa-bench's words) with its counters; ncu runs it and prints one range per
# verified row, with the DRAM bytes scaled by NCU_SCALE.
FAKE_BENCH = textwrap.dedent('''\
    #!{python}
    import json, sys
    # each --option with the word after it (a lone flag's is the next option: not read)
    a = {{x: sys.argv[i + 2] for i, x in enumerate(sys.argv[1:-1]) if x.startswith("--")}}
    flags = set(sys.argv[1:])
    rows = []
    for direction in {{"fwd": ["forward"], "bwd": ["backward"], "both": ["forward", "backward"]}}[a["--direction"]]:
        for v in a["--variants"].split(","):
            r = {{"variant": v, "direction": direction, "options": {{}}, "peer": v == "cudnn"}}
            if v == "fa3" and direction == "backward":
                r.update(status="unsupported", reason="unsupported: fa3 has no backward pass")
            else:
                r["status"] = "ok"
                if "--no-counters" not in flags:
                    r["counters"] = {{"status": "ok", "values": {{
                        "dram__bytes_read.sum": 1.0e9, "dram__bytes_write.sum": 1.0e7,
                        "sm__ops_path_tensor_src_bf16_dst_fp32.sum": 137438953472.0}}}}
            rows.append(r)
    json.dump({{"configs": [{{"N": 2048, "d": 64, "causal": False, "results": rows}}]}},
              open(a["--json"], "w"))
''')
FAKE_NCU = textwrap.dedent('''\
    #!{python}
    import json, os, subprocess, sys
    args = sys.argv[1:]
    i = next(k for k, x in enumerate(args) if x.endswith("fa-bench"))
    mode = args[args.index("--replay-mode") + 1]
    with open(os.environ["NCU_LOG"], "a") as log:
        log.write(mode + " " + " ".join(args[i + 1:]) + "\\n")
    subprocess.run(args[i:], check=True)
    record = json.load(open(args[args.index("--json") + 1]))
    print({header!r})
    print({units!r})
    scale = float(os.environ.get("NCU_SCALE", "1"))
    n = 0
    for c in record["configs"]:
        for r in c["results"]:
            if r["status"] == "ok":
                print(f'"{{n}}","1","fa-bench","h","range","1","","0","9.0",'
                      f'"{{1.0e9 * scale:.0f}}","{{1.0e7 * scale:.0f}}","137438953472","0","0"')
                n += 1
''')


@pytest.fixture
def stand_ins(tmp_path, monkeypatch):
    for name, text in (("fa-bench", FAKE_BENCH), ("ncu", FAKE_NCU)):
        p = tmp_path / name
        p.write_text(text.format(python=sys.executable, header=HEADER, units=UNITS))
        p.chmod(p.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("NCU_LOG", str(tmp_path / "ncu.log"))
    return tmp_path


def run_main(stand_ins, capsys, *extra):
    code = nc.main(["--bin", str(stand_ins / "fa-bench"), "--ncu", str(stand_ins / "ncu"),
                    "--N", "2048", "--d", "64", "--variants", "fa3,cudnn", *extra])
    return code, capsys.readouterr().out


def test_a_run_that_agrees_exits_0(stand_ins, capsys):
    code, out = run_main(stand_ins, capsys)
    assert code == 0, out
    assert "| fa3 | forward | 2048 | 64 | 1.01e+09 | 1.01e+09 | 1.0000 | 1.000000 | pass" in out
    assert "| cudnn | backward |" in out and "fa3 | backward" not in out
    log = (stand_ins / "ncu.log").read_text().splitlines()
    # One ncu run per (variant, direction); peers by application-range replay.
    # Two ranges per (variant, direction): the launch, then the launch with the write-back.
    assert [ln.split()[0] for ln in log] == ["range", "range"] + ["app-range"] * 4
    assert ["--profiler-range-write-back" in ln for ln in log] == [False, True] * 3
    assert all("--profiler-range" in ln and "--no-counters" in ln for ln in log)


def test_a_run_that_disagrees_exits_1(stand_ins, capsys, monkeypatch):
    monkeypatch.setenv("NCU_SCALE", "1.05")
    code, out = run_main(stand_ins, capsys)
    assert code == 1
    assert out.count("FAIL: DRAM -4.76%") == 3


def test_a_missing_range_exits_1(stand_ins, capsys, monkeypatch):
    monkeypatch.setenv("NCU_SCALE", "1")
    ncu = stand_ins / "ncu"
    ncu.write_text(ncu.read_text().replace('if r["status"] == "ok":', 'if False:'))
    code, out = run_main(stand_ins, capsys)
    assert code == 1 and "missing: launch range: ncu returned 0 results for 1 verified rows" in out


@pytest.mark.parametrize("flags", [["--N", "2k"], ["--d", ""], ["--direction", "up"],
                                   ["--variants", ","], ["--bin", "/nonexistent/fa-bench"]])
def test_bad_usage_exits_2(flags, stand_ins, capsys):
    args = ["--bin", str(stand_ins / "fa-bench"), "--ncu", str(stand_ins / "ncu")] + flags
    assert nc.main(args) == 2
    assert os.environ["NCU_LOG"] and not (stand_ins / "ncu.log").exists()
