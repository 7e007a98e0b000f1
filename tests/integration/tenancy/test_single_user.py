"""Without root there is one identity: phalanx says so at start and makes no second user,
unless the admin accepts a shared identity with ``--shared-identity``.

The server really runs as an ordinary uid here (one no account has), started from this
test, which runs as root; the interpreter it runs on must be one that uid can reach.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.integration.tenancy import servers
from tests.integration.tenancy.servers import QUEUE, Up, job, output

pytestmark = pytest.mark.skipif(
    os.geteuid() != 0, reason="starting a server as another uid needs root"
)


@pytest.fixture
def ordinary(world: Path) -> Iterator[tuple[int, Path]]:
    """An ordinary uid and a data dir of its own (as a user's home would hold it)."""
    uid = servers.unused_uid(69000)
    data = world / "data"
    data.mkdir(mode=0o700)
    os.chown(data, uid, uid)
    yield uid, data


def start_as(uid: int, data: Path, logs: Path, *args: str) -> Up:
    env = {
        "PATH": "/usr/local/bin:/usr/bin:/bin",
        "HOME": str(data),
        "PYTHONPATH": servers.phalanx_path_for_others(),
    }
    python = (servers.python_for_others(same_version=True),)
    return servers.start(data, logs, *args, uid=uid, env=env, python=python)


def test_without_root_the_server_says_single_user_and_refuses_a_second_user(
    ordinary: tuple[int, Path], tmp_path: Path
) -> None:
    uid, data = ordinary
    up = start_as(uid, data, tmp_path)
    try:
        warning = next(
            line for line in up.log().splitlines() if line.startswith("WARNING: single-user")
        )
        assert warning.startswith(f"WARNING: single-user mode: phalanx runs as uid {uid}, not root")
        assert "Fix: run phalanx up as root" in warning and "--shared-identity" in warning
        # Not root, so no cgroup of this host is its to use: the limits are weaker, and said so.
        limits = next(line for line in up.log().splitlines() if "task limits" in line)
        assert limits.startswith("WARNING: task limits weaker than full: rlimit: RLIMIT_AS")
        assert "Fix: run phalanx up as root" in limits
        refused = up.cli("users", "create", "bob")
        assert refused.returncode == 1 and refused.stdout == ""
        assert refused.stderr.startswith(
            f"error: single-user mode: this server runs as uid {uid}, not root"
        )
        assert "field: name" in refused.stderr and "fix: run phalanx up as root" in refused.stderr
        answer = up.admin().http.post("/api/v1/users", json={"name": "carol"})
        assert answer.status_code == 409
        assert answer.json()["field"] == "name" and "--shared-identity" in answer.json()["fix"]
        assert [u["name"] for u in up.admin().get("/api/v1/users")] == ["admin"]
    finally:
        up.stop()


def test_with_a_shared_identity_accepted_a_second_user_runs_as_the_server(
    ordinary: tuple[int, Path], tmp_path: Path
) -> None:
    uid, data = ordinary
    up = start_as(uid, data, tmp_path, "--shared-identity")
    try:
        assert (
            f"WARNING: shared identity (--shared-identity): every user's tasks run as uid {uid}"
            in (up.log())
        )
        up.admin().queue(QUEUE)
        bob = up.user("bob")
        bob.post("/api/v1/jobs", job("whoami", "id -u"))
        assert bob.wait_phase("whoami", "Succeeded", "Failed")["phase"] == "Succeeded"
        assert output(bob, "whoami").strip() == str(uid)
        assert [u["uid"] for u in up.admin().get("/api/v1/users")] == [None, None]
    finally:
        up.stop()
