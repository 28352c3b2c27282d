"""scripts/spill_check.py on recorded cuobjdump -res-usage output, run through a stand-in
cuobjdump: within budget passes, a kernel over its budget or new and spilling fails by name, a
missing cuobjdump is a skip with its reason, a missing budget is an error."""

import importlib.util
import json
import shutil
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "spill_check.py"
spec = importlib.util.spec_from_file_location("spill_check", SCRIPT)
spill_check = importlib.util.module_from_spec(spec)
sys.modules["spill_check"] = spill_check
spec.loader.exec_module(spill_check)

# cuobjdump 13.2 -res-usage on kernels/fa2/fa2.cu.o (FA_CUDA_ARCHITECTURES 80;90a), cut to three
# tiles and one FAULTS instantiation; the anonymous-namespace tag is the one nvcc gave in
# /work/main.
FA2 = "_ZN2fa38_GLOBAL__N__d604c495_6_fa2_cu_fa86b28118fa2_forward_kernel"
RES_USAGE = f"""
Fatbin ptx code:
================
arch = sm_80
code version = [9,0]
host = linux
compile_size = 64bit
compressed
identifier = /work/main/kernels/fa2/fa2.cu
ptxasOptions = --generate-line-info

Fatbin elf code:
================
arch = sm_80
code version = [1,8]
host = linux
compile_size = 64bit
identifier = /work/main/kernels/fa2/fa2.cu

Resource usage:
 Common:
  GLOBAL:0
 Function {FA2}ILi128ELi128ELi32ELi16ELb0E6__halfLb0EEEvNS0_9Fa2ParamsE:
  REG:166 STACK:0 SHARED:0 LOCAL:0 CONSTANT[2]:8 CONSTANT[0]:432 TEXTURE:0 SURFACE:0 SAMPLER:0
 Function {FA2}ILi128ELi128ELi64ELi32ELb0E6__halfLb0EEEvNS0_9Fa2ParamsE:
  REG:255 STACK:80 SHARED:0 LOCAL:0 CONSTANT[2]:8 CONSTANT[0]:432 TEXTURE:0 SURFACE:0 SAMPLER:0
 Function {FA2}ILi64ELi64ELi64ELi16ELb0E6__halfLb0EEEvNS0_9Fa2ParamsE:
  REG:128 STACK:8 SHARED:0 LOCAL:0 CONSTANT[0]:432 TEXTURE:0 SURFACE:0 SAMPLER:0
 Function {FA2}ILi128ELi128ELi64ELi32ELb0E6__halfLb1EEEvNS0_9Fa2ParamsE:
  REG:255 STACK:240 SHARED:0 LOCAL:0 CONSTANT[2]:8 CONSTANT[0]:432 TEXTURE:0 SURFACE:0 SAMPLER:0

Fatbin ptx code:
================
arch = sm_90a
code version = [9,0]
host = linux
compile_size = 64bit
compressed
identifier = /work/main/kernels/fa2/fa2.cu
ptxasOptions = --generate-line-info

Fatbin elf code:
================
arch = sm_90a
code version = [1,8]
host = linux
compile_size = 64bit
identifier = /work/main/kernels/fa2/fa2.cu

Resource usage:
 Common:
  GLOBAL:0
 Function {FA2}ILi128ELi128ELi32ELi16ELb0E6__halfLb0EEEvNS0_9Fa2ParamsE:
  REG:168 STACK:0 SHARED:1024 LOCAL:0 CONSTANT[0]:608 TEXTURE:0 SURFACE:0 SAMPLER:0
 Function {FA2}ILi128ELi128ELi64ELi32ELb0E6__halfLb0EEEvNS0_9Fa2ParamsE:
  REG:255 STACK:80 SHARED:1024 LOCAL:0 CONSTANT[0]:608 TEXTURE:0 SURFACE:0 SAMPLER:0
 Function {FA2}ILi64ELi64ELi64ELi16ELb0E6__halfLb0EEEvNS0_9Fa2ParamsE:
  REG:128 STACK:8 SHARED:1024 LOCAL:0 CONSTANT[0]:608 TEXTURE:0 SURFACE:0 SAMPLER:0
 Function {FA2}ILi128ELi128ELi64ELi32ELb0E6__halfLb1EEEvNS0_9Fa2ParamsE:
  REG:255 STACK:240 SHARED:1024 LOCAL:0 CONSTANT[0]:608 TEXTURE:0 SURFACE:0 SAMPLER:0
"""
KEY_128x64 = "_ZN2fa18_GLOBAL__N__fa2_cu18fa2_forward_kernelILi128ELi128ELi64ELi32ELb0E6__halfLb0EEEvNS0_9Fa2ParamsE"


