"""Simulation runs: reproducible to the byte, never over-commit a node, lose no job."""

from __future__ import annotations

import io
import json
from collections import defaultdict
from collections.abc import Callable

import pytest

from phalanx.domain.errors import EngineInvariantError
from phalanx.domain.job import Job, JobPhase, Role
from phalanx.domain.node import Node
from phalanx.domain.queue import Queue
from phalanx.domain.resources import Resources
from phalanx.engine import default_config
from phalanx.engine.lifecycle import JobChanged
from phalanx.policies import load_policy, policy_names
from phalanx.sim.runner import SimOptions, Simulation
from phalanx.sim.traces._common import gpu_role, one_role_job
from phalanx.sim.traces.synthetic import SyntheticParams, synthetic_workload
from phalanx.sim.workload import Workload, WorkloadJob

GIB = 2**30
NODES = [
    Node(name=f"n{i}", capacity=Resources.of({"cpu": 64_000, "memory": 512 * GIB, "gpu": 8}))
    for i in range(6)
]


def _workload(seed: int = 7) -> Workload:
    """About 60 jobs in 4 hours on 48 GPUs: busy enough to queue, evict and reclaim."""
    return synthetic_workload(SyntheticParams(rate=0.004), seed=seed, until=4 * 3600)


def _run(
    workload: Workload, *, config=None, options: SimOptions | None = None
) -> tuple[str, dict[str, object]]:  # type: ignore[no-untyped-def]
    out = io.StringIO()
    sim = Simulation(
        NODES,
        workload,
        config or default_config(),
        options=options or SimOptions(node_mtbf=86400.0),
        events_out=out,
    )
    metrics = sim.run()
    return out.getvalue(), metrics.summary(sim_wall_s=0.0)


def test_same_seed_gives_byte_identical_events() -> None:
    first, _ = _run(_workload())
    second, _ = _run(_workload())
    assert first == second
    assert first.count('"ev":"Placed"') > 10


def test_no_node_is_over_committed_at_any_instant() -> None:
    events, _ = _run(_workload())
    capacity = {n.name: n.capacity for n in NODES}
    held: dict[str, tuple[str, str, dict[str, float]]] = {}
    used: dict[str, dict[str, float]] = defaultdict(lambda: defaultdict(float))

    def release(names: list[str]) -> None:
        for name in names:
            _, node, resources = held.pop(name)
            for key, amount in resources.items():
                used[node][key] -= amount

    for line in events.splitlines():
        row = json.loads(line)
        if row["ev"] == "Placed":
            for task in row["tasks"]:
                held[task["task"]] = (row["job"], task["node"], task["resources"])
                for name, amount in task["resources"].items():
                    used[task["node"]][name] += amount
                    assert used[task["node"]][name] <= capacity[task["node"]].get(name) + 1e-6, row
        elif row["ev"] in ("Evicted", "TaskFailed"):  # each lists the tasks that leave
            release(row["tasks"])
        elif row["ev"] in ("Pending", "Succeeded", "Failed", "Cancelled"):  # none stays
            release([name for name, (job, _, _) in held.items() if job == row["job"]])
    assert not held  # every started task ended


def test_every_submitted_job_is_accounted_for() -> None:
    workload = _workload()
    _, summary = _run(workload)
    assert summary["jobs"] == len(workload.jobs)
    assert summary["finished"] + summary["failed"] + summary["unfinished"] == summary["jobs"]
    assert summary["unfinished"] == 0  # the clock runs until every job is done


@pytest.mark.parametrize("name", policy_names())
def test_every_shipped_policy_replays_a_workload(name: str) -> None:
    policy = load_policy(name)
    _, summary = _run(
        _workload(3), config=policy.config, options=SimOptions(oracle_runtime=policy.oracle_runtime)
    )
    assert summary["finished"] == summary["jobs"]


def test_queues_from_the_workload_or_given() -> None:
    workload = _workload()
    queues = tuple(Queue(name=q) for q in sorted({j.job.queue for j in workload.jobs}))
    _, summary = _run(Workload(jobs=workload.jobs, queues=queues))
    assert set(summary["per_queue"]) == {q.name for q in queues}


