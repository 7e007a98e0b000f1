"""The engine's multi-cycle scenarios, run again through the simulator.

Each test re-tells a scenario of the ``World`` driver (``tests/scenarios/world.py``) as a
workload for ``phalanx.sim.runner.Simulation``: jobs arrive at their ``created`` time and
run for a duration, sessions come when something happens and periodically while work
waits, and evicted tasks stop through the simulated cluster. The assertions read the
run's ``events.jsonl`` rows and its ``Metrics``, and state the same behaviour the
``World`` test proves (gangs start whole, reclaim stops at deserved shares, preemption
shrinks a gang to its minimum, reservations beat a stream of small jobs, queues settle).

Every run is replayed by ``_replay``, which checks at every instant that no node holds
more than its capacity, that no gang runs below its minAvailable (unless the test runs
without the gang plugin), that only running tasks are evicted or end, and that the GPUs
held per queue agree with the Metrics' allocation series.

Scenarios without their own timing use ``OPTIONS``: a session at once after each
arrival or release, one a second while work waits (backing off to a minute), and
evicted tasks that stop at once (``grace=0``), which is what ``World`` assumes. One
test gives evictions a grace period and shows what the simulator adds: the reclaimer
starts only once the evicted tasks have stopped. No test reads the wall clock.
"""

from __future__ import annotations

import heapq
import io
import json
from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from typing import Any

import pytest

from phalanx.domain.job import Job, JobPhase
from phalanx.domain.node import Node
from phalanx.domain.queue import Queue
from phalanx.engine import SchedulerConfig
from phalanx.sim.metrics import Metrics
from phalanx.sim.runner import SimOptions, Simulation
from phalanx.sim.workload import Workload, WorkloadJob
from tests.builders import config, make_job, make_node, make_nodes, make_queue, res
from tests.scenarios.test_preemption_loop import CASES, Case
from tests.scenarios.test_quota import sibling_tree

OPTIONS = SimOptions(period=1.0, max_period=60.0, trigger_delay=0.0, grace=0.0)
PENDING = JobPhase.PENDING  # a job that enqueue must admit first
FOREVER = 1e6  # a duration longer than any run here: the job holds its GPUs to the end
LONG_RUN = 600.0  # ten minutes of sessions after two queues settled

# the configurations of the World scenarios re-told here
GANG = config(["allocate"], ["priority", "gang"], ["drf", "predicates", "binpack"])
NO_GANG = config(["allocate"], ["priority"], ["drf", "predicates", "binpack"])
PREEMPT = config(["allocate", "preempt"], ["priority", "gang"], ["drf", "predicates", "binpack"])
RECLAIM = config(
    ["allocate", "reclaim"], ["priority", "gang"], ["drf", "predicates", "capacity", "binpack"]
)
OVERCOMMIT_RECLAIM = config(
    ["enqueue", "allocate", "reclaim"],
    ["priority", "gang", "overcommit"],
    ["drf", "predicates", "capacity", "binpack"],
)
WITH_BACKFILL = config(
    ["enqueue", "allocate", "backfill"],
    ["priority", "gang", "sla"],
    ["drf", "predicates", "binpack"],
)
WITHOUT_BACKFILL = config(
    ["enqueue", "allocate"], ["priority", "gang", "sla"], ["drf", "predicates", "binpack"]
)
CAPACITY_ALL = config(
    ["enqueue", "allocate", "reclaim", "preempt", "backfill"],
    ["priority", "gang"],
    ["drf", "predicates", "capacity", "binpack"],
)

Row = dict[str, Any]


# -- running and replaying ------------------------------------------------------------------


def _run_for(job: Job, duration: float, *, checkpoint: float | None = None) -> WorkloadJob:
    """``job`` arriving at its ``created`` time and running ``duration`` seconds."""
    return WorkloadJob(job=job, duration=duration, checkpoint_interval=checkpoint)


