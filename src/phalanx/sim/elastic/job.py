"""One elastic job as Pollux's simulator advances it (``Job.reallocate``, ``Job.step``),
as an immutable value: each transition returns a new ``ElasticJob``.

Per stretch of training the job (1) records the true step times of its configuration
in its ``StepLog`` and, when the log grew, refits its throughput model; (2) reads the
gradient statistics of its batch in the current epoch; (3) trains until the time is up
or the epoch ends; (4) re-chooses its batch configuration: fixed at its row's batch
size, or the goodput model's best (``batch_size=None``). The restart delay after a
placement change (Pollux's 30 s) is the simulator's business, not this value's.

``known``: a throughput model given instead of learnt (the simulator passes the fit of
the application's whole profile, ``profile_fit``): the job takes it as its model once
it has run, rather than refitting its log at every new configuration (a fit costs
about 0.3 s; Pollux's jobs refit as they go, and converge towards this one).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from phalanx.engine.goodput import GoodputModel, PerfObservations, PerfParams, fit_perf_params
from phalanx.sim.elastic.batch import BatchConfig, adaptive_batch, fixed_batch
from phalanx.sim.elastic.observe import StepLog
from phalanx.sim.elastic.profile import AppProfile
from phalanx.sim.elastic.progress import JobProgress, advance, grad_params
from phalanx.sim.elastic.throughput import normalise


@dataclass(frozen=True, slots=True, kw_only=True)
class ElasticJob:
    """A job of one application: where it is, on what, at which batch, what it measured.

    ``batch_size`` None means adaptive. ``trained`` counts seconds spent training (on
    any placement); ``perf`` is the throughput model fitted to ``log`` (None until the
    job has run)."""

    batch_size: int | None = None
    placement: tuple[int, ...] = ()
    config: BatchConfig | None = None
    position: JobProgress = field(default_factory=JobProgress)
    log: StepLog = field(default_factory=StepLog)
    perf: PerfParams | None = None
    trained: float = 0.0
    known: PerfParams | None = None

    def complete(self, profile: AppProfile) -> bool:
        """Whether the job has trained its last epoch."""
        return self.position.complete(profile)

    def model(self, profile: AppProfile) -> GoodputModel | None:
        """The job's goodput model now: its fitted throughput and the gradient statistics
        of its current batch and epoch (None before it has run, or once complete)."""
        if self.perf is None or self.config is None:
            return None
        grad = grad_params(profile, self.config.batch, self.position.epoch)
        if grad is None:
            return None
        return GoodputModel(perf=self.perf, grad=grad, init_batch_size=profile.init_batch)

    def retyped(self, known: PerfParams | None) -> ElasticJob:
        """The job about to train on curves of another GPU type, whose throughput model is
        ``known`` (a job that had taken its model as given takes this one; one that fits
        its own log keeps its fit). Its log keeps what it measured on any type."""
        perf = known if known is not None and self.perf is not None else self.perf
        return replace(self, known=known, perf=perf)

    def placed(self, profile: AppProfile, placement: tuple[int, ...]) -> ElasticJob:
        """The job moved to ``placement`` (GPUs per node; empty: suspended), its batch
        re-chosen for it."""
        shape = normalise(placement)
        if not shape:
            return replace(self, placement=(), config=None)
        moved = replace(self, placement=shape)
        return replace(moved, config=moved.choose(profile))

    def choose(self, profile: AppProfile) -> BatchConfig:
        """The batch configuration for the current placement (``Job.update_local_bsz``)."""
        replicas = sum(self.placement)
        if self.batch_size is not None:
            return fixed_batch(profile, replicas, self.batch_size, placement=self.placement)
        return adaptive_batch(profile, len(self.placement), replicas, self.model(profile))

    def run(self, profile: AppProfile, seconds: float) -> ElasticJob:
        """The job after training ``seconds`` on its placement (unchanged when suspended
        or complete). Raises ValueError when the profile does not cover its
        configuration."""
        job = self
        while seconds > 0 and job.config is not None and not job.complete(profile):
            config = job.config
            log = job.log.record(profile, job.placement, config.atomic)
            perf = job.perf
            if log is not job.log and job.known is not None:
                perf = job.known
            elif log is not job.log:
                observations = log.observations(profile.gpu_model)
                perf = fit_perf_params(observations) if observations is not None else perf
            moved = advance(profile, job.position, job.placement, config, seconds)
            if moved is None:
                raise ValueError(
                    f"{profile.name}: the profile does not cover {config} on {job.placement}"
                )
            seconds -= moved.seconds
            job = replace(
                job, log=log, perf=perf, position=moved.state, trained=job.trained + moved.seconds
            )
            if not job.complete(profile):
                job = replace(job, config=job.choose(profile))
        return job


def profile_fit(profile: AppProfile) -> PerfParams:
    """The throughput model fitted to every step ``profile`` measured (each placement of
    ``placements.csv`` at each local batch), as a job's fit would be had it run them all."""
    rows = [
        (len(str(placement)), sum(int(d) for d in str(placement)), int(b), float(t), float(y))
        for placement, (local, step, sync) in sorted(profile.placements.items())
        for b, t, y in zip(local, step, sync, strict=True)
        if t > y > 0
    ]
    return fit_perf_params(
        PerfObservations.of(
            nodes=[r[0] for r in rows],
            replicas=[r[1] for r in rows],
            atomic_bsz=[r[2] for r in rows],
            accum_time=[r[3] - r[4] for r in rows],
            sync_time=[r[3] for r in rows],
        )
    )
