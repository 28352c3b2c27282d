"""Make the repository root importable (``import reports``) when pytest runs from anywhere."""

import os
import sys
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))


def fa_bench_path() -> Path | None:
    """The built fa-bench: $FA_BENCH_BIN, else build/bin/fa-bench; None when not executable."""
    env = os.environ.get("FA_BENCH_BIN")
    candidate = Path(env) if env else REPO_ROOT / "build" / "bin" / "fa-bench"
    return candidate if candidate.is_file() and os.access(candidate, os.X_OK) else None


def fa_bench() -> Path:
    """The built fa-bench, or the test skips (fails when $FA_BENCH_BIN names no executable)."""
    found = fa_bench_path()
    if found is None:
        env = os.environ.get("FA_BENCH_BIN")
        if env:
            pytest.fail(f"$FA_BENCH_BIN={env} is not an executable")
        pytest.skip("fa-bench not built (looked for $FA_BENCH_BIN, then build/bin/fa-bench)")
    return found
