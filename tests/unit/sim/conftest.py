"""Fixtures of the simulator's unit tests."""

from __future__ import annotations

from pathlib import Path

import pytest

#: Sia's per-GPU-type application profiles, under the traces folder.
SIA = Path("sia-philly/app_profiles")


@pytest.fixture(scope="module")
def profiles(traces_dir: Path) -> Path:
    """Sia's application profiles, read in place (the test is skipped without them)."""
    folder = traces_dir / SIA
    if not folder.is_dir():
        pytest.skip(f"Sia's application profiles not found at {folder}")
    return folder
