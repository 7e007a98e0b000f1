"""What a new server's Ray executor finds on the agents that outlived the old one: a
task it did not adopt is killed, and a start of a task still running from an earlier
attempt fails instead of being taken for the new one. In-process executors on a real
three-node loopback cluster (``conftest``); each "server" is one RayExecutor."""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from phalanx.benchmarks.raycluster import LoopbackCluster
from phalanx.engine.decisions import Bind
from phalanx.executors.base import TaskEvent, TaskEventKind
from phalanx.executors.launch import TaskLaunch
from phalanx.executors.ray.agent import STALE_RUN
from phalanx.executors.ray.cluster import RayCluster
from phalanx.executors.ray.executor import RayExecutor
from tests.integration.control.serving import wait_for

NODE = "ray-127-0-0-2"


def resolve(bind: Bind) -> TaskLaunch:
    return TaskLaunch(
        job=bind.job,
        task=bind.task,
        role=bind.role,
        index=bind.index,
        node=bind.node,
        command="echo $$ > pid; exec sleep 300",
        address="127.0.0.2",
    )


@pytest.fixture
def cluster(ray_cluster: LoopbackCluster, tmp_path: Path) -> Iterator[RayCluster]:
    made = RayCluster(namespace=f"phalanx-test-{os.getpid()}", agent_root=tmp_path / "agents")
    made.start()
    yield made
    made.close()


def bind(task: str) -> Bind:
    return Bind(job="job", task=task, role="w", index=int(task[-1]), node=NODE)


def events_of(executor: RayExecutor, want: int) -> list[TaskEvent]:
    seen: list[TaskEvent] = []

    def enough() -> bool:
        seen.extend(executor.poll(now=time.time()))
        return len(seen) >= want

    wait_for(enough, f"{want} event(s)")
    return seen


def pid_of(cluster: RayCluster, task: str) -> int:
    path = cluster.agent_root / NODE / "tasks" / "job" / task / "pid"
    wait_for(path.exists, "the task's pid file")
    return int(path.read_text())


def test_a_new_server_kills_what_it_did_not_adopt_and_refuses_a_stale_start(
    cluster: RayCluster,
) -> None:
    old = RayExecutor(cluster, resolve)
    old.start([bind("t0"), bind("t1")], now=time.time())
    assert [e.kind for e in events_of(old, 2)] == [TaskEventKind.STARTED] * 2
    stray, kept = pid_of(cluster, "t0"), pid_of(cluster, "t1")

    new = RayExecutor(cluster, resolve)  # as after a restart: t1 adopted, t0 not
    kept_record = next(r for r in old.records() if r.task == "t1")
    new.adopt([kept_record], now=time.time())
    wait_for(lambda: new.poll(now=time.time()) or not Path(f"/proc/{stray}").exists(), "t0 killed")
    wait_for(lambda: not Path(f"/proc/{stray}").exists(), "the stray t0 gone")
    assert Path(f"/proc/{kept}").exists()  # the adopted one runs on

    newer = RayExecutor(cluster, resolve)  # a start of t1 while it still runs: refused
    newer.adopt([], now=time.time())
    newer.start([bind("t1")], now=time.time())
    refused = [e for e in events_of(newer, 1) if e.kind is TaskEventKind.FAILED_TO_START]
    assert refused and refused[0].message == STALE_RUN
    wait_for(lambda: not Path(f"/proc/{kept}").exists(), "the stale t1 killed")
