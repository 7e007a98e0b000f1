"""Secrets of tenants of a root server, whose tasks run as their users' own uids: a
secret given as files is owned by its task's uid, mode 0600 in a 0700 directory, so
another tenant's task cannot read it; the data dir's key and database never hold a value
in clear."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.integration.tenancy import servers
from tests.integration.tenancy.servers import QUEUE, Up, job

pytestmark = pytest.mark.skipif(
    os.geteuid() != 0, reason="tenants of a root server need a server run as root"
)

VALUE = "alice-token-0xC0FFEE"


@pytest.fixture
def up(world: Path, tmp_path: Path) -> Iterator[Up]:
    served = servers.start(world / "data", tmp_path)
    yield served
    served.stop()


def test_a_secret_file_is_its_tasks_alone(up: Up) -> None:
    up.admin().queue(QUEUE)
    alice, bob = up.user("alice"), up.user("bob")
    alice.post(
        "/api/v1/secrets",
        {
            "apiVersion": "phalanx/v1",
            "kind": "Secret",
            "metadata": {"name": "token"},
            "spec": {"stringData": {"value": VALUE}},
        },
    )
    holds = job(
        "holds",
        'cat "$PHALANX_SECRETS_DIR/token/value"; echo; '
        'stat -c "%u %a" "$PHALANX_SECRETS_DIR/token/value" "$PHALANX_SECRETS_DIR"; '
        "id -u",
    )
    holds["spec"]["roles"][0]["secrets"] = [{"name": "token", "as": "files"}]
    alice.post("/api/v1/jobs", holds)
    assert alice.wait_phase("holds", "Succeeded", "Failed")["phase"] == "Succeeded"
    said = alice.http.get("/api/v1/jobs/holds/logs").text.strip().split("\n")
    uid = said[-1]
    assert uid != "0" and VALUE in said, said
    assert f"{uid} 600" in said and f"{uid} 700" in said, said

    tasks = up.data.with_name(f"{up.data.name}-tasks")
    value = tasks / "holds" / "holds-main-0" / "secrets" / "token" / "value"
    assert value.read_text() == VALUE
    peek = job("peek", f'cat "{value}" || echo refused')
    bob.post("/api/v1/jobs", peek)
    assert bob.wait_phase("peek", "Succeeded", "Failed")["phase"] == "Succeeded"
    assert "refused" in bob.http.get("/api/v1/jobs/peek/logs").text
    assert VALUE not in bob.http.get("/api/v1/jobs/peek/logs").text
    for stored in up.data.iterdir():
        if stored.is_file():
            assert VALUE.encode() not in stored.read_bytes(), stored