@dataclass(frozen=True, slots=True, kw_only=True)
class Run:
    """One simulated run: its events.jsonl rows, its Metrics, and GPUs held per queue."""

    rows: list[Row]
    metrics: Metrics
    timeline: list[tuple[float, dict[str, float]]]  # (instant, queue -> GPUs held after it)

    def of(self, ev: str, job: str | None = None) -> list[Row]:
        """Rows of kind ``ev`` (of ``job``, when given), in order."""
        return [r for r in self.rows if r["ev"] == ev and (job is None or r["job"] == job)]

    def starts(self, job: str) -> list[float]:
        """When ``job`` had tasks started."""
        return [r["t"] for r in self.of("Placed", job)]

    def held(self, queue: str, at: float) -> float:
        """GPUs that ``queue``'s tasks hold on nodes at instant ``at`` (once it is over)."""
        value = 0.0
        for t, per_queue in self.timeline:
            if t > at:
                break
            value = per_queue.get(queue, 0.0)
        return value

    def evicted_tasks(self) -> Counter[str]:
        """How often each task was evicted."""
        return Counter(task for row in self.of("Evicted") for task in row["tasks"])


def _simulate(
    nodes: Sequence[Node],
    queues: Sequence[Queue],
    cfg: SchedulerConfig,
    jobs: Iterable[WorkloadJob],
    *,
    options: SimOptions = OPTIONS,
    gang: bool = True,
) -> Run:
    """Run ``jobs`` through the simulator and replay its events (see ``_replay``)."""
    workload = Workload(jobs=tuple(sorted(jobs, key=lambda w: (w.submit_time, w.name))))
    out = io.StringIO()
    simulation = Simulation(nodes, workload, cfg, queues=queues, options=options, events_out=out)
    metrics = simulation.run()
    rows = [json.loads(line) for line in out.getvalue().splitlines()]
    gangs = {w.name: w.job.gang_size for w in workload.jobs} if gang else None
    run = Run(rows=rows, metrics=metrics, timeline=_replay(rows, nodes, gangs, options.grace))
    # events.jsonl and the Metrics tell the same story of GPUs held per queue
    for queue, series in metrics.queue_alloc.items():
        for t, gpus in series.points:
            assert run.held(queue, t) == pytest.approx(gpus), (queue, t)
    return run


def _replay(
    rows: Sequence[Row],
    nodes: Sequence[Node],
    gangs: dict[str, int] | None,
    grace: float,
) -> list[tuple[float, dict[str, float]]]:
    """Replay events.jsonl, checking every instant; the GPUs each queue holds after each.

    A started task holds its node until its job's finish / fail / kill row lists it, or
    until ``grace`` seconds after a row evicts it (it is stopping meanwhile: it still
    holds the node, but no longer counts towards its gang).
    """
    capacity = {n.name: n.capacity for n in nodes}
    used: dict[str, dict[str, float]] = {n.name: defaultdict(float) for n in nodes}
    held: dict[str, tuple[str, str, str, dict[str, float]]] = {}  # task -> job, queue, node, res
    stopping: list[tuple[float, str]] = []  # (when it is gone, task)
    active: Counter[str] = Counter()  # job -> tasks on a node and not stopping
    timeline: list[tuple[float, dict[str, float]]] = []
    now: float | None = None

    def release(task: str) -> None:
        _, _, node, resources = held.pop(task)
        for name, amount in resources.items():
            used[node][name] -= amount

    def close(t: float) -> None:
        if gangs is not None:
            for job, running in active.items():
                assert running == 0 or running >= gangs[job], (
                    f"t={t}: {job} runs {running} tasks, below its gang of {gangs[job]}"
                )
        per_queue: dict[str, float] = defaultdict(float)
        for _, queue, _, resources in held.values():
            per_queue[queue] += resources.get("gpu", 0.0)
        timeline.append((t, dict(per_queue)))

    def advance(t: float) -> None:
        # stops due by t happen first (the simulator handles releases before sessions)
        nonlocal now
        while True:
            due = stopping[0][0] if stopping and stopping[0][0] <= t else t
            if now is not None and due > now:
                close(now)
            now = due
            if not (stopping and stopping[0][0] <= t):
                return
            release(heapq.heappop(stopping)[1])

    for row in rows:
        assert now is None or row["t"] >= now, f"time went backwards: {row}"
        advance(row["t"])
        job = row["job"]
        if row["ev"] == "Placed":
            for task in row["tasks"]:
                assert task["task"] not in held, f"{task['task']} started twice: {row}"
                node = task["node"]
                held[task["task"]] = (job, row["queue"], node, task["resources"])
                active[job] += 1
                for name, amount in task["resources"].items():
                    used[node][name] += amount
                    limit = capacity[node].get(name)
                    assert used[node][name] <= limit + 1e-6, f"{node} over-committed: {row}"
        elif row["ev"] == "Evicted":
            stopping_now = {task for _, task in stopping}
            for task in row["tasks"]:
                assert task in held and task not in stopping_now, f"{task} not running: {row}"
                heapq.heappush(stopping, (row["t"] + grace, task))
                active[job] -= 1
        elif row["ev"] in ("TaskFailed", "Pending", "Succeeded", "Failed", "Cancelled"):
            stopping_now = {task for _, task in stopping}
            listed = row.get("tasks") if row["ev"] == "TaskFailed" else None
            for task in [t for t, h in held.items() if h[0] == job and t not in stopping_now]:
                if listed is None or task in listed:
                    release(task)
                    active[job] -= 1
    advance(max([t for t, _ in stopping], default=now or 0.0))
    close(now or 0.0)
    return timeline


