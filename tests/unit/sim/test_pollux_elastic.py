"""One of Pollux's workloads end to end with elastic jobs (needs the public traces).

The pollux-policy checks share one run (``pollux_run``): the simulation is the costly
part (goodput fits every session) and the checks only watch it, so each reads the same
run instead of replaying the workload once per test.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from phalanx.engine.decisions import Decisions
from phalanx.policies import load_policy
from phalanx.sim.clusters import load_cluster
from phalanx.sim.runner import SimOptions, Simulation
from phalanx.sim.traces.pollux import load_pollux

WORKLOAD = "philly-jobs-pollux/workloads/workload-6.csv"
#: The workload's first jobs that the pollux-policy run takes.
JOBS = 20

# (one worker of pytest-xdist runs the whole module, so the shared run is made once:
# tests/conftest.py's GROUPS)
pytestmark = pytest.mark.traces


def _simulation(
    traces_dir: Path, policy: str, jobs: int, on_session: Callable[[float, Decisions], None]
) -> Simulation:
    """The first ``jobs`` jobs of ``WORKLOAD`` under ``policy`` at Pollux's fixed 60 s
    periods, not yet run."""
    return Simulation(
        load_cluster("pollux"),
        load_pollux(traces_dir / WORKLOAD, limit=jobs),
        load_policy(policy).config,
        options=SimOptions(fixed_period=True),
        on_session=on_session,
    )


@dataclass
class Watched:
    """What the checks saw of one run, session by session (they only read it)."""

    sim: Simulation = field(init=False)
    seen: list[Decisions] = field(default_factory=list)
    # the step times each session knows (test_every_session_knows_...)
    checked: int = 0
    behind: list[tuple[float, str]] = field(default_factory=list)
    # the replicas of grown jobs (test_a_grown_jobs_new_replicas_...)
    resized_at: dict[str, float] = field(default_factory=dict)
    grown: int = 0
    late: list[tuple[float, str]] = field(default_factory=list)

    def session(self, now: float, decisions: Decisions) -> None:
        self.seen.append(decisions)
        self._step_times_known(now)
        self._grown_replicas_placed(now, decisions)

    def _step_times_known(self, now: float) -> None:
        sim = self.sim
        for name, run in sim.cluster._runs.items():
            tracker = run.elastic
            if tracker is None or not tracker.placement or tracker.completed_at is not None:
                continue
            if name not in sim.state.snapshot.elastic or tracker.resumes >= now:
                continue
            progress = sim.state.snapshot.elastic[name].spec.progress
            assert progress is not None
            shapes = {(t.nodes, t.replicas) for t in progress.timings}
            self.checked += 1
            if (len(tracker.placement), sum(tracker.placement)) not in shapes:
                self.behind.append((now, name))

    def _grown_replicas_placed(self, now: float, decisions: Decisions) -> None:
        for bind in decisions.binds:
            if bind.job in self.resized_at:
                self.grown += 1
                if self.resized_at[bind.job] != now:
                    self.late.append((now, bind.task))
        for resize in decisions.resized:
            self.resized_at[resize.job] = now


def _watched_run(traces_dir: Path, policy: str, jobs: int) -> Watched:
    watched = Watched()
    watched.sim = _simulation(traces_dir, policy, jobs, watched.session)
    watched.sim.run()
    return watched


@pytest.fixture(scope="module")
def pollux_run(traces_dir: Path) -> Watched:
    """The workload under the ``pollux`` policy, run once for this module's checks."""
    return _watched_run(traces_dir, "pollux", JOBS)


def test_pollux_jobs_are_resized_report_their_progress_and_all_finish(
    pollux_run: Watched,
) -> None:
    sim, seen = pollux_run.sim, pollux_run.seen
    records = list(sim.metrics.jobs.values())
    assert len(records) == JOBS and all(r.outcome == "finished" for r in records)
    assert sum(len(d.resized) for d in seen) > JOBS  # jobs grow and shrink, not once each
    reported = [run.elastic for run in sim.cluster._runs.values() if run.elastic is not None]
    assert len(reported) == JOBS and all(r.completed_at is not None for r in reported)
    # every job ends when its training is done: at its completion, to the second
    for record in records:
        run = sim.cluster._runs[record.name].elastic
        assert run is not None and record.end == pytest.approx(run.completed_at)


def test_fixed_size_policies_run_the_same_jobs_at_their_row_size(traces_dir: Path) -> None:
    watched = _watched_run(traces_dir, "tiresias-las", 40)  # cheap: no goodput fits
    sim, seen = watched.sim, watched.seen
    assert not sim.elastic and not any(d.resized for d in seen)
    assert all(run.elastic is None for run in sim.cluster._runs.values())
    assert all(r.outcome == "finished" for r in sim.metrics.jobs.values())


def test_every_session_knows_the_step_time_of_each_running_configuration(
    pollux_run: Watched,
) -> None:
    """As Pollux's agents report every interval: once a job has trained on its current
    placement, the next session sees that step time (not only after the epoch ends)."""
    assert pollux_run.checked > 100 and not pollux_run.behind


def test_a_grown_jobs_new_replicas_are_placed_at_the_instant_it_grows(
    pollux_run: Watched,
) -> None:
    """Pollux applies a new allocation at once; sessions come only every 60 s here, so
    the session that grows a job is followed at the same instant by one that places the
    new replicas (they used to wait idle for the next period)."""
    assert pollux_run.grown > 20 and not pollux_run.late
