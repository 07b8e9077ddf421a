"""pyproject.toml's pytest options: `pytest -q` ends with its failures and counts, and a green run fills a screen,
not a page (every skip on its own line and 25 durations once hid a failure)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SUITE = '''
import pytest

@pytest.mark.parametrize("n", range(60))
def test_passes(n):
    pass

@pytest.mark.parametrize("n", range(12))
def test_skips(n):
    pytest.skip(f"needs extra {n}")
'''


def run_quietly(tmp_path: Path, extra: str = "") -> list[str]:
    (tmp_path / "test_sample.py").write_text(SUITE + extra)
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-c", str(REPO / "pyproject.toml"), "--rootdir",
                           str(tmp_path), str(tmp_path), "-p", "no:cacheprovider"], capture_output=True, text=True,
                          timeout=60, cwd=tmp_path)
    return done.stdout.splitlines()


def test_a_green_run_fits_a_screen_and_ends_with_its_counts(tmp_path):
    lines = run_quietly(tmp_path)
    assert lines[-1].startswith("60 passed, 12 skipped in ") and len(lines) <= 20, "\n".join(lines)
    assert "slowest 10 durations" in "\n".join(lines)  # the slow tests stay in sight


def test_a_failure_is_named_just_above_the_counts(tmp_path):
    lines = run_quietly(tmp_path, "\ndef test_fails():\n    assert 1 == 2, 'boom'\n")
    assert lines[-1].startswith("1 failed, 60 passed, 12 skipped in "), "\n".join(lines)
    # just above them (under CI=true pytest adds the failed assertion's lines below its FAILED line)
    assert "FAILED test_sample.py::test_fails - AssertionError: boom" in lines[-5:-1], "\n".join(lines)
