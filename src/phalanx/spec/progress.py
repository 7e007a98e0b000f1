"""The progress report a task writes to ``$PHALANX_PROGRESS_FILE``: a JSON object.

``{"step": 1200, "samples": 153600, "totalSamples": 9600000, "samplesPerSecond": 812.5,
"batchSize": 128, "gradSqr": 0.012, "gradVar": 0.87, "timings": [{"nodes": 1,
"replicas": 2, "localBatch": 64, "stepSeconds": 0.157, "syncSeconds": 0.021}]}``: every
field is optional; unknown fields are refused by name (a typo is not silently
dropped). The SDK writes it for you: ``phalanx.client.progress.report``.
"""

from __future__ import annotations

from typing import Annotated, Final

from pydantic import Field

from phalanx.domain.progress import Progress, StepTiming
from phalanx.spec.common import LabelValue, SpecModel

#: The largest report read (bytes); a larger file is refused, not parsed.
MAX_REPORT_BYTES: Final = 64 * 1024
#: Timings kept from one report, newest last.
MAX_TIMINGS: Final = 64

Positive = Annotated[float, Field(gt=0, allow_inf_nan=False)]
NonNegative = Annotated[float, Field(ge=0, allow_inf_nan=False)]
Count = Annotated[int, Field(ge=1, le=1_000_000)]


class TimingSpec(SpecModel):
    """One measured step: the configuration it ran in and how long it took."""

    nodes: Count
    """Nodes the job's replicas ran on."""
    replicas: Count
    """Replicas (data-parallel ranks) in all."""
    local_batch: Count
    """Samples per replica per micro-step."""
    accumulation: Count = 1
    """Micro-steps per optimizer step (gradient accumulation)."""
    step_seconds: Positive
    """Seconds of one optimizer step."""
    sync_seconds: NonNegative | None = None
    """Of those, seconds spent in the gradient all-reduce."""
    gpu_model: LabelValue | None = None
    """The GPU type it ran on, as nodes name it (``phalanx.io/gpu-model``); unsaid, the
    control plane takes the type of the node the reporting task runs on."""

    def to_domain(self, gpu_model: str | None = None) -> StepTiming:
        """The domain ``StepTiming``; ``gpu_model`` where the report does not say one."""
        return StepTiming(
            nodes=self.nodes,
            replicas=self.replicas,
            local_batch=self.local_batch,
            accumulation=self.accumulation,
            step_seconds=self.step_seconds,
            sync_seconds=self.sync_seconds,
            gpu_model=self.gpu_model if self.gpu_model is not None else gpu_model,
        )


class ProgressReport(SpecModel):
    """What a training task reports of itself (see the module docstring)."""

    step: Annotated[int, Field(ge=0)] | None = None
    """Optimizer steps so far."""
    samples: NonNegative | None = None
    """Training samples processed so far."""
    total_samples: NonNegative | None = None
    """Training samples processed when the job is done (its target: epochs x dataset)."""
    samples_per_second: NonNegative | None = None
    """Throughput now, in samples per second over every replica."""
    batch_size: Count | None = None
    """The global batch size."""
    grad_sqr: NonNegative | None = None
    """Squared norm of the mean gradient (gradient noise scale's numerator)."""
    grad_var: NonNegative | None = None
    """Variance of the per-sample gradients."""
    init_batch_size: Count | None = None
    """The batch its gradient statistics and progress are counted at (adaptive batches)."""
    max_batch_size: Count | None = None
    """The largest global batch it may adapt to."""
    local_batch_bounds: Annotated[list[Count], Field(min_length=2, max_length=2)] | None = None
    """[least, most] samples per replica and micro-step it can run."""
    timings: Annotated[list[TimingSpec], Field(max_length=MAX_TIMINGS)] = Field(
        default_factory=list
    )
    """Step times measured in the configurations the job ran in, newest last."""

    def to_domain(self, time: float, *, gpu_model: str | None = None) -> Progress:
        """The domain ``Progress``, as read at ``time``; timings that do not say their GPU
        type are taken as measured on ``gpu_model``."""
        return Progress(
            time=time,
            step=self.step,
            samples=self.samples,
            total_samples=self.total_samples,
            samples_per_second=self.samples_per_second,
            batch_size=self.batch_size,
            grad_sqr=self.grad_sqr,
            grad_var=self.grad_var,
            init_batch_size=self.init_batch_size,
            max_batch_size=self.max_batch_size,
            local_batch_bounds=_bounds(self.local_batch_bounds),
            timings=tuple(t.to_domain(gpu_model) for t in self.timings),
        )


def _bounds(written: list[int] | None) -> tuple[int, int] | None:
    return None if written is None else (written[0], written[1])