# -- gangs (test_gang) ---------------------------------------------------------------------


def _draining_cluster_and_two_gangs() -> list[WorkloadJob]:
    """Two 8-GPU nodes full of 4-GPU fillers, and two gangs that each need the whole cluster.

    The fillers end at t=10, 20, 30 and 40; the gangs (4 tasks x 4 GPUs) arrive at t=1 and 2.
    """
    fillers = [
        _run_for(make_job(f"filler{i}", gpus=4), duration=end)
        for i, end in enumerate((10.0, 20.0, 30.0, 40.0))
    ]
    gangs = [
        _run_for(make_job("gang-a", gpus=4, replicas=4, created=1), duration=100),
        _run_for(make_job("gang-b", gpus=4, replicas=4, created=2), duration=100),
    ]
    return [*fillers, *gangs]


def test_two_gangs_on_a_draining_cluster_start_whole_one_after_the_other_and_both_finish() -> None:
    run = _simulate(make_nodes(2), [make_queue()], GANG, _draining_cluster_and_two_gangs())

    # nothing of either gang runs while the fillers drain one by one (no half-started gang)
    assert run.starts("gang-a") == [40.0]  # the last filler ends at 40
    assert [len(r["tasks"]) for r in run.of("Placed", "gang-a")] == [4]
    assert run.starts("gang-b") == [140.0]  # once gang-a has finished
    assert [len(r["tasks"]) for r in run.of("Placed", "gang-b")] == [4]
    records = run.metrics.jobs
    assert (records["gang-a"].outcome, records["gang-b"].outcome) == ("finished", "finished")
    assert (records["gang-a"].jct, records["gang-b"].jct) == (139.0, 238.0)
    assert run.of("Evicted") == []


def test_without_the_gang_plugin_two_gangs_hold_half_the_cluster_each_and_never_finish() -> None:
    options = replace(OPTIONS, until=1000.0)
    run = _simulate(
        make_nodes(2),
        [make_queue()],
        NO_GANG,
        _draining_cluster_and_two_gangs(),
        options=options,
        gang=False,
    )

    # each grabbed two of its four tasks' room as the fillers ended: the classic deadlock
    assert run.held("default", 1000) == 16  # every GPU is held ...
    started = Counter(r["job"] for r in run.of("Placed") for _ in r["tasks"])
    assert (started["gang-a"], started["gang-b"]) == (2, 2)
    # ... but the simulated cluster runs a gang only with all its tasks: no progress at all
    for name in ("gang-a", "gang-b"):
        record = run.metrics.jobs[name]
        assert record.first_start is None and record.outcome == "pending"


# -- preemption (test_preempt) -------------------------------------------------------------


