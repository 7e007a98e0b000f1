"""A real S3 endpoint for the tests: moto's standalone server on a loopback port.

``s3_endpoint`` starts ``moto_server`` (from the ``moto[server]`` package) once per test
session and yields its URL with the environment that reaches it (credentials moto
accepts, ``AWS_ENDPOINT_URL``); tests skip without it, except under
``PHALANX_REQUIRE_S3=1`` (``.ci/run``), where they fail.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from phalanx.executors.rendezvous import free_ports


@dataclass(frozen=True)
class S3:
    """A running S3 endpoint: its URL and the variables that reach it."""

    url: str
    env: dict[str, str]

    def make_bucket(self, name: str) -> None:
        """Create bucket ``name`` (a PUT on the endpoint, as any S3 client would)."""
        response = httpx.put(f"{self.url}/{name}", timeout=10)
        assert response.status_code == 200, response.text


def moto_server() -> str:
    """The path of moto's standalone server, or a skip (a failure under
    ``PHALANX_REQUIRE_S3=1``)."""
    found = shutil.which("moto_server", path=str(Path(sys.executable).parent))
    if found is None:
        reason = "no moto_server here: pip install 'moto[server]' (make install does)"
        if os.environ.get("PHALANX_REQUIRE_S3") == "1":
            pytest.fail(f"{reason} (PHALANX_REQUIRE_S3=1)")
        pytest.skip(reason)
    return found


@pytest.fixture(scope="session")
def s3_endpoint(tmp_path_factory: pytest.TempPathFactory) -> Iterator[S3]:
    """moto's S3 on 127.0.0.1, for the whole session."""
    (port,) = free_ports(1)
    log = tmp_path_factory.mktemp("moto") / "moto.log"
    with log.open("wb") as out:
        process = subprocess.Popen(
            [moto_server(), "-H", "127.0.0.1", "-p", str(port)], stdout=out, stderr=out
        )
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 30
    while True:
        try:
            httpx.get(url, timeout=1)
            break
        except httpx.HTTPError:
            assert process.poll() is None, log.read_text()
            assert time.monotonic() < deadline, log.read_text()
            time.sleep(0.1)
    env = {
        "AWS_ACCESS_KEY_ID": "phalanx-test",
        "AWS_SECRET_ACCESS_KEY": "phalanx-test",
        "AWS_DEFAULT_REGION": "us-east-1",
        "AWS_ENDPOINT_URL": url,
    }
    yield S3(url=url, env=env)
    process.terminate()
    process.wait(10)
