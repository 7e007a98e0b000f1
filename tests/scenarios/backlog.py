"""A deep backlog for one session, and the work a session does on it, counted.

``backlog(waiting)``: 16 nodes of 8 GPUs, full with 8-GPU jobs of two queues that have
run a short while (so no shipped policy's rules let a newcomer evict them), and
``waiting`` later jobs of 1, 2, 4 or 8 GPUs (some gangs of two tasks), by turns in each
queue and of four users, not yet admitted: the session's state in a replay at several
times its trace's load, where thousands of jobs wait and none fits.

``session_calls``: the Python function calls one session makes on it: a count of the
work that does not drift with the machine's speed, as wall time does.
"""

from __future__ import annotations

import sys
from types import FrameType

from phalanx.domain.job import Job, JobPhase
from phalanx.domain.queue import Queue
from phalanx.engine.cycle import run_cycle
from phalanx.engine.framework.config import SchedulerConfig
from phalanx.engine.snapshot import Snapshot
from tests.builders import make_job, make_nodes, make_queue, res

NODES = 16
QUEUES = ("team-a", "team-b")
SIZES = (1, 2, 4, 8)
NOW = 1000.0


def backlog_queues() -> list[Queue]:
    """Two queues, each deserving half the cluster's GPUs."""
    half = res(cpu=NODES * 8, memory_gib=NODES * 32, gpu=NODES * 4)
    return [make_queue(name, deserved=half, guarantee=half) for name in QUEUES]


def backlog(waiting: int) -> list[Job]:
    """The running jobs that fill the cluster, then ``waiting`` jobs behind them."""
    jobs = [
        make_job(
            f"run-{i}",
            queue=QUEUES[i % 2],
            user=f"u{i % 4}",
            gpus=8,
            running_on=[f"n{i}"],
            started=NOW - 60.0,
            created=float(i),
        )
        for i in range(NODES)
    ]
    for i in range(waiting):
        gpus = SIZES[i % len(SIZES)]
        replicas = 2 if i % 5 == 0 else 1
        jobs.append(
            make_job(
                f"wait-{i}",
                queue=QUEUES[i % 2],
                user=f"u{i % 4}",
                gpus=gpus,
                replicas=replicas,
                created=100.0 + i,
                phase=JobPhase.PENDING,
            )
        )
    return jobs


def session_calls(config: SchedulerConfig, waiting: int, *, now: float = NOW) -> int:
    """Python function calls made by one session at ``now`` on ``backlog(waiting)``
    (building the snapshot not counted)."""
    nodes = make_nodes(NODES, cpu=64, memory_gib=256)
    snapshot = Snapshot.build(nodes=nodes, queues=backlog_queues(), jobs=backlog(waiting))
    count = 0

    def profile(frame: FrameType, event: str, arg: object) -> None:
        nonlocal count
        if event == "call":
            count += 1

    previous = sys.getprofile()
    sys.setprofile(profile)
    try:
        run_cycle(snapshot, config, now=now)
    finally:
        sys.setprofile(previous)
    return count
