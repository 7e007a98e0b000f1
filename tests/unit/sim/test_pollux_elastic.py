"""One of Pollux's workloads end to end with elastic jobs (needs the public traces)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from phalanx.engine.decisions import Decisions
from phalanx.policies import load_policy
from phalanx.sim.clusters import load_cluster
from phalanx.sim.runner import SimOptions, Simulation
from phalanx.sim.traces.pollux import load_pollux
from phalanx.sim.workload import Workload

WORKLOAD = "philly-jobs-pollux/workloads/workload-6.csv"


def _run(traces_dir: Path, policy: str) -> tuple[Simulation, list[Decisions]]:
    workload = load_pollux(traces_dir / WORKLOAD, limit=40)
    sim = Simulation(
        load_cluster("pollux"),
        workload,
        load_policy(policy).config,
        options=SimOptions(fixed_period=True),
        on_session=lambda _now, decisions: seen.append(decisions),
    )
    seen: list[Decisions] = []
    sim.run()
    return sim, seen


def _pollux_run(workload: Workload, on_session: Callable[[float, Decisions], None]) -> Simulation:
    """``workload`` under the ``pollux`` policy at Pollux's fixed 60 s periods, not yet run."""
    return Simulation(
        load_cluster("pollux"),
        workload,
        load_policy("pollux").config,
        options=SimOptions(fixed_period=True),
        on_session=on_session,
    )


@pytest.mark.traces
def test_pollux_jobs_are_resized_report_their_progress_and_all_finish(traces_dir: Path) -> None:
    sim, seen = _run(traces_dir, "pollux")
    records = list(sim.metrics.jobs.values())
    assert len(records) == 40 and all(r.outcome == "finished" for r in records)
    assert sum(len(d.resized) for d in seen) > 40  # jobs grow and shrink, not once each
    reported = [run.elastic for run in sim.cluster._runs.values() if run.elastic is not None]
    assert len(reported) == 40 and all(r.completed_at is not None for r in reported)
    # every job ends when its training is done: at its completion, to the second
    for record in records:
        run = sim.cluster._runs[record.name].elastic
        assert run is not None and record.end == pytest.approx(run.completed_at)


@pytest.mark.traces
def test_fixed_size_policies_run_the_same_jobs_at_their_row_size(traces_dir: Path) -> None:
    sim, seen = _run(traces_dir, "tiresias-las")
    assert not sim.elastic and not any(d.resized for d in seen)
    assert all(run.elastic is None for run in sim.cluster._runs.values())
    assert all(r.outcome == "finished" for r in sim.metrics.jobs.values())


@pytest.mark.traces
def test_every_session_knows_the_step_time_of_each_running_configuration(
    traces_dir: Path,
) -> None:
    """As Pollux's agents report every interval: once a job has trained on its current
    placement, the next session sees that step time (not only after the epoch ends)."""
    workload = load_pollux(traces_dir / WORKLOAD, limit=20)
    behind: list[tuple[float, str]] = []
    checked = 0

    def check(now: float, _decisions: Decisions) -> None:
        nonlocal checked
        for name, run in sim.cluster._runs.items():
            tracker = run.elastic
            if tracker is None or not tracker.placement or tracker.completed_at is not None:
                continue
            if name not in sim.state.snapshot.elastic or tracker.resumes >= now:
                continue
            progress = sim.state.snapshot.elastic[name].spec.progress
            assert progress is not None
            shapes = {(t.nodes, t.replicas) for t in progress.timings}
            checked += 1
            if (len(tracker.placement), sum(tracker.placement)) not in shapes:
                behind.append((now, name))

    sim = _pollux_run(workload, check)
    sim.run()
    assert checked > 100 and not behind


@pytest.mark.traces
def test_a_grown_jobs_new_replicas_are_placed_at_the_instant_it_grows(traces_dir: Path) -> None:
    """Pollux applies a new allocation at once; sessions come only every 60 s here, so
    the session that grows a job is followed at the same instant by one that places the
    new replicas (they used to wait idle for the next period)."""
    workload = load_pollux(traces_dir / WORKLOAD, limit=20)
    resized_at: dict[str, float] = {}
    late: list[tuple[float, str]] = []
    grown = 0

    def check(now: float, decisions: Decisions) -> None:
        nonlocal grown
        for bind in decisions.binds:
            if bind.job in resized_at:
                grown += 1
                if resized_at[bind.job] != now:
                    late.append((now, bind.task))
        for resize in decisions.resized:
            resized_at[resize.job] = now

    sim = _pollux_run(workload, check)
    sim.run()
    assert grown > 20 and not late
