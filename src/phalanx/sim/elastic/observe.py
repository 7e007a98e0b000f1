"""What an elastic job reports to its scheduler, as Pollux's agent does
(``Job.update_params``): the step times of each distinct configuration it has run, for
fitting its throughput model, and its current gradient statistics."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from phalanx.engine.goodput import PerfObservations
from phalanx.sim.elastic.profile import AppProfile
from phalanx.sim.elastic.throughput import normalise, step_times

#: (nodes, replicas, atomic batch) -> (step seconds, sync seconds)
Key = tuple[int, int, int]


@dataclass(frozen=True, slots=True, kw_only=True)
class StepLog:
    """The step times a job has measured, one entry per (nodes, replicas, atomic batch),
    the first measurement kept (Pollux's agent ignores repeats)."""

    rows: tuple[tuple[Key, tuple[float, float]], ...] = ()

    def record(self, profile: AppProfile, placement: Sequence[int], atomic: int) -> StepLog:
        """The log with the true step times of ``atomic`` on ``placement`` added (itself
        when that configuration is known or the profile cannot say)."""
        shape = normalise(placement)
        key = (len(shape), sum(shape), atomic)
        if any(k == key for k, _ in self.rows):
            return self
        times = step_times(profile, placement, atomic, interpolate=True)
        if times is None:
            return self
        return StepLog(rows=(*self.rows, (key, times)))

    def observations(self) -> PerfObservations | None:
        """The log as fitting input (compute step = step - sync; synchronising step =
        step), or None while empty."""
        if not self.rows:
            return None
        return PerfObservations.of(
            nodes=[k[0] for k, _ in self.rows],
            replicas=[k[1] for k, _ in self.rows],
            atomic_bsz=[k[2] for k, _ in self.rows],
            accum_time=[step - sync for _, (step, sync) in self.rows],
            sync_time=[step for _, (step, _sync) in self.rows],
        )
