"""scripts/ncu_side_by_side.py on hand-written ncu CSV: parsing, ordering, and its failures."""

import importlib.util
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "ncu_side_by_side.py"
spec = importlib.util.spec_from_file_location("ncu_side_by_side", SCRIPT)
sbs = importlib.util.module_from_spec(spec)
sys.modules["ncu_side_by_side"] = sbs
spec.loader.exec_module(sbs)

HEADER = ('"ID","Process ID","Process Name","Host Name","Kernel Name","Context","Stream",'
          '"Block Size","Grid Size","Device","CC","Section Name","Metric Name","Metric Unit",'
          '"Metric Value"')


def report(kernel: str, values: dict, extra_id: bool = False) -> str:
    lines = ["==PROF== Connected to process 1", "some program output, 273.4 TFLOP/s", HEADER]
    for (section, metric, unit), v in values.items():
        lines.append(f'"0","1","p","h","{kernel}","1","7","(128, 1, 1)","(32, 64, 1)","0","9.0",'
                     f'"{section}","{metric}","{unit}","{v}"')
    if extra_id:
        lines.append(f'"1","1","p","h","{kernel}","1","7","(128, 1, 1)","(32, 64, 1)","0","9.0",'
                     '"LaunchStats","Registers Per Thread","register/thread","1"')
    lines.append("==PROF== Disconnected from process 1")
    return "\n".join(lines)


A = {("LaunchStats", "Registers Per Thread", "register/thread"): "255",
     ("WarpStateStats", "Stall Barrier", "cycle"): "4.00",
     ("SpeedOfLight", "Duration", "us"): "1,100.5",
     ("MemoryWorkloadAnalysis_Tables", "Cache Policy", ""): "evict_first"}
B = {("LaunchStats", "Registers Per Thread", "register/thread"): "255",
     ("WarpStateStats", "Stall Barrier", "cycle"): "1.00",
     ("SpeedOfLight", "Duration", "us"): "1,000.5"}


def test_reads_the_csv_among_other_output():
    metrics, name, count = sbs.read_report(report("fa2_forward_kernel", A, extra_id=True))
    assert name == "fa2_forward_kernel" and count == 2
    assert metrics[("SpeedOfLight", "Duration", "us")] == pytest.approx(1100.5)  # thousands comma
    assert metrics[("LaunchStats", "Registers Per Thread", "register/thread")] == 255  # first kernel
    assert ("MemoryWorkloadAnalysis_Tables", "Cache Policy", "") not in metrics  # text skipped


def test_big_differences_first():
    a, _, _ = sbs.read_report(report("fa2", A))
    b, _, _ = sbs.read_report(report("flash_fwd", B))
    rows = sbs.side_by_side(a, b, 0.05)
    assert [r[0][1] for r in rows] == ["Stall Barrier", "Duration", "Registers Per Thread"]
    assert rows[0][3] == pytest.approx(4.0)


def test_failures(tmp_path, capsys):
    good = tmp_path / "a.csv"
    good.write_text(report("fa2", A))
    none = tmp_path / "none.csv"
    none.write_text("==PROF== no kernels were profiled\n")
    assert sbs.main([str(good), str(none)]) == 1
    assert "no ncu CSV" in capsys.readouterr().err
    other = tmp_path / "other.csv"
    other.write_text(report("k", {("X", "Y", "z"): "1"}))
    assert sbs.main([str(good), str(other)]) == 1
    assert sbs.main([str(good), str(good), "--names", "fa2", "fa2b"]) == 0
    assert "Stall Barrier" in capsys.readouterr().out


def test_rows_shorter_than_the_header_with_rule_columns():
    # ncu 2025.3 (H100, 2026-11-25): the header carries the rule columns, a metric's row ends at
    # its value when no rule fired on it. Such rows must count (they were all dropped once).
    header = HEADER + ',"Rule Name","Rule Type","Rule Description","Estimated Speedup Type"'
    text = report("fa2_forward_kernel", A).replace(HEADER, header)
    metrics, _, _ = sbs.read_report(text)
    assert metrics[("WarpStateStats", "Stall Barrier", "cycle")] == pytest.approx(4.0)