def test_priority_preemption_shrinks_a_gang_to_its_minimum_which_keeps_running() -> None:
    # victim checkpoints every second, so its finish time shows how long it really ran
    jobs = [
        _run_for(
            make_job("victim", gpus=4, replicas=4, min_available=2, priority=1),
            duration=100,
            checkpoint=1.0,
        ),
        _run_for(make_job("urgent", gpus=4, replicas=2, priority=10, created=1), duration=50),
        _run_for(make_job("more", gpus=4, priority=10, created=3), duration=50),
    ]

    run = _simulate(make_nodes(2), [make_queue()], PREEMPT, jobs)  # 16 GPUs

    first, second = run.of("Evicted", "victim")
    # urgent takes the surplus: two tasks go, the gang keeps its minimum of two
    assert (first["t"], first["by"], first["action"]) == (1.0, "urgent", "preempt")
    assert first["tasks"] == ["victim-worker-0", "victim-worker-1"]
    assert run.starts("urgent") == [1.0]
    # at its minimum, the gang is taken whole by the next preemptor, never left crippled
    assert (second["t"], second["by"], second["action"]) == (3.0, "more", "preempt")
    assert sorted(second["tasks"]) == ["victim-worker-2", "victim-worker-3"]
    assert max(run.evicted_tasks().values()) == 1
    # it ran on two tasks from 1 to 3 (3 seconds of work kept), restarted when urgent ended
    restart = run.starts("victim")[1]
    assert restart == 51.0
    victim = run.metrics.jobs["victim"]
    assert victim.outcome == "finished" and victim.end == restart + 97
    assert victim.preemptions == 2


# -- reclaim (test_reclaim, test_overcommit) ------------------------------------------------


def _jobs(
    queue: str, count: int, *, gpus: float, start: float, duration: float = FOREVER
) -> list[WorkloadJob]:
    """``count`` jobs of ``queue``, one arriving each second from ``start``."""
    return [
        _run_for(make_job(f"{queue}{i}", queue=queue, gpus=gpus, created=start + i), duration)
        for i in range(count)
    ]


def test_three_queues_reclaim_borrowed_gpus_down_to_exactly_their_deserved_shares() -> None:
    queues = [
        make_queue("a", deserved=res(gpu=16)),
        make_queue("b", deserved=res(gpu=8)),
        make_queue("c", deserved=res(gpu=8)),
    ]
    jobs = [
        *_jobs("a", 16, gpus=2, start=0),
        *_jobs("b", 8, gpus=2, start=20),
        *_jobs("c", 8, gpus=2, start=30),
    ]

    run = _simulate(make_nodes(4), queues, RECLAIM, jobs, options=replace(OPTIONS, until=300))

    assert run.held("a", 19) == 32  # a borrowed the whole idle cluster
    assert {q: run.held(q, 300) for q in "abc"} == {"a": 16, "b": 8, "c": 8}
    # exactly a's borrowed 16 GPUs were reclaimed, each task once, and nothing after that
    evictions = run.of("Evicted")
    assert len(evictions) == 8 and all(r["job"].startswith("a") for r in evictions)
    assert {r["action"] for r in evictions} == {"reclaim"}
    assert max(run.evicted_tasks().values()) == 1
    assert max(r["t"] for r in evictions) < 40
    assert run.metrics.preemptions == 8


def test_an_overcommit_queues_excess_is_reclaimed_before_a_borrowing_queues() -> None:
    queues = [
        make_queue("oc", deserved=res(gpu=8), capability=res(gpu=8), overcommit=True),
        make_queue("borrow", deserved=res(gpu=8)),
        make_queue("rec", deserved=res(gpu=16)),
    ]
    jobs = [
        # oc runs 16 GPUs (8 over its quota, oc2 and oc3 started last); borrow 16 (8 borrowed)
        *(
            _run_for(make_job(f"oc{i}", queue="oc", gpus=4, created=i, phase=PENDING), FOREVER)
            for i in range(4)
        ),
        *(
            _run_for(
                make_job(f"bw{i}", queue="borrow", gpus=4, created=4 + i, phase=PENDING), FOREVER
            )
            for i in range(4)
        ),
        _run_for(
            make_job("r0", queue="rec", gpus=4, replicas=2, created=10, phase=PENDING), FOREVER
        ),
    ]

    run = _simulate(
        make_nodes(4), queues, OVERCOMMIT_RECLAIM, jobs, options=replace(OPTIONS, until=100)
    )

    assert (run.held("oc", 9), run.held("borrow", 9)) == (16, 16)
    evictions = run.of("Evicted")
    assert sorted(r["job"] for r in evictions) == ["oc2", "oc3"]
    assert {(r["t"], r["by"], r["action"]) for r in evictions} == {(10.0, "r0", "reclaim")}
    assert run.starts("r0") == [10.0]
    assert {q: run.held(q, 100) for q in ("oc", "borrow", "rec")} == {
        "oc": 8,
        "borrow": 16,
        "rec": 8,
    }


