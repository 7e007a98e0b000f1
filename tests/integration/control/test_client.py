"""The SDK (``phalanx.client``) against a real server: every verb, its types, its errors."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

import pytest

from phalanx.client import (
    Client,
    ClientError,
    DocumentError,
    JobSummaryView,
    JobView,
    QueueView,
)
from phalanx.control.server import Server
from tests.integration.control.serving import wait_for

T = TypeVar("T")

QUEUE_AND_JOB = """\
apiVersion: phalanx/v1
kind: Job
metadata: {name: hello}
spec:
  queue: team-a
  roles:
  - name: worker
    replicas: 2
    resources: {cpu: 1, memory: 1Gi, gpu: 1}
    command: "echo rank=$RANK of $WORLD_SIZE; echo oops >&2"
---
apiVersion: phalanx/v1
kind: Queue
metadata: {name: team-a}
spec: {guarantee: {gpu: 2}}
"""


def job_doc(name: str, command: str = "true", queue: str = "team-a") -> dict[str, object]:
    return {
        "apiVersion": "phalanx/v1",
        "kind": "Job",
        "metadata": {"name": name},
        "spec": {
            "queue": queue,
            "roles": [
                {"name": "worker", "replicas": 1, "resources": {"cpu": 1}, "command": command}
            ],
        },
    }


def finished(client: Client, name: str) -> JobView:
    return wait_for(
        lambda: (job := client.job(name)).phase in ("Succeeded", "Failed", "Cancelled") and job,
        f"job {name} to end",
    )


def test_apply_a_file_then_follow_the_job_to_its_logs(server: Server, tmp_path: Path) -> None:
    path = tmp_path / "hello.yaml"
    path.write_text(QUEUE_AND_JOB)
    with Client(server.url, server.admin_token) as client:
        applied = client.apply(path)
        # the queue was sent first although the file names it second
        assert [(a.kind, a.name, a.action) for a in applied] == [
            ("Queue", "team-a", "created"),
            ("Job", "hello", "created"),
        ]
        assert isinstance(applied[0].view, QueueView) and isinstance(applied[1].view, JobView)
        both = {"cpu": 2000.0, "memory": 2.0 * 2**30, "gpu": 2.0}  # two replicas of the role
        assert applied[1].view.requests == both
        job = finished(client, "hello")
        assert job.phase == "Succeeded"
        assert [t.exit_code for t in job.tasks] == [0, 0]
        assert all(t.node and len(t.gpus) == 1 for t in job.tasks)
        assert job.document is not None and job.document["kind"] == "Job"

        assert "".join(client.logs("hello", "hello-worker-1")) == "rank=1 of 2\n"
        assert "".join(client.logs("hello", stream="stderr")) == "oops\n"
        assert "".join(client.logs("hello", follow=True)) == "rank=0 of 2\n"
        assert [e.kind for e in client.events("hello")] == [
            "Queued",
            "Placed",
            "Running",
            "Succeeded",
        ]
        assert client.why("hello").reason == "Completed"

        assert [(j.name, j.requests) for j in client.jobs(queue="team-a", phase="Succeeded")] == [
            ("hello", both)
        ]
        assert client.jobs(phase=["Running", "Pending"]) == []
        queue = client.queues()[0]
        assert queue.name == "team-a" and queue.guarantee["gpu"] == 2

        again = client.apply(QUEUE_AND_JOB.split("---")[1])  # the queue alone, as text
        assert [(a.kind, a.action) for a in again] == [("Queue", "unchanged")]
        changed = QUEUE_AND_JOB.split("---")[1].replace("gpu: 2", "gpu: 1")
        assert [(a.kind, a.action) for a in client.apply(changed)] == [("Queue", "configured")]
        assert [a.action for a in client.apply(QUEUE_AND_JOB)] == ["configured", "unchanged"]

        with pytest.raises(ClientError) as taken:
            client.apply(QUEUE_AND_JOB.replace("replicas: 2", "replicas: 3"))
        assert taken.value.status == 409 and taken.value.field == "metadata.name"
        assert "differs in spec.roles[0].replicas" in str(taken.value)

        assert client.delete_job("hello").phase == "Succeeded"
        with pytest.raises(ClientError) as gone:
            client.job("hello")
        assert gone.value.status == 404 and gone.value.fix and "phalanx get jobs" in gone.value.fix
        client.delete_queue("team-a")
        assert client.queues() == []


def test_cancel_pages_and_volcano(server: Server) -> None:
    with Client(server.url, server.admin_token) as client:
        client.apply({"apiVersion": "phalanx/v1", "kind": "Queue", "metadata": {"name": "team-a"}})
        client.apply([job_doc(f"j{i}") for i in range(5)])
        names = [job.name for job in client.iter_jobs(page_size=2)]
        assert names == [f"j{i}" for i in range(5)]

        client.apply(job_doc("sleeper", "exec sleep 60"))
        wait_for(lambda: client.job("sleeper").phase == "Running", "sleeper to run")
        assert client.cancel("sleeper").cancel_requested
        assert finished(client, "sleeper").phase == "Cancelled"

        volcano = {
            "apiVersion": "batch.volcano.sh/v1alpha1",
            "kind": "Job",
            "metadata": {"name": "vc"},
            "spec": {
                "queue": "team-a",
                "minAvailable": 1,
                "tasks": [
                    {
                        "name": "worker",
                        "replicas": 1,
                        "template": {
                            "spec": {
                                "containers": [
                                    {
                                        # no image: it would be the role's, and
                                        # the local executor runs no container
                                        "name": "main",
                                        "command": ["sh", "-c", "echo volcano"],
                                        "resources": {"requests": {"cpu": "1"}},
                                    }
                                ]
                            }
                        },
                    }
                ],
            },
        }
        assert [a.name for a in client.apply(volcano)] == ["vc"]
        assert finished(client, "vc").phase == "Succeeded"
        assert "".join(client.logs("vc")) == "volcano\n"


def test_nodes_users_and_the_server(server: Server) -> None:
    with Client(server.url, server.admin_token) as client:
        assert client.health().status == "ok"
        assert "phalanx_" in client.metrics_text()
        nodes = client.nodes()
        assert [n.name for n in nodes] == ["node-0", "node-1"]
        assert len(nodes[0].gpus) == 4 and nodes[0].capacity["gpu"] == 4
        assert client.cordon("node-1").cordoned
        assert client.node("node-1").cordoned
        assert client.drain("node-1").draining
        assert not client.uncordon("node-1").cordoned

        assert client.whoami().name == "admin"
        made = client.create_user("alice")
        assert made.user == "alice" and made.token.startswith("phx_")
        # The API commits a new user or token just after answering (the session dependency
        # ends after the response), so reading it back at once can miss it: poll.
        wait_for(lambda: len(client.users()) == 2, "alice to be listed")
        assert sorted(u.name for u in client.users()) == ["admin", "alice"]
        second = client.create_token("alice", "laptop").token
    with Client(server.url, second) as alice:
        assert wait_for(lambda: _quietly(alice.whoami), "alice's token to work").role == "user"
        with pytest.raises(ClientError) as refused:
            alice.cordon("node-0")
        assert refused.value.status == 403


def test_tokens_through_the_sdk(server: Server) -> None:
    with Client(server.url, server.admin_token) as client:
        alice_token = client.create_user("alice").token
        made = client.create_token("alice", "ci", expires="12h")
        assert made.user == "alice" and made.expires_at is not None
        assert 11.9 * 3600 < made.expires_at - made.created_at <= 12 * 3600
        assert [t.label for t in client.tokens("alice")] == ["created", "ci"]
        assert [t.label for t in client.tokens()] == ["bootstrap"]
    with Client(server.url, alice_token) as alice:
        mine = {t.label: t for t in alice.tokens()}
        assert mine["created"].current and not mine["ci"].current
        alice.revoke_token(mine["ci"].id)
        alice.revoke_token(mine["created"].id)  # the token this client uses
        with pytest.raises(ClientError) as revoked:
            alice.whoami()
        assert revoked.value.status == 401 and revoked.value.field == "Authorization"


def test_a_listing_counts_tasks_and_the_sdk_pages_through_them(server: Server) -> None:
    with Client(server.url, server.admin_token) as client:
        client.apply(QUEUE_AND_JOB.replace("replicas: 2", "replicas: 3"))
        summary = client.jobs()[0]
        assert isinstance(summary, JobSummaryView) and not isinstance(summary, JobView)
        assert sum(summary.task_counts.values()) == 3
        assert [t.name for t in client.tasks("hello")] == [f"hello-worker-{i}" for i in range(3)]
        assert [t.index for t in client.iter_tasks("hello", page_size=2)] == [0, 1, 2]
        assert len(client.job("hello").tasks) == 3 and client.job("hello").tasks_omitted == 0


def test_errors_name_the_server_and_the_fix(server: Server) -> None:
    with Client(server.url) as anonymous, pytest.raises(ClientError) as no_token:
        anonymous.jobs()
    assert no_token.value.status == 401 and "PHALANX_TOKEN" in str(no_token.value)

    with Client("http://127.0.0.1:9", "phx_x") as nowhere, pytest.raises(ClientError) as down:
        nowhere.jobs()
    assert down.value.status is None
    assert "http://127.0.0.1:9" in str(down.value) and "phalanx up" in str(down.value)

    with Client(server.url, server.admin_token) as client:
        with pytest.raises(DocumentError) as bad:
            client.apply(QUEUE_AND_JOB.replace("gpu: 1}", "gpu: two}"))
        assert "line 9" in str(bad.value) and bad.value.field == "spec.roles[0].resources.gpu"
        assert client.queues() == []  # nothing was sent: the queue came in the same text
        with pytest.raises(ClientError) as unknown_queue:
            client.apply(job_doc("lost", queue="nowhere"))
        assert unknown_queue.value.field == "spec.queue"


def _quietly(call: Callable[[], T]) -> T | None:
    try:
        return call()
    except ClientError:
        return None
