"""``phalanx up`` as a cluster service runs it, in a process of its own, for tenancy tests.

The server runs as root (what these tests are about) or as another uid, on a data dir
in a directory every uid may pass through (pytest's own temporary root is root's alone,
which would hide everything from every task whatever phalanx did). Tasks run their
commands with ``python_for_others()``: the interpreter running the tests may live where
other uids cannot reach it (under /root).
"""

from __future__ import annotations

import grp
import json
import os
import pwd
import signal
import subprocess
import sys
import sysconfig
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest

import phalanx
from phalanx.executors.identity import unreachable_by_others
from phalanx.executors.rendezvous import free_ports
from tests.integration.control.serving import DEADLINE, Api, wait_for

#: A queue every user may submit to.
QUEUE = "shared"
#: Where a task prints what it found, one JSON object after this word.
RESULT = "RESULT "


def unused_uid(start: int) -> int:
    """The first id from ``start`` that no account and no group on this host has."""
    uid = start
    while True:
        try:
            pwd.getpwuid(uid)
        except KeyError:
            try:
                grp.getgrgid(uid)
            except KeyError:
                return uid
        uid += 1


def python_for_others(*, same_version: bool = False) -> str:
    """A Python any uid can run (for a task's standard-library script), of this Python's
    own version with ``same_version`` (to run phalanx itself); skips without one (the
    system's python3 is one: .ci/run installs it where it is missing)."""
    version = f"{sys.version_info[0]}.{sys.version_info[1]}"
    candidates = [os.path.realpath(sys.executable), f"/usr/bin/python{version}"]
    if not same_version:
        candidates.append("/usr/bin/python3")
    for candidate in candidates:
        if os.path.exists(candidate) and unreachable_by_others(Path(candidate)) is None:
            return candidate
    pytest.skip(f"no Python {version if same_version else 3} here that other users can run")


def phalanx_path_for_others() -> str:
    """A PYTHONPATH giving ``python_for_others()`` phalanx and its dependencies."""
    paths = [Path(phalanx.__file__).parent.parent, Path(sysconfig.get_paths()["purelib"])]
    for path in paths:
        why = unreachable_by_others(path)
        if why is not None:
            pytest.skip(f"phalanx is out of other users' reach here: {why}")
    return os.pathsep.join(str(p) for p in paths)


@dataclass(slots=True, kw_only=True)
class Up:
    """One ``phalanx up`` process, its data dir, and where its output goes."""

    process: subprocess.Popen[bytes]
    url: str
    data: Path
    stderr: Path
    clients: list[Api] = field(default_factory=list)

    def admin(self) -> Api:
        """The admin, with the token the server saved in its data dir."""
        return self.api((self.data / "admin.token").read_text().strip())

    def api(self, token: str) -> Api:
        made = Api(self.url, token)
        self.clients.append(made)
        return made

    def log(self) -> str:
        """What the server wrote to stderr so far."""
        return self.stderr.read_text(errors="replace")

    def cli(self, *args: str) -> subprocess.CompletedProcess[str]:
        """``phalanx ARGS`` as the admin, from this test's interpreter."""
        token = (self.data / "admin.token").read_text().strip()
        command = [sys.executable, "-m", "phalanx.cli.main", "--server", self.url]
        return subprocess.run(
            [*command, "--token", token, *args],
            capture_output=True,
            text=True,
            timeout=DEADLINE,
            check=False,
        )

    def user(self, name: str) -> Api:
        """A new user, made as an admin would: ``phalanx users create NAME``."""
        made = self.cli("users", "create", name)
        assert made.returncode == 0, made.stderr
        return self.api(made.stdout.strip())

    def stop(self) -> None:
        """SIGTERM, as a service manager stops it; SIGKILL if it does not end."""
        for client in self.clients:
            client.http.close()
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(DEADLINE)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(DEADLINE)


def start(
    data: Path,
    logs: Path,
    *args: str,
    uid: int | None = None,
    env: dict[str, str] | None = None,
    python: Sequence[str] = (sys.executable,),
) -> Up:
    """``phalanx up --data-dir DATA ARGS`` answering ``/healthz``; output in ``logs``.

    ``uid`` runs it as that uid (and gid, with no other group) instead of root.
    """
    (port,) = free_ports(1)
    runs = len(list(logs.glob("up-*.err")))
    out, err = logs / f"up-{runs}.out", logs / f"up-{runs}.err"
    command = [*python, "-m", "phalanx.cli.main", "up", "--data-dir", str(data)]
    options: dict[str, Any] = {}
    if uid is not None:
        options = {"user": uid, "group": uid, "extra_groups": [], "cwd": str(data)}
    with out.open("wb") as stdout, err.open("wb") as stderr:
        process = subprocess.Popen(
            [*command, "--port", str(port), *args],
            stdout=stdout,
            stderr=stderr,
            env=env,
            **options,
        )
    up = Up(process=process, url=f"http://127.0.0.1:{port}", data=data, stderr=err)
    deadline = time.monotonic() + DEADLINE
    while True:
        if process.poll() is not None:
            raise AssertionError(f"phalanx up exited with {process.returncode}:\n{up.log()}")
        try:
            if httpx.get(f"{up.url}/healthz", timeout=1).status_code == 200:
                return up
        except httpx.HTTPError:
            pass
        if time.monotonic() > deadline:
            up.stop()
            raise AssertionError(f"phalanx up did not answer:\n{up.log()}")
        time.sleep(0.05)


def job(name: str, command: list[str] | str, **resources: Any) -> dict[str, Any]:
    """A one-task job in ``QUEUE``, with ``resources`` (500m CPU and 256Mi unless given)."""
    return {
        "apiVersion": "phalanx/v1",
        "kind": "Job",
        "metadata": {"name": name},
        "spec": {
            "queue": QUEUE,
            "roles": [
                {
                    "name": "main",
                    "replicas": 1,
                    "resources": {"cpu": "500m", "memory": "256Mi", **resources},
                    "command": command,
                }
            ],
        },
    }


def output(api: Api, name: str) -> str:
    """The standard output of the job's only task, as its owner reads it."""
    response = api.http.get(f"/api/v1/jobs/{name}/logs", params={"task": f"{name}-main-0"})
    assert response.status_code == 200, response.text
    return response.text


def result(api: Api, name: str) -> dict[str, Any]:
    """The JSON the job's task printed after ``RESULT``, once it did."""
    line = wait_for(
        lambda: next((s for s in output(api, name).splitlines() if s.startswith(RESULT)), None),
        f"the result of {name}",
    )
    found: dict[str, Any] = json.loads(line[len(RESULT) :])
    return found
