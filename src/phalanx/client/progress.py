"""Report a training task's progress to phalanx, from inside the task.

    from phalanx.client import progress

    progress.report(step=step, samples=samples, total_samples=epochs * len(dataset),
                    samples_per_second=812.5, batch_size=128,
                    timings=[progress.Timing(nodes=1, replicas=2, local_batch=64,
                                             step_seconds=0.157, sync_seconds=0.021)])

The report goes to the file ``$PHALANX_PROGRESS_FILE`` names (phalanx sets it for every
task), replaced whole each time, so a reader never sees half of one. The control plane
reads the newest report of each running elastic job and hands it to the scheduler,
whose goodput-aware policy learns from it how much each job gains from more GPUs
(and, from ``total_samples``, how near its end it is).
Outside phalanx (the variable unset) ``report`` does nothing. Report every few seconds,
not every step: only the latest report counts.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Final

from phalanx.domain.progress import StepTiming

#: The variable naming the file a task reports to.
PROGRESS_FILE: Final = "PHALANX_PROGRESS_FILE"

#: One measured optimizer step: ``replicas`` over ``nodes``, ``local_batch`` samples per
#: replica per micro-step, ``accumulation`` micro-steps, ``step_seconds`` in all of which
#: ``sync_seconds`` went to the gradient all-reduce, on GPUs of type ``gpu_model`` (leave it
#: None: phalanx takes the type of the node the task runs on). The domain's value, which the
#: control plane reads the report back into: a count under 1 or a step time that is not
#: positive is refused as it is made (``InvalidInput``, naming the field and the fix).
Timing = StepTiming


def report(
    *,
    step: int | None = None,
    samples: float | None = None,
    total_samples: float | None = None,
    samples_per_second: float | None = None,
    batch_size: int | None = None,
    grad_sqr: float | None = None,
    grad_var: float | None = None,
    init_batch_size: int | None = None,
    max_batch_size: int | None = None,
    local_batch_bounds: tuple[int, int] | None = None,
    timings: list[Timing] | None = None,
) -> bool:
    """Write this report to ``$PHALANX_PROGRESS_FILE``; False (nothing written) when the
    variable is unset. Fields left None are left out."""
    target = os.environ.get(PROGRESS_FILE)
    if not target:
        return False
    fields = {
        "step": step,
        "samples": samples,
        "totalSamples": total_samples,
        "samplesPerSecond": samples_per_second,
        "batchSize": batch_size,
        "gradSqr": grad_sqr,
        "gradVar": grad_var,
        "initBatchSize": init_batch_size,
        "maxBatchSize": max_batch_size,
        "localBatchBounds": None if local_batch_bounds is None else list(local_batch_bounds),
    }
    document: dict[str, object] = {k: v for k, v in fields.items() if v is not None}
    if timings:
        document["timings"] = [_timing(t) for t in timings]
    path = Path(target)
    partial = path.with_name(f".{path.name}.{os.getpid()}")
    partial.write_text(json.dumps(document))
    partial.replace(path)
    return True


def _timing(timing: Timing) -> dict[str, object]:
    written: dict[str, object] = {
        "nodes": timing.nodes,
        "replicas": timing.replicas,
        "localBatch": timing.local_batch,
        "accumulation": timing.accumulation,
        "stepSeconds": timing.step_seconds,
    }
    if timing.sync_seconds is not None:
        written["syncSeconds"] = timing.sync_seconds
    if timing.gpu_model is not None:
        written["gpuModel"] = timing.gpu_model
    return written
