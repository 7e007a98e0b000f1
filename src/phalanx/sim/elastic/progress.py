"""Training progress of a job, as Pollux's simulator advances it (``Job.step``).

Progress counts samples at the profile's smallest batch size. Epoch ``e`` ends at
``profile.progress[e]``; the job completes when its last epoch ends. Training at batch
``B`` during epoch ``e`` makes ``gain(B, e) / iteration seconds`` progress per second,
where the gain comes from that epoch's gradient statistics at ``B`` (linear between the
two nearest profiled batch sizes). Pollux rounds each epoch's end to a whole second;
this does not.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from phalanx.engine.goodput import GradParams, gain
from phalanx.sim.elastic.batch import BatchConfig, fixed_batch
from phalanx.sim.elastic.profile import AppProfile
from phalanx.sim.elastic.throughput import iteration_seconds


def grad_params(profile: AppProfile, batch: float, epoch: int) -> GradParams | None:
    """The gradient statistics during ``epoch`` at ``batch`` (what the job reports to
    its goodput model); None outside the profiled batch sizes or epochs."""
    curves = grad_curves(profile, batch)
    if curves is None or not 0 <= epoch < profile.epochs:
        return None
    sqr, var = curves
    return GradParams(sqr=float(sqr[epoch]), var=float(var[epoch]))


def grad_curves(
    profile: AppProfile, batch: float
) -> tuple[NDArray[np.float64], NDArray[np.float64]] | None:
    """Per epoch, the gradient's squared norm and variance at ``batch``; None outside the
    profiled batch sizes."""
    sizes = list(profile.grads)
    if not sizes[0] <= batch <= sizes[-1]:
        return None
    upper = next(size for size in sizes if size >= batch)
    lower = max(size for size in sizes if size <= batch)
    low, high = profile.grads[lower], profile.grads[upper]
    if lower == upper:
        return low.sqr, low.var
    share = (batch - lower) / (upper - lower)
    return (1 - share) * low.sqr + share * high.sqr, (1 - share) * low.var + share * high.var


def gains(profile: AppProfile, batch: float) -> NDArray[np.float64] | None:
    """Per epoch, the statistical gain of training at ``batch`` over the smallest profiled
    batch; None outside the profiled batch sizes."""
    curves = grad_curves(profile, batch)
    if curves is None:
        return None
    sqr, var = curves
    grads = [GradParams(sqr=float(s), var=float(v)) for s, v in zip(sqr, var, strict=True)]
    return np.array([float(gain(g, batch, profile.init_batch)) for g in grads])


@dataclass(frozen=True, slots=True, kw_only=True)
class JobProgress:
    """Where a job is: ``progress`` (samples at the smallest batch) in ``epoch``
    (``profile.epochs`` once complete)."""

    progress: float = 0.0
    epoch: int = 0

    def complete(self, profile: AppProfile) -> bool:
        """Whether the job has trained its last epoch."""
        return self.epoch >= profile.epochs


@dataclass(frozen=True, slots=True, kw_only=True)
class Advance:
    """The outcome of ``advance``: the new position and the seconds spent reaching it."""

    state: JobProgress
    seconds: float


def progress_rate(
    profile: AppProfile, placement: Sequence[int], config: BatchConfig, epoch: int
) -> float | None:
    """Progress per second of ``config`` on ``placement`` during ``epoch`` (shapes the
    profile does not measure are interpolated); None when the profile cannot say."""
    seconds = iteration_seconds(
        profile, placement, config.atomic, config.accumulation, interpolate=True
    )
    gain_now = grad_params(profile, config.batch, epoch)
    if seconds is None or gain_now is None or config.atomic < 1:
        return None
    return float(gain(gain_now, config.batch, profile.init_batch)) / seconds


def advance(
    profile: AppProfile,
    state: JobProgress,
    placement: Sequence[int],
    config: BatchConfig,
    seconds: float,
) -> Advance | None:
    """Train for up to ``seconds`` on ``placement`` at ``config``, stopping early at the
    end of the current epoch (where Pollux's job re-chooses its batch). None when the
    profile does not cover the configuration; a complete job does not move."""
    if state.complete(profile) or seconds <= 0:
        return Advance(state=state, seconds=0.0)
    rate = progress_rate(profile, placement, config, state.epoch)
    if rate is None:
        return None
    end = float(profile.progress[state.epoch])
    needed = (end - state.progress) / rate
    if needed > seconds:
        return Advance(
            state=JobProgress(progress=state.progress + rate * seconds, epoch=state.epoch),
            seconds=seconds,
        )
    return Advance(state=JobProgress(progress=end, epoch=state.epoch + 1), seconds=needed)


def fixed_seconds(
    profile: AppProfile, placement: Sequence[int], batch: int, *, interpolate: bool = False
) -> float | None:
    """Seconds to train a whole job of ``profile`` alone on ``placement`` (GPUs per node)
    at the fixed total ``batch`` (split by ``fixed_batch`` on that placement: Pollux's
    split, Sia's on Sia's per-type curves); None when the profile does not cover that
    configuration (with ``interpolate``: cannot bracket it)."""
    config = fixed_batch(profile, sum(placement), batch, placement=placement)
    seconds = None
    if config.atomic >= 1:
        seconds = iteration_seconds(
            profile, placement, config.atomic, config.accumulation, interpolate=interpolate
        )
    gain = gains(profile, config.batch)
    if seconds is None or gain is None:
        return None
    per_epoch = np.diff(profile.progress, prepend=0.0)
    return float(np.sum(per_epoch * seconds / gain))
