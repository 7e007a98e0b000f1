"""What a running training job says of itself: its progress, throughput and gradients.

A job reports it (the control plane reads the file ``PHALANX_PROGRESS_FILE`` names;
the simulator derives it from the measured profiles) and the engine reads the latest
report through the snapshot (``Job.progress``): a goodput-aware policy learns from it
how much faster each job would go on more GPUs, as Pollux's agents report to Pollux.
Every field is optional but ``time``: a job reports what it knows.
"""

from __future__ import annotations

from dataclasses import dataclass

from phalanx.domain.errors import InvalidInput


@dataclass(frozen=True, slots=True, kw_only=True)
class StepTiming:
    """One measured configuration: ``replicas`` over ``nodes``, each replica taking
    ``local_batch`` samples per micro-step and ``accumulation`` micro-steps per optimizer
    step; an optimizer step took ``step_seconds``, of which ``sync_seconds`` went to the
    gradient all-reduce (None: not measured apart), on GPUs of type ``gpu_model`` (a
    node's ``phalanx.io/gpu-model``; None: not said, as on a cluster of one type)."""

    nodes: int
    replicas: int
    local_batch: int
    step_seconds: float
    accumulation: int = 1
    sync_seconds: float | None = None
    gpu_model: str | None = None

    def __post_init__(self) -> None:
        if min(self.nodes, self.replicas, self.local_batch, self.accumulation) < 1:
            raise InvalidInput(
                "nodes, replicas, localBatch and accumulation must be 1 or more",
                field="timings",
                fix="report the configuration the step ran in",
            )
        if not self.step_seconds > 0 or (self.sync_seconds or 0.0) < 0:
            raise InvalidInput(
                f"a step of {self.step_seconds} s (sync {self.sync_seconds})",
                field="timings.stepSeconds",
                fix="report a positive step time and a sync time of 0 or more",
            )


@dataclass(frozen=True, slots=True, kw_only=True)
class Progress:
    """A job's latest report, made at ``time`` (seconds, the clock of its driver).

    ``step`` counts optimizer steps so far and ``samples`` training samples, of
    ``total_samples`` it will have processed when it is done (its target: what is left
    tells a policy which jobs are near their end);
    ``samples_per_second`` is its throughput now; ``batch_size`` its global batch;
    ``grad_sqr`` and ``grad_var`` the squared norm of the mean gradient and the
    variance of the per-sample gradients (Pollux's gradient statistics, from which
    statistical efficiency follows), measured at ``batch_size``; ``timings`` the step
    times it measured in the configurations it ran in (newest last). A job whose batch
    size may adapt says within what, as Pollux's agent does: ``init_batch_size`` (the
    batch its gradient statistics and progress are counted at), ``max_batch_size``,
    and ``local_batch_bounds`` (least, most samples per replica and micro-step).
    """

    time: float
    step: int | None = None
    samples: float | None = None
    total_samples: float | None = None
    samples_per_second: float | None = None
    batch_size: int | None = None
    grad_sqr: float | None = None
    grad_var: float | None = None
    timings: tuple[StepTiming, ...] = ()
    init_batch_size: int | None = None
    max_batch_size: int | None = None
    local_batch_bounds: tuple[int, int] | None = None
