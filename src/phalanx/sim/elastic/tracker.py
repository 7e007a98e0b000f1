"""One elastic job's training through a simulated run: ``ElasticRun``.

The simulated cluster tells it where the job's running replicas are (``move``) and
when time has passed (``advance``); it keeps the job's ``ElasticJob`` (Pollux's model)
and says when the job's rate changes next (``next_change``: the end of its current
epoch, where it re-chooses its batch, or its completion) and what the job reports of
itself (``report``). Guarantees, as Pollux's simulator (``Job.reallocate``,
``Job.step``):

- every change of placement (a start, a resume, a growth, a shrink) costs ``delay``
  seconds (Pollux's 30) before training goes on; a job with no replica is suspended
  and keeps its progress exactly (adaptdl checkpoints on every rescale);
- training between changes follows ``ElasticJob.run`` on the placement (GPUs per node)
  and batch configuration it has; the job completes when its last epoch ends, at the
  exact second ``completed_at`` says.

Times are seconds of the simulation clock.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace

from phalanx.domain.progress import Progress, StepTiming
from phalanx.engine.goodput import PerfParams
from phalanx.sim.elastic.job import ElasticJob
from phalanx.sim.elastic.observe import Key, StepLog
from phalanx.sim.elastic.profile import AppProfile
from phalanx.sim.elastic.progress import grad_params, progress_rate
from phalanx.sim.elastic.throughput import iteration_seconds, normalise

#: Seconds added to a predicted epoch end, so that training up to it crosses the end
#: despite rounding (the end itself is recorded exactly).
PAST_END = 1e-6


@dataclass(slots=True, kw_only=True)
class ElasticRun:
    """The training of one job of ``profile`` (mutable: the simulated cluster owns it).

    ``batch_size`` None: the job adapts its batch (Pollux's jobs); else it runs at that
    total batch on any placement."""

    profile: AppProfile
    batch_size: int | None
    delay: float
    known: PerfParams | None = None  # the job's throughput model, given (``ElasticJob``)
    job: ElasticJob = field(init=False)
    at: float = 0.0  # the job is trained up to this time
    resumes: float = 0.0  # training resumes here after the last change of placement
    completed_at: float | None = None

    def __post_init__(self) -> None:
        self.job = ElasticJob(batch_size=self.batch_size, known=self.known)

    @property
    def placement(self) -> tuple[int, ...]:
        """GPUs per node the job runs on now (normalised; empty: suspended)."""
        return self.job.placement

    def move(
        self,
        placement: Sequence[int],
        now: float,
        *,
        profile: AppProfile | None = None,
        known: PerfParams | None = None,
    ) -> bool:
        """The job's replicas are now on ``placement`` (GPUs per node), where it trains by
        ``profile``'s curves (its GPU type's, with ``known`` their throughput model; None:
        the curves it has); True when that is a change (of shape or of curves), which
        restarts the job: it trains again ``delay`` s from now. Progress carries over."""
        self.advance(now)
        shape = normalise(placement)
        retyped = profile is not None and profile is not self.profile
        if (shape == self.job.placement and not retyped) or self.completed_at is not None:
            return False
        if profile is not None and retyped:
            self.profile, self.known = profile, known
            self.job = self.job.retyped(known)
        self.job = self.job.placed(self.profile, shape)
        self.resumes = now + self.delay
        return True

    def seed(self, rows: tuple[tuple[Key, tuple[float, float]], ...]) -> None:
        """Steps measured before the job runs (bootstrapping points) join its log."""
        log = self.job.log
        for key, times in rows:
            if all(k != key for k, _ in log.rows):
                log = StepLog(rows=(*log.rows, (key, times)))
        self.job = replace(self.job, log=log)

    def wait_for(self, ready: float) -> None:
        """Its replicas have their data at ``ready``: training resumes ``delay`` s after
        that at the earliest (a change of placement costs its delay from then)."""
        self.resumes = max(self.resumes, ready + self.delay)

    def advance(self, now: float) -> None:
        """Train up to ``now`` (nothing while suspended, restarting or complete)."""
        start = max(self.at, self.resumes)
        self.at = max(self.at, now)
        if now <= start or self.completed_at is not None or not self.job.placement:
            return
        trained = self.job.trained
        self.job = self.job.run(self.profile, now - start)
        if self.job.complete(self.profile):
            self.completed_at = start + (self.job.trained - trained)

    def next_change(self) -> float | None:
        """When the job's rate changes next with no change of placement: its current
        epoch ends (or it completes). None when suspended or complete."""
        config = self.job.config
        if config is None or self.completed_at is not None or not self.job.placement:
            return None
        position = self.job.position
        rate = progress_rate(self.profile, self.job.placement, config, position.epoch)
        if rate is None or rate <= 0:
            return None
        left = float(self.profile.progress[position.epoch]) - position.progress
        return max(self.at, self.resumes) + max(left, 0.0) / rate + PAST_END

    def report(self, now: float) -> Progress:
        """What the job says of itself at ``now``: the step times it measured (one per
        configuration), its gradient statistics and throughput now, its batch bounds."""
        profile, job = self.profile, self.job
        timings = tuple(
            StepTiming(
                nodes=nodes,
                replicas=replicas,
                local_batch=atomic,
                step_seconds=step,
                sync_seconds=sync,
                gpu_model=model or None,
            )
            for (model, nodes, replicas, atomic), (step, sync) in job.log.rows
        )
        config = job.config
        grad = None if config is None else grad_params(profile, config.batch, job.position.epoch)
        speed = None
        if config is not None and job.placement:
            seconds = iteration_seconds(
                profile, job.placement, config.atomic, config.accumulation, interpolate=True
            )
            speed = None if seconds is None else config.batch / seconds
        return Progress(
            time=now,
            samples=job.position.progress * profile.init_batch,
            total_samples=float(profile.progress[-1]) * profile.init_batch,
            samples_per_second=speed,
            batch_size=None if config is None else config.batch,
            grad_sqr=None if grad is None else grad.sqr,
            grad_var=None if grad is None else grad.var,
            timings=timings,
            init_batch_size=profile.init_batch,
            max_batch_size=profile.max_batch,
            local_batch_bounds=(profile.min_local_batch, profile.max_local_batch),
        )
