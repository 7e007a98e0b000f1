"""Models of tenants of a root server, whose tasks run as their users' own uids: the
registrar reads a model as its task's user could, so what a tenant plants in its model
directory (a link to a root-only file, a file its own user cannot read) is refused with
the reason and no byte of it reaches the model store; a tenant's model is hers alone."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.integration.control.serving import Api, wait_for
from tests.integration.tenancy import servers
from tests.integration.tenancy.servers import QUEUE, Up, job

pytestmark = pytest.mark.skipif(
    os.geteuid() != 0, reason="tenants of a root server need a server run as root"
)

ROOT_SECRET = "root-only-secret-0xBEEF"


@pytest.fixture
def up(world: Path, tmp_path: Path) -> Iterator[Up]:
    served = servers.start(world / "data", tmp_path)
    yield served
    served.stop()


def trains(name: str, script: str) -> dict[str, Any]:
    """A job whose task runs ``script`` and declares ``model`` its model directory."""
    document = job(name, script)
    document["spec"]["roles"][0]["model"] = {"name": name, "path": "model"}
    return document


def events(api: Api, job_name: str) -> list[dict[str, Any]]:
    """The model events of ``job_name``, once there is one."""
    return wait_for(  # type: ignore[no-any-return]
        lambda: [
            e for e in api.get(f"/api/v1/jobs/{job_name}/events") if e["kind"].startswith("Model")
        ],
        f"a model event of {job_name}",
    )


def test_a_model_holds_only_what_its_tenant_could_read(up: Up, world: Path) -> None:
    root_only = world / "root-only"
    root_only.write_text(ROOT_SECRET)
    root_only.chmod(0o600)
    up.admin().queue(QUEUE)
    alice, bob = up.user("alice"), up.user("bob")
    alice.post("/api/v1/jobs", trains("good", "mkdir model && echo weights > model/w"))
    bob.post("/api/v1/jobs", trains("linked", f"mkdir model && ln -s {root_only} model/w"))
    bob.post(
        "/api/v1/jobs", trains("unreadable", "mkdir model && echo x > model/w && chmod 0 model/w")
    )
    for api, name in ((alice, "good"), (bob, "linked"), (bob, "unreadable")):
        assert api.wait_phase(name, "Succeeded", "Failed")["phase"] == "Succeeded"

    (registered,) = events(alice, "good")
    assert registered["kind"] == "ModelRegistered", registered
    (linked,) = events(bob, "linked")
    assert linked["kind"] == "ModelNotRegistered"
    assert f"a symbolic link to {root_only}" in linked["message"]
    (unreadable,) = events(bob, "unreadable")
    assert unreadable["kind"] == "ModelNotRegistered" and "cannot read" in unreadable["message"]

    assert [m["name"] for m in alice.get("/api/v1/models")] == ["good"]
    assert bob.get("/api/v1/models") == []
    bob.get("/api/v1/models/good", expect=404)
    stored = b"".join(p.read_bytes() for p in (up.data / "models").rglob("*") if p.is_file())
    assert b"weights" in stored and ROOT_SECRET.encode() not in stored


def test_a_tenants_task_reads_her_version_and_cannot_change_or_list_versions(
    up: Up, world: Path
) -> None:
    up.admin().queue(QUEUE)
    alice = up.user("alice")
    alice.post("/api/v1/jobs", trains("mnist", "mkdir model && echo weights > model/w"))
    assert alice.wait_phase("mnist", "Succeeded", "Failed")["phase"] == "Succeeded"
    assert events(alice, "mnist")[0]["kind"] == "ModelRegistered"
    script = (
        'cat "$PHALANX_MODEL_PATH/w"; echo weights-2 > "$PHALANX_MODEL_PATH/w" || echo no-write;'
        'touch "$PHALANX_MODEL_PATH/new" || echo no-create; ls "$(dirname "$PHALANX_MODEL_PATH")"'
        " || echo no-list"
    )
    reads = job("reads", script)
    reads["spec"]["roles"][0]["modelVersion"] = "mnist:v1"
    alice.post("/api/v1/jobs", reads)
    assert alice.wait_phase("reads", "Succeeded", "Failed")["phase"] == "Succeeded"
    said = alice.http.get("/api/v1/jobs/reads/logs").text.split()
    assert said[-4:] == ["weights", "no-write", "no-create", "no-list"], said
