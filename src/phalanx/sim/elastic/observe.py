"""What an elastic job reports to its scheduler, as Pollux's agent does
(``Job.update_params``): the step times of each distinct configuration it has run (per
GPU type: ``AppProfile.gpu_model``, "" for untyped curves), for fitting its throughput
model, and its current gradient statistics."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from phalanx.engine.goodput import PerfObservations
from phalanx.sim.elastic.profile import AppProfile
from phalanx.sim.elastic.throughput import normalise, step_times

#: (GPU model, nodes, replicas, atomic batch) -> (step seconds, sync seconds)
Key = tuple[str, int, int, int]


@dataclass(frozen=True, slots=True, kw_only=True)
class StepLog:
    """The step times a job has measured, one entry per (GPU model, nodes, replicas,
    atomic batch), the first measurement kept (Pollux's agent ignores repeats)."""

    rows: tuple[tuple[Key, tuple[float, float]], ...] = ()

    def record(self, profile: AppProfile, placement: Sequence[int], atomic: int) -> StepLog:
        """The log with the true step times of ``atomic`` on ``placement`` by
        ``profile``'s curves added (itself when that configuration is known or the
        profile cannot say)."""
        shape = normalise(placement)
        key = (profile.gpu_model, len(shape), sum(shape), atomic)
        if any(k == key for k, _ in self.rows):
            return self
        times = step_times(profile, placement, atomic, interpolate=True)
        if times is None:
            return self
        return StepLog(rows=(*self.rows, (key, times)))

    def observations(self, gpu_model: str) -> PerfObservations | None:
        """The rows measured on ``gpu_model`` as fitting input (compute step = step -
        sync; synchronising step = step), or None while there are none."""
        rows = [(k, times) for k, times in self.rows if k[0] == gpu_model]
        if not rows:
            return None
        return PerfObservations.of(
            nodes=[k[1] for k, _ in rows],
            replicas=[k[2] for k, _ in rows],
            atomic_bsz=[k[3] for k, _ in rows],
            accum_time=[step - sync for _, (step, sync) in rows],
            sync_time=[step for _, (step, _sync) in rows],
        )