def test_per_user_figures_add_up_to_the_cluster() -> None:
    workload = _workload()
    _, summary = _run(workload, options=SimOptions())
    per_user = summary["per_user"]
    assert isinstance(per_user, dict)
    assert set(per_user) == {j.job.user for j in workload.jobs}
    assert sum(u["jobs"] for u in per_user.values()) == summary["jobs"]
    total_share = sum(u["gpu_share_avg"] for u in per_user.values())
    assert total_share == pytest.approx(summary["gpu_alloc_ratio_avg"], abs=1e-4)
    assert all(u["starvation_s"] >= u["avg_queue_delay_s"] for u in per_user.values())


def test_fragmentation_is_sampled_and_bounded_by_free_gpus() -> None:
    _, summary = _run(_workload(), options=SimOptions(fragmentation_every=60.0))
    fragmented = summary["gpu_fragmented_ratio_avg"]
    assert isinstance(fragmented, float) and isinstance(summary["gpu_alloc_ratio_avg"], float)
    assert 0.0 < fragmented <= 1.0 - summary["gpu_alloc_ratio_avg"] + 1e-6
    assert 0.0 < summary["gpu_frag_rate_avg"] <= 1.0  # type: ignore[operator]


def test_observers_see_every_event_row_and_every_session() -> None:
    out = io.StringIO()
    rows: list[dict[str, object]] = []
    sessions: list[float] = []
    sim = Simulation(
        NODES,
        _workload(),
        default_config(),
        events_out=out,
        on_event=rows.append,
        on_session=lambda now, decisions: sessions.append(now),
    )
    metrics = sim.run()
    assert rows == [json.loads(line) for line in out.getvalue().splitlines()]
    assert len(sessions) == len(metrics.session_seconds) and sessions == sorted(sessions)


def test_a_fixed_period_holds_every_session_to_whole_periods() -> None:
    # One 8-GPU node; an 8-GPU job arrives at 10 s and runs 100 s; a second arrives at
    # 20 s and waits. Sessions only at multiples of 60 s: the first starts at 60, ends at
    # 160, and the second starts at 180. Without: at 11 (a trigger delay after its
    # arrival) and 112 (one after the first ends at 111).
    def job(name: str, submit: float) -> WorkloadJob:
        spec = one_role_job(name=name, queue="q", role=gpu_role(1, 8.0), submit_time=submit)
        return WorkloadJob(job=spec, duration=100.0)

    workload = Workload(jobs=(job("a", 10.0), job("b", 20.0)), queues=(Queue(name="q"),))
    node = Node(name="n0", capacity=Resources.of({"gpu": 8}))
    for fixed, expected in ((True, (60.0, 180.0)), (False, (11.0, 112.0))):
        rows: list[dict[str, object]] = []
        options = SimOptions(fixed_period=fixed)
        Simulation([node], workload, default_config(), options=options, on_event=rows.append).run()
        starts = {row["job"]: row["t"] for row in rows if row["ev"] == "Placed"}
        assert (starts["a"], starts["b"]) == expected


def _one_task_job(name: str, at: float) -> WorkloadJob:
    role = Role(name="main", replicas=1, resources=Resources.of({"cpu": 1000}))
    return WorkloadJob(job=Job(name=name, queue="q", roles=(role,), creation_time=at), duration=10)


def _driven(on_job_end: Callable[[JobChanged], None] | None = None) -> Simulation:
    return Simulation(
        NODES,
        Workload(jobs=(), queues=(Queue(name="q"),)),
        default_config(),
        options=SimOptions(trigger_delay=0.0),
        on_job_end=on_job_end,
    )


def test_a_driver_submits_jobs_as_the_run_goes_and_hears_of_their_ends() -> None:
    """``submit``, ``call_at`` and ``on_job_end``: what a pipeline replay builds on."""
    ends: list[tuple[str, JobPhase, float]] = []

    def ended(change: JobChanged) -> None:
        ends.append((change.job, change.phase, change.time))
        if change.job == "first":
            sim.submit(_one_task_job("second", change.time))

    sim = _driven(ended)
    sim.call_at(5.0, lambda now: sim.submit(_one_task_job("first", now)))
    metrics = sim.run()
    assert ends == [("first", JobPhase.SUCCEEDED, 15.0), ("second", JobPhase.SUCCEEDED, 25.0)]
    assert metrics.jobs["second"].submit == 15.0


def test_a_job_name_is_submitted_once() -> None:
    sim = _driven()
    sim.submit(_one_task_job("first", 0.0))
    with pytest.raises(EngineInvariantError, match="first was submitted already"):
        sim.submit(_one_task_job("first", 1.0))
