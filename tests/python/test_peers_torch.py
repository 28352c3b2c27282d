"""scripts/peers_torch.py where CI runs it: no GPU, no PyTorch. Bad input and a missing torch
give one line and exit status 2; the GPU path is exercised on the H200 (docs/peers.md)."""

import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "peers_torch.py"


def run(*args):
    return subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True)


def test_bad_head_dim_is_refused_naming_the_flag(tmp_path):
    r = run("--d", "96", "--json", str(tmp_path / "x.json"))
    assert r.returncode == 2
    assert r.stderr.strip() == "error: --d: accepted 64, 128 or 256, got [96]"


def test_bad_sequence_length_and_backend(tmp_path):
    assert run("--N", "0", "--json", str(tmp_path / "x.json")).returncode == 2
    r = run("--backends", "flash,tpu", "--json", str(tmp_path / "x.json"))
    assert r.returncode == 2 and "--backends" in r.stderr


def test_without_torch_says_so(tmp_path):
    try:
        import torch  # noqa: F401
    except ImportError:
        r = run("--json", str(tmp_path / "x.json"))
        assert r.returncode == 2
        assert "PyTorch is not installed" in r.stderr
        assert not (tmp_path / "x.json").exists()


def test_bad_direction_is_refused_naming_the_flag(tmp_path):
    r = run("--direction", "sideways", "--json", str(tmp_path / "x.json"))
    assert r.returncode == 2
    assert "--direction" in r.stderr and "fwd" in r.stderr


def test_grouped_heads_and_kv_lengths_refuse_bad_combinations(tmp_path):
    out = str(tmp_path / "x.json")
    r = run("--heads", "32", "--heads-kv", "5", "--d", "128", "--json", out)
    assert r.returncode == 2 and "--heads-kv: 5 does not divide the 32" in r.stderr
    r = run("--N", "1024", "--kv-len", "512", "--causal", "on", "--json", out)
    assert r.returncode == 2 and "--kv-len" in r.stderr
    r = run("--heads", "32", "--heads-kv", "8", "--direction", "bwd", "--json", out)
    assert r.returncode == 2 and "--direction" in r.stderr
    r = run("--kv-len", "0", "--json", out)
    assert r.returncode == 2 and "--kv-len" in r.stderr