def test_a_reclaimer_starts_only_once_the_evicted_tasks_stopped_after_their_grace() -> None:
    # World removes an evicted task at once; a simulated one takes ``grace`` seconds to stop
    queues = [make_queue("a", deserved=res(gpu=8)), make_queue("b", deserved=res(gpu=8))]
    jobs = [
        *_jobs("a", 4, gpus=4, start=0),
        _run_for(make_job("b0", queue="b", gpus=8, created=10), FOREVER),
    ]
    options = replace(OPTIONS, grace=5.0, until=100)

    run = _simulate(make_nodes(2), queues, RECLAIM, jobs, options=options)

    evictions = run.of("Evicted")
    assert [(r["t"], r["by"], r["action"]) for r in evictions] == [(10.0, "b0", "reclaim")] * 2
    assert run.starts("b0") == [15.0]  # not while the two evicted tasks still hold the node
    assert run.held("a", 10) == 16 and run.held("a", 15) == 8


# -- queues that settle (test_preemption_loop) ---------------------------------------------


def _two_queues(case: Case) -> tuple[list[Node], list[Queue], SchedulerConfig]:
    if case.quota == "capacity":
        queues = [
            make_queue("a", deserved=res(gpu=case.share)),
            make_queue("b", deserved=res(gpu=case.share)),
        ]
    else:
        queues = [make_queue("a"), make_queue("b")]
    cfg = config(
        ["enqueue", "allocate", "reclaim", "preempt"],
        ["priority", "gang"],
        ["drf", "predicates", case.quota, "binpack"],
    )
    nodes = [make_node(f"n{i}", gpus=g) for i, g in enumerate(case.nodes)]
    return nodes, queues, cfg


def _burst(queue: str, size: int, case: Case, *, start: float) -> list[WorkloadJob]:
    return [
        _run_for(
            make_job(
                f"{queue}{i}", queue=queue, gpus=size, replicas=case.replicas, created=start + i
            ),
            FOREVER,
        )
        for i in range(8)
    ]


@pytest.mark.parametrize("case", CASES.values(), ids=CASES.keys())
def test_two_queues_with_equal_shares_do_not_evict_each_other_over_a_long_run(case: Case) -> None:
    nodes, queues, cfg = _two_queues(case)
    jobs = [
        *_burst("a", case.size_a, case, start=0),  # a takes the idle cluster
        *_burst("b", case.size_b, case, start=100),
    ]

    run = _simulate(nodes, queues, cfg, jobs, options=replace(OPTIONS, until=LONG_RUN))

    evictions = run.of("Evicted")
    assert evictions, "b never reclaimed anything: the case tests nothing"
    assert max(r["t"] for r in evictions) <= 107  # settled while b's jobs arrived
    assert max(run.evicted_tasks().values()) == 1
    assert run.held("b", LONG_RUN) >= case.size_b * case.replicas  # b runs at least one job
    assert len(run.metrics.session_seconds) >= 16 + 10  # sessions after settling evict nothing


def test_queues_that_keep_submitting_settle_after_one_eviction() -> None:
    case = CASES["3-gpu-tasks-in-5-gpu-shares"]
    nodes, queues, cfg = _two_queues(case)
    jobs = _burst("a", 3, case, start=0)
    for k in range(1, 21):  # both queues always have more work waiting
        jobs += [
            _run_for(make_job(f"a-late{k}", queue="a", gpus=3, created=100 + 10 * k), FOREVER),
            _run_for(make_job(f"b-late{k}", queue="b", gpus=3, created=100 + 10 * k), FOREVER),
        ]

    run = _simulate(nodes, queues, cfg, jobs, options=replace(OPTIONS, until=LONG_RUN))

    assert len(run.of("Evicted")) == 1
    assert (run.held("a", LONG_RUN), run.held("b", LONG_RUN)) in {(6.0, 3.0), (3.0, 6.0)}


# -- the queue tree (test_quota) ------------------------------------------------------------


