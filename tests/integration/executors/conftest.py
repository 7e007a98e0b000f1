"""Fixtures for real-process executor tests: a harness that never leaks a process."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.integration.executors.harness import Harness


@pytest.fixture
def harness(tmp_path: Path) -> Iterator[Harness]:
    """A fresh executor over ``tmp_path/data``; every task is killed and reaped after the test."""
    h = Harness(tmp_path / "data", environ={"PATH": "/usr/bin:/bin", "SECRET_TOKEN": "hunter2"})
    yield h
    h.close()
