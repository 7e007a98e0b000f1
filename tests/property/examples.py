"""Minimal inputs that broke a property, kept as explicit Hypothesis examples.

Each one is the shrunk (then hand-tidied) counterexample of an engine defect; the
property tests replay them on every run, whatever the random search draws. Those
marked "fixed in d741ea0" guard against regressions.
"""

from __future__ import annotations

from phalanx.domain.job import Job, JobPhase, Role, Task, TaskPhase
from phalanx.domain.node import Node
from phalanx.domain.queue import Queue

from .world import NOW, World, res


def _worker(replicas: int, gpus: float) -> tuple[Role, ...]:
    return (Role(name="worker", replicas=replicas, resources=res(cpu=1, memory_gib=1, gpu=gpus)),)


def _tasks(*phases: tuple[TaskPhase, str | None]) -> tuple[Task, ...]:
    return tuple(
        Task(role="worker", index=i, phase=phase, node=node, start_time=NOW if node else None)
        for i, (phase, node) in enumerate(phases)
    )


RUNNING_ON_N0 = (TaskPhase.RUNNING, "n0")
WAITING = (TaskPhase.PENDING, None)

#: Reclaim evicts the running part of gang a1 (minAvailable 3) "whole", but a1's 4th
#: replica, allocated earlier in the same session, stays placed: it comes out as a lone
#: Pipeline decision for a gang that has nothing else left. (Fixed in d741ea0.)
GANG_REMNANT = World(
    nodes=(Node(name="n0", capacity=res(16, 64, 8)),),
    queues=(Queue(name="a", deserved=res(gpu=1)), Queue(name="b")),
    jobs=(
        Job(
            name="a1",
            queue="a",
            roles=_worker(4, 2),
            min_available=3,
            phase=JobPhase.RUNNING,
            tasks=_tasks(RUNNING_ON_N0, RUNNING_ON_N0, RUNNING_ON_N0, WAITING),
        ),
        Job(name="b1", queue="b", roles=_worker(1, 4), phase=JobPhase.QUEUED, creation_time=1),
    ),
    config_name="default",
)

#: n0 takes at most 2 tasks; one (all its GPUs) is releasing. Three 2-GPU tasks are
#: pipelined onto it: three tasks once the release ends. (Fixed in d741ea0.)
PIPELINED_PAST_MAX_TASKS = World(
    nodes=(Node(name="n0", capacity=res(16, 64, 8), max_tasks=2),),
    queues=(Queue(name="q0"),),
    jobs=(
        Job(
            name="old",
            queue="q0",
            roles=_worker(1, 8),
            phase=JobPhase.RUNNING,
            tasks=_tasks((TaskPhase.RELEASING, "n0")),
        ),
        Job(name="new", queue="q0", roles=_worker(3, 2), phase=JobPhase.QUEUED, creation_time=1),
    ),
    config_name="default",
)

#: A reverted cycle allocates and un-allocates 0.1 GPU three times for j00: its
#: ``allocated`` ended at 2.8e-17 GPU instead of 0, so drf ranked it behind j01 in the
#: next cycle over the very same state, and the Decisions came out in another order.
#: (Fixed in d741ea0: GPUs are counted in whole milli-GPUs.)
FRACTIONAL_DRIFT = World(
    nodes=(Node(name="n0", capacity=res(16, 64, 2)),),
    queues=(Queue(name="q0"),),
    jobs=(
        Job(name="j00", queue="q0", roles=_worker(3, 0.1)),
        Job(name="j01", queue="q0", roles=_worker(1, 0.1)),
    ),
    config_name="default",
)

#: The same remnant through the queue-limit path of preempt (``_free_quota``): queue q is
#: at its capability once a1's 4th replica is allocated; b1 (higher priority) needs 4
#: GPUs of quota, so a1's running tasks are evicted "whole" and the new replica remains.
QUOTA_GANG_REMNANT = World(
    nodes=(Node(name="n0", capacity=res(16, 64, 16)),),
    queues=(Queue(name="q", capability=res(gpu=8)),),
    jobs=(
        Job(
            name="a1",
            queue="q",
            roles=_worker(4, 2),
            min_available=3,
            phase=JobPhase.RUNNING,
            tasks=_tasks(RUNNING_ON_N0, RUNNING_ON_N0, RUNNING_ON_N0, WAITING),
        ),
        Job(
            name="b1",
            queue="q",
            roles=_worker(1, 4),
            priority=1,
            phase=JobPhase.QUEUED,
            creation_time=1,
        ),
    ),
    config_name="default",
)

#: n0 takes one task and zz holds that slot. To start "high", preempt frees queue quota
#: by evicting aa on n1, then pipelines high onto n0, which has GPUs to spare: zz is not
#: evicted for the slot, so n0 ends with two tasks.
PIPELINED_ONTO_A_FULL_NODE = World(
    nodes=(
        Node(name="n0", capacity=res(16, 64, 8), max_tasks=1),
        Node(name="n1", capacity=res(16, 64, 8)),
    ),
    queues=(Queue(name="q", capability=res(gpu=5)),),
    jobs=(
        Job(
            name="aa",
            queue="q",
            roles=_worker(1, 4),
            phase=JobPhase.RUNNING,
            tasks=_tasks((TaskPhase.RUNNING, "n1")),
        ),
        Job(
            name="zz",
            queue="q",
            roles=_worker(1, 1),
            phase=JobPhase.RUNNING,
            tasks=_tasks(RUNNING_ON_N0),
        ),
        Job(
            name="high",
            queue="q",
            roles=_worker(1, 1),
            priority=1,
            phase=JobPhase.QUEUED,
            creation_time=1,
        ),
    ),
    config_name="default",
)
