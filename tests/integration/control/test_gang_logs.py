"""``phalanx logs JOB --all`` on a real 2-task gang, through the SDK, the CLI and the API.

Each task prints a line, then half a line, and waits for a file before it ends that
line: a follow must show both first lines and no half line until the file appears.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from phalanx.client import Client, ClientError
from phalanx.control.server import Server
from tests.integration.control.serving import Api, role, wait_for
from tests.integration.control.test_cli import ok, phalanx, refused

TASKS = ("gang-worker-0", "gang-worker-1")


def task_lines(rank: int) -> list[str]:
    """What task ``rank`` prints on stdout, prefixed as ``--all`` shows it."""
    return [f"{TASKS[rank]} | {line}" for line in (f"start {rank}", f"half-{rank} done", "bye")]


@pytest.fixture
def go(tmp_path: Path) -> Path:
    """The file the gang's tasks wait for before they finish."""
    return tmp_path / "go"


@pytest.fixture
def gang(server: Server, go: Path) -> Iterator[Api]:
    """A running 2-task gang ``gang`` of queue team-a; its tasks wait for ``go``."""
    api = Api(server.url, server.admin_token or "")
    api.queue("team-a")
    command = (
        "echo start $RANK; printf half-$RANK; "
        f"while [ ! -e {go} ]; do sleep 0.05; done; "
        "echo ' done'; echo warn-$RANK >&2; echo bye"
    )
    api.submit("gang", "team-a", role(replicas=2, command=command, gpu=1))
    job = api.wait_phase("gang", "Running")
    assert [t["name"] for t in job["tasks"]] == list(TASKS)
    yield api
    go.touch()  # whatever the test did, let the tasks end


def started(client: Client) -> bool:
    """True once both tasks printed their first line."""
    text = "".join(client.logs("gang", all_tasks=True))
    return all(f"{task} | start {rank}\n" in text for rank, task in enumerate(TASKS))


def test_the_sdk_follows_every_task_in_whole_prefixed_lines(
    server: Server, gang: Api, go: Path
) -> None:
    received = ""
    with Client(server.url, server.admin_token) as client:
        with client.logs("gang", follow=True, all_tasks=True) as chunks:
            for chunk in chunks:
                received += chunk
                if not go.exists() and all(
                    f"{task} | start {rank}\n" in received for rank, task in enumerate(TASKS)
                ):
                    assert "half" not in received  # half a line is never sent
                    go.touch()
        assert client.job("gang").phase == "Succeeded"  # the follow ended with the job
        lines = received.splitlines()
        assert sorted(lines) == sorted(task_lines(0) + task_lines(1))
        for rank, task in enumerate(TASKS):  # each task's lines in its own order
            assert [line for line in lines if line.startswith(task)] == task_lines(rank)

        # After the end: task after task, and stderr the same way.
        assert "".join(client.logs("gang", all_tasks=True)).splitlines() == (
            task_lines(0) + task_lines(1)
        )
        assert "".join(client.logs("gang", stream="stderr", all_tasks=True)) == (
            "gang-worker-0 | warn-0\ngang-worker-1 | warn-1\n"
        )
        # One task by name is printed as it is, unprefixed.
        assert "".join(client.logs("gang", "gang-worker-1")) == "start 1\nhalf-1 done\nbye\n"


def test_a_task_and_all_tasks_at_once_are_refused_naming_the_field(
    server: Server, gang: Api
) -> None:
    with Client(server.url, server.admin_token) as client, pytest.raises(ClientError) as caught:
        client.logs("gang", "gang-worker-0", all_tasks=True)
    assert caught.value.field == "all" and caught.value.fix
    answer = gang.http.get("/api/v1/jobs/gang/logs", params={"task": TASKS[0], "all": True})
    assert answer.status_code == 422
    assert answer.json()["field"] == "all" and "fix" in answer.json()


def test_the_cli_prints_every_task_with_all_and_follows_with_f(
    server: Server, gang: Api, go: Path
) -> None:
    with Client(server.url, server.admin_token) as client:

        def release_when_started() -> None:
            wait_for(lambda: started(client), "both tasks to print their first line")
            go.touch()

        releaser = threading.Thread(target=release_when_started)
        releaser.start()
        followed = ok(phalanx(server, "logs", "gang", "--all", "-f"))
        releaser.join()
    lines = followed.splitlines()
    for rank, task in enumerate(TASKS):
        assert [line for line in lines if line.startswith(task)] == task_lines(rank)
    assert len(lines) == 6

    assert ok(phalanx(server, "logs", "gang", "--all")).splitlines() == (
        task_lines(0) + task_lines(1)
    )
    assert ok(phalanx(server, "logs", "gang", "--all", "--stderr")) == (
        "gang-worker-0 | warn-0\ngang-worker-1 | warn-1\n"
    )
    assert ok(phalanx(server, "logs", "gang", "gang-worker-0")) == "start 0\nhalf-0 done\nbye\n"
    error = refused(phalanx(server, "logs", "gang", "gang-worker-0", "--all"))
    assert "--all" in error and "fix: " in error
