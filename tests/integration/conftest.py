"""Fixtures shared by the integration tests."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.integration.images import build_busybox_image, require_podman
from tests.integration.s3 import s3_endpoint

__all__ = ["busybox_image", "s3_endpoint"]


@pytest.fixture(scope="session")
def busybox_image(tmp_path_factory: pytest.TempPathFactory) -> str:
    """A busybox image built here (``images``); skips without podman (fails in CI)."""
    runtime = require_podman()
    return build_busybox_image(runtime, Path(tmp_path_factory.mktemp("image")))
