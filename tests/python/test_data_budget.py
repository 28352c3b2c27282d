"""The tracked tree against the device machine's limit: a call receives the repository's tracked
files plus what it carries (the CuTe and cudnn-frontend wheels, about 8 MB), 64 MiB in all. The
H200 records in tests/data/ are most of the tree, so they are kept compact
(scripts/compact_json.py)."""

import importlib.util
import json
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
spec = importlib.util.spec_from_file_location("compact_json", ROOT / "scripts" / "compact_json.py")
compact_json = importlib.util.module_from_spec(spec)
spec.loader.exec_module(compact_json)
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
    sizes = {f: f.stat().st_size for f in tracked_files() if f.is_file()}
    total = sum(sizes.values())
    biggest = sorted(sizes, key=sizes.get)[-3:]
    assert total <= TRACKED_BUDGET_BYTES, (
        f"tracked files: {total / 2**20:.1f} MiB, budget {TRACKED_BUDGET_BYTES / 2**20:.0f} MiB "
        f"(the device takes 64 MiB with the carry); largest: {[str(f) for f in biggest]}"
    )


def test_the_h200_and_h100_records_are_compact():
    loose = []
    for path in sorted((ROOT / "tests" / "data").glob("h[12]00-*.json")):
        text = path.read_text(encoding="utf-8")
        if text != compact_json.compact_text(json.loads(text)):
            loose.append(path.name)
    assert not loose, f"run scripts/compact_json.py on: {loose}"
