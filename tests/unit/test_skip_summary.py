"""``make test`` ends with its skipped tests grouped by reason (tests/conftest.py)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

SKIPPING = """\
import pytest

@pytest.mark.parametrize("n", range(3))
def test_on_postgres(n):
    pytest.skip("no PostgreSQL: set PHALANX_TEST_POSTGRES")

def test_in_a_browser():
    pytest.skip("no Chromium: install chromium")

def test_runs():
    pass
"""


OPTIONS = ("-p", "no:cacheprovider")


def test_the_summary_lists_skip_reasons_grouped_most_first(tmp_path: Path) -> None:
    (tmp_path / "test_some.py").write_text(SKIPPING)
    ran = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-p",
            "tests.conftest",
            "-c",
            "/dev/null",
            *OPTIONS,
            str(tmp_path),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    assert ran.returncode == 0, ran.stdout + ran.stderr
    summary = ran.stdout.split("skipped, by reason (bash .ci/run runs them all)", 1)[1]
    assert summary.splitlines()[1:3] == [
        "     3  no PostgreSQL: set PHALANX_TEST_POSTGRES",
        "     1  no Chromium: install chromium",
    ]