def stand_in(tmp_path, text=RES_USAGE):
    """A cuobjdump that prints `text` (and a binary for it to read)."""
    (tmp_path / "res-usage.txt").write_text(text)
    tool = tmp_path / "cuobjdump"
    tool.write_text(f"#!/bin/sh\ncat '{tmp_path / 'res-usage.txt'}'\n")
    tool.chmod(0o755)
    binary = tmp_path / "fa-bench"
    binary.write_bytes(b"\x7fELF")
    return str(tool), str(binary)


def budget(tmp_path, edit=None):
    """The budget spill_check writes for RES_USAGE, changed by `edit` (on its architectures)."""
    tool, binary = stand_in(tmp_path)
    path = tmp_path / "spill-budget.json"
    assert spill_check.main([binary, "--write-budget", str(path), "--cuobjdump", tool]) == 0
    if edit:
        content = json.loads(path.read_text())
        edit(content["architectures"])
        path.write_text(json.dumps(content))
    return tool, binary, str(path)


def test_parse_keeps_architectures_apart():
    usage = spill_check.parse_res_usage(RES_USAGE)
    assert sorted(usage) == ["sm_80", "sm_90a"]
    assert usage["sm_80"][KEY_128x64] == {"REG": 255, "STACK": 80, "LOCAL": 0}
    assert len(usage["sm_90a"]) == 4


def test_key_does_not_depend_on_the_source_path():
    # The same kernel compiled from another folder: nvcc's first hash changes.
    elsewhere = RES_USAGE.replace("d604c495", "636b715c")
    assert spill_check.parse_res_usage(elsewhere) == spill_check.parse_res_usage(RES_USAGE)
    # Templates outside an anonymous namespace are left as they are.
    assert spill_check.stable_key("_Z6kernelILi3EEvPf") == "_Z6kernelILi3EEvPf"


@pytest.mark.skipif(not shutil.which("c++filt"), reason="no c++filt: names stay mangled")
def test_readable_name_is_the_instantiation():
    assert spill_check.readable_names([KEY_128x64])[KEY_128x64] == (
        "fa::(anonymous namespace)::fa2_forward_kernel<128, 128, 64, 32, false, __half, false>")


def test_written_budget_lists_the_spilling_kernels_one_line_each(tmp_path):
    _, _, path = budget(tmp_path)
    content = json.loads(Path(path).read_text())
    for arch in ("sm_80", "sm_90a"):
        kernels = content["architectures"][arch]
        assert sorted(e["stack"] for e in kernels.values()) == [8, 80, 240]  # STACK 0: not listed
    assert sum(KEY_128x64 in line for line in Path(path).read_text().splitlines()) == 2


def test_within_budget_passes(tmp_path, capsys):
    tool, binary, path = budget(tmp_path)
    assert spill_check.main([binary, "--budget", path, "--cuobjdump", tool]) == 0
    assert "8 kernels on sm_80, sm_90a within" in capsys.readouterr().out


def test_over_budget_fails_naming_the_kernel(tmp_path, capsys):
    def tighten(archs):
        archs["sm_90a"][KEY_128x64]["stack"] = 72
    tool, binary, path = budget(tmp_path, tighten)
    assert spill_check.main([binary, "--budget", path, "--cuobjdump", tool]) == 1
    failed = [x for x in capsys.readouterr().out.splitlines() if "FAILED" in x]
    assert len(failed) == 1
    assert failed[0].startswith("spill_check: FAILED: sm_90a ")
    assert "fa2_forward_kernel" in failed[0]
    assert "STACK 80 bytes, budget 72 (over its budget; REG 255)" in failed[0]


