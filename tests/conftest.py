"""Fixtures shared by every test folder."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

#: The public traces, read in place beside the repository (never copied into it).
TRACES_DIR = Path(__file__).resolve().parents[1].parent / "shared" / "traces"


@pytest.fixture(scope="session")
def traces_dir() -> Path:
    """``../shared/traces``; skips the test when absent (fails with PHALANX_REQUIRE_TRACES=1)."""
    if TRACES_DIR.is_dir():
        return TRACES_DIR
    message = f"public traces not found at {TRACES_DIR}: clone with ../shared beside the repo"
    if os.environ.get("PHALANX_REQUIRE_TRACES") == "1":
        pytest.fail(message)
    pytest.skip(message)