@pytest.mark.parametrize("team_cap", [None, 24], ids=["uncapped-parent", "parent-at-capability"])
def test_a_child_queue_reclaims_its_deserved_share_from_its_sibling(team_cap: int | None) -> None:
    queues = sibling_tree(team_cap)
    jobs = [
        *_jobs("nlp", 8, gpus=4, start=0),
        *_jobs("cv", 4, gpus=4, start=10),
        *_jobs("ops", 4, gpus=4, start=20),
    ]

    run = _simulate(make_nodes(4), queues, RECLAIM, jobs, options=replace(OPTIONS, until=100))

    assert run.held("nlp", 9) == (team_cap or 32)  # nlp borrowed its sibling's share and more
    assert run.held("cv", 19) == 8  # its deserved share, taken back from its sibling
    assert {q: run.held(q, 100) for q in ("nlp", "cv", "ops")} == {"nlp": 8, "cv": 8, "ops": 16}
    assert all(r["job"].startswith("nlp") for r in run.of("Evicted"))
    assert max(run.evicted_tasks().values()) == 1


def test_reclaim_never_takes_a_queue_below_its_guarantee_at_any_instant() -> None:
    queues = [
        make_queue("keep", deserved=res(gpu=4), guarantee=res(gpu=12)),
        make_queue("x", deserved=res(gpu=10)),
        make_queue("y", deserved=res(gpu=10)),
    ]
    jobs = [
        *_jobs("keep", 16, gpus=2, start=0),
        *_jobs("x", 8, gpus=2, start=20),
        *_jobs("y", 8, gpus=2, start=30),
    ]

    run = _simulate(make_nodes(4), queues, RECLAIM, jobs, options=replace(OPTIONS, until=200))

    assert run.held("keep", 19) == 32
    keep = [gpus.get("keep", 0.0) for _, gpus in run.timeline]
    reached = next(i for i, gpus in enumerate(keep) if gpus >= 12)
    assert min(keep[reached:]) == 12  # reclaimed down to its guarantee, never below it
    assert len(run.of("Evicted")) == 10  # x and y took back 10 GPUs each
    assert {q: run.held(q, 200) for q in ("keep", "x", "y")} == {"keep": 12, "x": 10, "y": 10}


def test_capabilities_hold_at_every_instant_parent_caps_included() -> None:
    queues = [
        make_queue("team", capability=res(gpu=12)),
        make_queue("nlp", parent="team", capability=res(gpu=8)),
        make_queue("cv", parent="team"),
        make_queue("ops"),
    ]
    jobs = [
        _run_for(make_job(f"nlp-burst{i}", queue="nlp", gpus=2, walltime=35, phase=PENDING), 35)
        for i in range(6)
    ]
    for k in range(10):  # a wave of every queue's work every ten seconds; walltime = run time
        t = 10.0 * k
        jobs += [
            _run_for(
                make_job(f"nlp{k}", queue="nlp", gpus=2, walltime=35, created=t, phase=PENDING), 35
            ),
            _run_for(
                make_job(
                    f"cv{k}", queue="cv", gpus=2, replicas=2, walltime=25, created=t, phase=PENDING
                ),
                25,
            ),
            _run_for(
                make_job(f"ops{k}", queue="ops", gpus=1, walltime=15, created=t, phase=PENDING), 15
            ),
        ]

    run = _simulate(make_nodes(4), queues, CAPACITY_ALL, jobs)  # 32 GPUs

    nlp = [gpus.get("nlp", 0.0) for _, gpus in run.timeline]
    team = [gpus.get("nlp", 0.0) + gpus.get("cv", 0.0) for _, gpus in run.timeline]
    assert max(nlp) == 8 and max(team) == 12  # the caps bound, and held at every instant
    summary = run.metrics.summary(sim_wall_s=0.0)
    assert summary["finished"] == summary["jobs"] == 36


# -- backfill (test_backfill) ----------------------------------------------------------------
#
# The World scenario's 8 nodes and 64-GPU gang, scaled to 2 nodes and a 16-GPU gang so
# the run stays short: 16 1-GPU jobs busy until t=100, 110, ..., 250, the
# gang (starving after 30 s) and a stream of two 1-GPU jobs every 10 s until t=600, one
# declaring a 50 s walltime and one without a walltime that runs 200 s.

