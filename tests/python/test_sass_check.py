"""scripts/sass_check.py on hand-written cuobjdump output: each check can fail."""

import importlib.util
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "sass_check.py"
spec = importlib.util.spec_from_file_location("sass_check", SCRIPT)
sass_check = importlib.util.module_from_spec(spec)
sys.modules["sass_check"] = sass_check  # dataclasses look their module up
spec.loader.exec_module(sass_check)

SASS = """
	code for sm_90a
		Function : _Z3fa3v
	.headerflags	@"EF_CUDA_SM90 EF_CUDA_VIRTUAL_SM(EF_CUDA_SM90)"
        /*0000*/                   LDC R1, c[0x0][0x28] ;                       /* 0x00000a00ff017b82 */
        /*0660*/                   HGMMA.64x128x16.F32 R24, gdesc[UR16], RZ, !UPT ;  /* 0x01e0 */
        /*0670*/              @!P0 SYNCS.ARRIVE.TRANS64 RZ, [UR4] ;            /* 0x01e0 */
		Function : _Z5spillv
        /*0000*/                   HGMMA.64x64x16.F32 R24, gdesc[UR16], RZ, !UPT ;  /* 0x01e0 */
        /*0010*/                   STL [R1], R2 ;                               /* 0x01e0 */
        /*0020*/                   LDL R2, [R1] ;                               /* 0x01e0 */
		Function : _Z3fa2v
        /*0000*/                   HMMA.16816.F32.BF16 R4, R8, R12, R4 ;        /* 0x01e0 */
"""

RES = """
Resource usage:
 Function _Z3fa3v:
  REG:168 STACK:0 SHARED:1024 LOCAL:0 CONSTANT[0]:1536 TEXTURE:0 SURFACE:0 SAMPLER:0
 Function _Z5spillv:
  REG:168 STACK:16 SHARED:0 LOCAL:0 CONSTANT[0]:1536 TEXTURE:0 SURFACE:0 SAMPLER:0
 Function _Z3fa2v:
  REG:128 STACK:0 SHARED:0 LOCAL:0 CONSTANT[0]:1536 TEXTURE:0 SURFACE:0 SAMPLER:0
"""


def kernels():
    k = sass_check.parse_sass(SASS)
    sass_check.parse_resources(RES, k)
    return k


def test_clean_wgmma_kernel_passes():
    k = kernels()["_Z3fa3v"]
    assert k.opcodes["HGMMA"] == 1 and k.opcodes["SYNCS"] == 1  # predicated line counted
    assert k.resources == {"REG": 168, "STACK": 0, "LOCAL": 0}
    assert sass_check.problems(k, ["HGMMA"]) == []


def test_spills_fail():
    bad = sass_check.problems(kernels()["_Z5spillv"], ["HGMMA"])
    assert any("STL" in b for b in bad) and any("LDL" in b for b in bad)
    assert "STACK:16 bytes" in bad


def test_missing_opcode_fails():
    assert sass_check.problems(kernels()["_Z3fa2v"], ["HGMMA"]) == ["no HGMMA"]


def test_missing_resource_usage_fails():
    k = sass_check.parse_sass(SASS)["_Z3fa3v"]
    assert "no resource usage from cuobjdump -res-usage" in sass_check.problems(k, [])


def test_no_cuobjdump_is_a_skip(capsys):
    assert sass_check.main(["--cuobjdump", "", "--filter", "fa3", "x.o"]) == 77
    assert "skipped: no cuobjdump" in capsys.readouterr().out
