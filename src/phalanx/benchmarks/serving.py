"""Waiting for a server process the benchmarks started."""

from __future__ import annotations

import subprocess
import time

import httpx


def wait_answering(url: str, process: subprocess.Popen[bytes], timeout: float) -> bool:
    """Wait until the server at ``url`` answers ``/healthz`` with 200: True then, False
    once ``process`` has exited or ``timeout`` seconds have passed without an answer."""
    deadline = time.monotonic() + timeout
    while process.poll() is None and time.monotonic() < deadline:
        try:
            if httpx.get(f"{url}/healthz", timeout=1).status_code == 200:
                return True
        except httpx.HTTPError:
            pass
        time.sleep(0.1)
    return False
