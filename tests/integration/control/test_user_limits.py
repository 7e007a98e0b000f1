"""Per-user limits through a real server: a job past its user's waiting-jobs limit is
refused at submit (409 naming ``limits.waitingJobs`` and the fix); a job its resource
limit holds waits with the reason, shown by ``describe job``; ``describe queue`` and the
console's queue table show the limits and the budget."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from phalanx.control.server import Server
from tests.integration.control.console import signed_in
from tests.integration.control.serving import Api, role, running_server, wait_for
from tests.integration.control.test_cli import ok, phalanx

POLICY = """\
apiVersion: phalanx/v1
kind: SchedulerConfig
metadata: {name: limited}
spec:
  actions: [enqueue, allocate, backfill]
  tiers:
  - plugins: [{name: userlimits}, {name: priority}, {name: gang}]
  - plugins: [{name: drf}, {name: predicates}, {name: capacity}, {name: binpack}]
"""


@pytest.fixture
def limited(tmp_path: Path) -> Iterator[Server]:
    """A server (two 4-GPU nodes) scheduling with the userlimits plugin."""
    policy = tmp_path / "policy.yaml"
    policy.write_text(POLICY)
    with running_server(tmp_path, scheduler=str(policy)) as started:
        yield started


def test_waiting_limit_refuses_at_submit_and_a_held_job_says_why(limited: Server) -> None:
    token = limited.admin_token
    assert token is not None
    api = Api(limited.url, token)
    api.queue(
        "nlp",
        limits={"waitingJobs": 1, "resources": {"gpu": 4}},
        budget={"period": "1d", "perUser": {"gpu": 100}},
    )
    api.submit("a0", "nlp", role(command="sleep 600", gpu=4))
    api.wait_phase("a0", "Running")
    user = api.job("a0")["user"]
    api.submit("a1", "nlp", role(command="sleep 600", gpu=4))  # its one waiting job

    refusal = api.submit("a2", "nlp", role(command="true", gpu=1), expect=409)
    said = str(refusal)
    assert "limits.waitingJobs 1 of queue nlp" in said
    assert f"user {user} has 1 job waiting in queue nlp" in said
    assert "cancel a waiting one" in said

    held = f"user {user} holds 4 GPUs in queue nlp, its limit (limits.resources.gpu 4)"
    wait_for(lambda: held in api.job("a1")["message"], "a1 held by the limit")
    described = ok(phalanx(limited, "describe", "job", "a1"))
    assert "limits.resources.gpu 4" in " ".join(described.split())

    queue = " ".join(ok(phalanx(limited, "describe", "queue", "nlp")).split())
    assert "Limits: waitingJobs 1, resources gpu=4 (each user)" in queue
    assert "Budget: per 1d: perUser gpu=100 (resource-hours); when spent: hold" in queue
    admin = signed_in(limited.url, token).get("/fragments/admin").text
    assert "Limits: waitingJobs 1, resources gpu=4 (each user)" in admin

    api.post("/api/v1/jobs/a0/cancel", expect=200)
    api.wait_phase("a1", "Running")
    api.submit("a2", "nlp", role(command="true", gpu=1))  # nothing waits now: accepted