def test_new_spilling_kernel_fails(tmp_path, capsys):
    def forget(archs):
        del archs["sm_80"][KEY_128x64]
    tool, binary, path = budget(tmp_path, forget)
    assert spill_check.main([binary, "--budget", path, "--cuobjdump", tool]) == 1
    out = capsys.readouterr().out
    assert "FAILED: sm_80 " in out and "STACK 80 bytes, budget 0 (a new spilling kernel" in out


def test_local_memory_over_budget_fails(tmp_path, capsys):
    tool, binary, path = budget(tmp_path)
    text = RES_USAGE.replace("REG:128 STACK:8 SHARED:0 LOCAL:0", "REG:128 STACK:8 SHARED:0 LOCAL:16")
    tool, binary = stand_in(tmp_path, text)
    assert spill_check.main([binary, "--budget", path, "--cuobjdump", tool]) == 1
    assert "LOCAL 16 bytes, budget 0 (over its budget" in capsys.readouterr().out


def test_below_budget_is_a_note(tmp_path, capsys):
    def loosen(archs):
        archs["sm_80"][KEY_128x64]["stack"] = 96
        archs["sm_80"]["_Z4gonev"] = {"kernel": "gone", "stack": 8, "local": 0, "reg": 32}
    tool, binary, path = budget(tmp_path, loosen)
    assert spill_check.main([binary, "--budget", path, "--cuobjdump", tool]) == 0
    out = capsys.readouterr().out
    assert "STACK 80 bytes, budget 96: below its budget (tighten it: --write-budget)" in out
    assert "note: sm_80 gone: in the budget, not in the binary" in out


def test_architecture_without_budget(tmp_path, capsys):
    def sm90_only(archs):
        del archs["sm_80"]
    tool, binary, path = budget(tmp_path, sm90_only)
    assert spill_check.main([binary, "--budget", path, "--cuobjdump", tool]) == 0
    assert "note: sm_80: no budget (the budget covers sm_90a): not checked" in capsys.readouterr().out

    def other_arch(archs):
        archs["sm_89"] = archs.pop("sm_80")
        del archs["sm_90a"]
    tool, binary, path = budget(tmp_path, other_arch)
    assert spill_check.main([binary, "--budget", path, "--cuobjdump", tool]) == 77
    assert "skipped:" in capsys.readouterr().out


def test_missing_cuobjdump_is_a_skip(tmp_path, capsys):
    for tool in ("", str(tmp_path / "no-cuobjdump")):
        assert spill_check.main(["fa-bench", "--budget", "b.json", "--cuobjdump", tool]) == 77
        assert "spill_check: skipped: no cuobjdump" in capsys.readouterr().out


def test_missing_budget_file_fails(tmp_path, capsys):
    tool, binary = stand_in(tmp_path)
    missing = str(tmp_path / "spill-budget.json")
    assert spill_check.main([binary, "--budget", missing, "--cuobjdump", tool]) == 2
    err = capsys.readouterr().err
    assert f"--budget {missing}: no such file" in err and "--write-budget" in err


def test_bad_input_is_one_line(tmp_path, capsys):
    tool, binary = stand_in(tmp_path)
    not_budget = tmp_path / "x.json"
    not_budget.write_text("[]")
    assert spill_check.main([binary, "--budget", str(not_budget), "--cuobjdump", tool]) == 2
    assert spill_check.main([str(tmp_path / "nothing"), "--budget", str(not_budget),
                             "--cuobjdump", tool]) == 2
    tool, binary = stand_in(tmp_path, "\nFatbin elf code:\n")
    assert spill_check.main([binary, "--write-budget", str(not_budget), "--cuobjdump", tool]) == 2
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 3 and all(x.startswith("spill_check: error: ") for x in err)
