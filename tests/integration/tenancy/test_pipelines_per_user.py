"""A pipeline run on a root server that runs tasks as their users' own uids: the run's
workspace is its user's (0700), and its steps, run as that user, hand artifacts on."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.integration.tenancy import servers
from tests.integration.tenancy.servers import QUEUE, Up

pytestmark = pytest.mark.skipif(
    os.geteuid() != 0, reason="per-user identities need a server run as root"
)

WHO = {
    "apiVersion": "phalanx/v1",
    "kind": "Pipeline",
    "metadata": {"name": "who"},
    "spec": {
        "defaults": {"queue": QUEUE, "resources": {"cpu": "500m", "memory": "256Mi"}},
        "steps": {
            "first": {"command": "id -u > {{outputs.uid}}", "outputs": {"artifacts": ["uid"]}},
            "second": {
                "inputs": {"artifacts": {"uid": "{{steps.first.outputs.uid}}"}},
                "command": "cat {{inputs.uid}} > {{outputs.both}}; id -u >> {{outputs.both}}",
                "outputs": {"artifacts": ["both"]},
            },
        },
    },
}


@pytest.fixture
def up(world: Path, tmp_path: Path) -> Iterator[Up]:
    served = servers.start(world / "data", tmp_path)
    yield served
    served.stop()


def test_a_users_run_keeps_its_artifacts_in_a_workspace_of_their_own(up: Up, world: Path) -> None:
    up.admin().queue(QUEUE)
    alice = up.user("alice")
    alice.post("/api/v1/pipelines", WHO)
    run_id = alice.post("/api/v1/pipelines/who/runs", {})["id"]
    view = alice.wait_run(run_id)
    assert view["phase"] == "Succeeded", view
    run_dir = world / "data-workspace" / "runs" / run_id
    uid = run_dir.stat().st_uid
    assert uid != 0 and run_dir.stat().st_mode & 0o777 == 0o700
    assert (run_dir / "second" / "both").read_text() == f"{uid}\n{uid}\n"
    assert (world / "data-workspace").stat().st_mode & 0o777 == 0o711
