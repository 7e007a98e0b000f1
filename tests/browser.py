"""The headless Chromium that browser tests drive (Debian's ``chromium`` through the
``playwright`` package): its path, or a skip that says what is missing, or a failure
under ``PHALANX_REQUIRE_CHROMIUM=1`` (CI installs both)."""

from __future__ import annotations

import importlib.util
import os
import shutil

import pytest


def chromium(tests: str) -> str:
    """The Chromium executable for ``tests`` (named in the skip or failure message)."""
    missing = None
    if importlib.util.find_spec("playwright") is None:
        missing = "the playwright package is not installed (pip install playwright)"
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    if missing is None and found is None:
        missing = "no chromium on PATH (apt-get install chromium)"
    if missing is None and found is not None:
        return found
    if os.environ.get("PHALANX_REQUIRE_CHROMIUM") == "1":
        pytest.fail(f"{tests} cannot run: {missing}")
    pytest.skip(f"{tests} need a browser: {missing}")
