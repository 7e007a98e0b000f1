"""las: Tiresias' discretized two-dimensional least-attained-service (2D-LAS).

A job's attained service is the GPU-seconds it has run (all attempts): what ended runs
banked plus each running task's GPUs times the time since it started, at session time.
Jobs fall into priority levels by thresholds (``thresholds``, GPU-seconds, ascending;
default one threshold at 3,200 GPU-s, i.e. two levels); lower levels go first, first
come first served within a level. A job may preempt only work in a strictly higher level, so a
new job takes GPUs from jobs that already had many, never the other way round. With
``preemptWithinLevel: true`` (as Pollux's simulator runs Tiresias: every interval it
fills the GPUs in queue order) a job may also preempt later-submitted jobs of its own
level, the latest first.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from phalanx.domain.errors import PluginError
from phalanx.engine.framework.plugin import Plugin
from phalanx.engine.framework.session import Session
from phalanx.engine.snapshot import JobInfo, TaskInfo


class _Levels:
    """Jobs' levels and ranks at one session's time, each computed on first use and kept
    for the session (a job's attained service is read at the session's ``now``, which no
    placement inside the session changes): judging a preemptor's candidates then costs a
    lookup per candidate."""

    def __init__(self, plugin: LasPlugin, now: float) -> None:
        self.plugin = plugin
        self.now = now
        self.levels: dict[str, int] = {}
        self.ranks: dict[str, tuple[int, float, str]] = {}

    def level(self, job: JobInfo) -> int:
        """The job's level at the session's time."""
        found = self.levels.get(job.name)
        if found is None:
            found = self.levels[job.name] = self.plugin.level(job, self.now)
        return found

    def rank(self, job: JobInfo) -> tuple[int, float, str]:
        """Queue order: level, then submission (first come first served)."""
        found = self.ranks.get(job.name)
        if found is None:
            found = self.ranks[job.name] = (self.level(job), job.creation_time, job.name)
        return found


class LasPlugin(Plugin[_Levels]):
    """Discretized 2D-LAS job order and preemption."""

    name = "las"
    judges_each = True
    accepted_args = frozenset({"thresholds", "preemptWithinLevel"})

    def __init__(self, args: Mapping[str, Any] | None = None) -> None:
        super().__init__(args)
        raw = self.args.get("thresholds", [3200.0])
        if not isinstance(raw, list) or not all(
            isinstance(x, int | float) and not isinstance(x, bool) and x > 0 for x in raw
        ):
            raise PluginError("plugin 'las': thresholds must be a list of positive GPU-seconds")
        self.thresholds = sorted(float(x) for x in raw)
        within = self.args.get("preemptWithinLevel", False)
        if not isinstance(within, bool):
            raise PluginError("plugin 'las': preemptWithinLevel must be true or false")
        self.within_level = within

    def level(self, job: JobInfo, now: float) -> int:
        """0 for the least served jobs, up to len(thresholds)."""
        return bisect.bisect_right(self.thresholds, job.service(now))

    def open(self, session: Session) -> _Levels:
        return _Levels(self, session.now)

    def job_order(self, state: _Levels, job: JobInfo) -> int | tuple[int, float, str]:
        """Level (and, with ``preemptWithinLevel``, then submission)."""
        return state.rank(job) if self.within_level else state.level(job)

    def victim_order(self, state: _Levels, task: TaskInfo) -> int | tuple[int, float]:
        """Highest level first (then the latest submitted, with ``preemptWithinLevel``)."""
        if self.within_level:
            return (-state.level(task.job), -task.job.creation_time)
        return -state.level(task.job)

    def preemptable(
        self, state: _Levels, preemptor: TaskInfo, candidates: Sequence[TaskInfo]
    ) -> list[TaskInfo]:
        """Work in a strictly higher level (or later in the queue order, with
        ``preemptWithinLevel``)."""
        if self.within_level:
            mine = state.rank(preemptor.job)
            ranks, rank = state.ranks, state.rank
            return [
                task for task in candidates if (ranks.get(task.job.name) or rank(task.job)) > mine
            ]
        least = state.level(preemptor.job)
        levels, level = state.levels, state.level
        return [task for task in candidates if _known(levels, task.job, level) > least]


def _known(levels: dict[str, int], job: JobInfo, level: Callable[[JobInfo], int]) -> int:
    """``job``'s level from the session's cache (``level`` computes one not yet known)."""
    found = levels.get(job.name)
    return level(job) if found is None else found
