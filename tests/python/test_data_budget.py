"""The tracked tree against the device machine's limit: a call receives the repository's tracked
files plus what it carries (the CuTe and cudnn-frontend wheels, about 8 MB), 64 MiB in all. The
H200 records in tests/data/ are most of the tree, so they are kept compact
(scripts/compact_json.py)."""

import json
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
# 64 MiB less the carried wheels (8.1 MB) and room for a session's build outputs and new data.
TRACKED_BUDGET_BYTES = 52 * 2**20


def tracked_files():
    try:
        out = subprocess.run(
            ["git", "-C", str(ROOT), "ls-files", "-z"], capture_output=True, check=True
        ).stdout
    except (OSError, subprocess.CalledProcessError) as e:
        pytest.skip(f"no git checkout to measure: {e}")
    return [ROOT / p.decode() for p in out.split(b"\0") if p]


def test_the_tracked_tree_leaves_room_for_the_carry():
    files = tracked_files()
    total = sum(f.stat().st_size for f in files if f.is_file())
    biggest = sorted(files, key=lambda f: f.stat().st_size if f.is_file() else 0)[-3:]
    assert total <= TRACKED_BUDGET_BYTES, (
        f"tracked files: {total / 2**20:.1f} MiB, budget {TRACKED_BUDGET_BYTES / 2**20:.0f} MiB "
        f"(the device takes 64 MiB with the carry); largest: {[str(f) for f in biggest]}"
    )


def test_the_h200_and_h100_records_are_compact():
    loose = []
    for path in sorted((ROOT / "tests" / "data").glob("h[12]00-*.json")):
        text = path.read_text(encoding="utf-8")
        compact = json.dumps(json.loads(text), separators=(",", ":"), ensure_ascii=False) + "\n"
        if text != compact:
            loose.append(path.name)
    assert not loose, f"run scripts/compact_json.py on: {loose}"