NODES = 2
STREAM_END = 600.0


def _busy_cluster_a_big_gang_and_a_stream() -> list[WorkloadJob]:
    jobs = [
        _run_for(
            make_job(f"old{k:02d}", gpus=1, walltime=100.0 + 10 * k, phase=PENDING), 100 + 10 * k
        )
        for k in range(8 * NODES)
    ]
    jobs.append(
        _run_for(
            make_job("big", gpus=8, replicas=NODES, starvation=30, created=1, phase=PENDING), 100
        )
    )
    for n in range(1, int(STREAM_END // 10) + 1):
        t = 10.0 * n
        jobs += [
            _run_for(make_job(f"short{n:03d}", gpus=1, walltime=50, created=t, phase=PENDING), 50),
            _run_for(make_job(f"long{n:03d}", gpus=1, created=t, phase=PENDING), 200),
        ]
    return jobs


def test_a_starving_gang_is_reserved_and_starts_on_time_despite_a_stream_of_1_gpu_jobs() -> None:
    run = _simulate(
        make_nodes(NODES),
        [make_queue()],
        WITH_BACKFILL,
        _busy_cluster_a_big_gang_and_a_stream(),
        options=replace(OPTIONS, until=400),
    )

    reservations = run.of("Reserved", "big")
    assert reservations, "the starving gang never got a reservation"
    first = reservations[0]
    assert 31 <= first["t"] <= 31 + 2 * 10  # once starving (admitted, then reserved)
    assert first["start"] == 250.0  # the last of the old jobs ends then
    assert first["nodes"] == ["n0", "n1"]
    assert run.starts("big") == [250.0]
    assert [len(r["tasks"]) for r in run.of("Placed", "big")] == [NODES]
    assert run.metrics.jobs["big"].queue_delay == 249.0
    # the stream kept flowing: short jobs ran in the reserved room before the gang started
    window = [r for r in run.of("Placed") if first["t"] <= r["t"] < 250.0]
    assert len({r["job"] for r in window if r["job"].startswith("short")}) >= 5
    # jobs without a walltime could not use the reserved room
    assert not any(r["job"].startswith("long") for r in window)


def test_without_backfill_the_same_gang_waits_for_as_long_as_the_stream_flows() -> None:
    run = _simulate(
        make_nodes(NODES),
        [make_queue()],
        WITHOUT_BACKFILL,
        _busy_cluster_a_big_gang_and_a_stream(),
        options=replace(OPTIONS, until=STREAM_END),
    )

    assert run.of("Reserved") == []
    assert run.starts("big") == []  # still waiting when the stream stops (with backfill: t=250)
    late = [r["job"] for r in run.of("Placed") if r["t"] > 250]
    assert len(late) > 20  # the GPUs did free up: 1-GPU jobs took every one of them


# -- two simulator bugs these scenarios found (both fixed) -----------------------------------


def test_a_job_waiting_behind_a_fifty_day_job_does_not_crash_the_simulation() -> None:
    # default options: sessions back off to one an hour; 1024 of them take about 43 days
    jobs = [
        _run_for(make_job("hog", gpus=8), duration=50 * 86400.0),
        _run_for(make_job("waiter", gpus=8, created=1), duration=10),
    ]

    run = _simulate(make_nodes(1), [make_queue()], GANG, jobs, options=SimOptions())

    # hog starts 1 s after its arrival (trigger delay), waiter 1 s after hog ends
    assert run.starts("waiter") == [50 * 86400.0 + 2.0]


def test_while_nothing_happens_sessions_come_no_more_often_than_once_a_period() -> None:
    # one node busy until t=1000; four jobs arrive at t=1..7.5 and wait; nothing else happens
    jobs = [
        _run_for(make_job("hog", gpus=8), duration=1000),
        *(
            _run_for(make_job(f"waiter{i}", gpus=8, created=1 + 2.5 * i), duration=10)
            for i in range(4)
        ),
    ]
    options = replace(OPTIONS, period=10.0, max_period=10.0, until=500)

    run = _simulate(make_nodes(1), [make_queue()], GANG, jobs, options=options)

    # sessions at t=0 and at each arrival, then one every 10 s until t=500: about 55
    assert len(run.metrics.session_seconds) <= 5 + 500 / 10 + 1
