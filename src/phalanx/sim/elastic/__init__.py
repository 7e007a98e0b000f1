"""Ground truth of an elastic training job in the simulator, from Pollux's application
profiles: the true step time of a placement (``throughput``), the batch split fixed or
chosen by the goodput model (``batch``), progress, gradient statistics and completion
(``progress``), and the measurements the job reports (``observe``), one job over time (``job``); ``profile`` holds
the measurements as values (``phalanx.sim.traces.pollux.read_profile`` reads them). No
I/O here.
"""

from phalanx.sim.elastic.batch import BatchConfig, adaptive_batch, fixed_batch, limits
from phalanx.sim.elastic.job import ElasticJob
from phalanx.sim.elastic.observe import StepLog
from phalanx.sim.elastic.profile import AppProfile, GradStats, build_profile
from phalanx.sim.elastic.progress import (
    Advance,
    JobProgress,
    advance,
    gains,
    grad_params,
    progress_rate,
)
from phalanx.sim.elastic.throughput import iteration_seconds, normalise, packed, step_times

__all__ = [
    "Advance",
    "AppProfile",
    "BatchConfig",
    "ElasticJob",
    "GradStats",
    "JobProgress",
    "StepLog",
    "adaptive_batch",
    "advance",
    "build_profile",
    "fixed_batch",
    "gains",
    "grad_params",
    "iteration_seconds",
    "limits",
    "normalise",
    "packed",
    "progress_rate",
    "step_times",
]
