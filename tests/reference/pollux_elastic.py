"""Expected values for tests/unit/sim/elastic from Pollux's own simulator.

Runs Pollux's simulator modules (adaptdl branch osdi21-artifact, ``simulator/``) and
prints JSON. Not a test and not run in CI (CI has no Pollux); run it by hand:

    cd /work/pollux/simulator && /work/pollux/venv/bin/python \
        /work/wt-goodput/tests/reference/pollux_elastic.py \
        > /work/wt-goodput/tests/unit/sim/elastic/pollux_reference.json

Every number comes from Pollux: ``Application.get_throughput`` (true step and sync
seconds of a placement), ``Application.get_grad_stats`` (gradient statistics at a batch
size and epoch), and ``simulator.Job`` (``reallocate`` then ``step(60)`` until done:
the completion time of a job alone on a fixed placement, at its row's batch size or
adaptive, and the batch configuration it chose first and last).
"""

import json
import sys

sys.path.insert(0, ".")
from applications import APPLICATIONS
from simulator import Job

# Measured placements, measured shapes (scalability.csv), and shapes neither measures.
PLACEMENTS = [
    (1,),
    (2,),
    (4,),
    (2, 2),
    (3, 1, 2),
    (4, 4),
    (4, 4, 4, 4),
    (1, 1, 1, 1),
    (4,) * 6,
    (4,) * 8,
    (2,) * 6,
    (4,) * 16,
    (4,) * 5,
    (2,) * 5,
    (3,) * 7,
    (4,) * 10,
    (1,) * 9,
    (4, 4, 4, 4, 4, 2),
    (2,) * 12,
]
# (application, placement, batch size or None for adaptive)
RUNS = [
    ("cifar10", (4,), 512),
    ("cifar10", (4,), None),
    ("cifar10", (4, 4), None),
    ("bert", (2,), None),
    ("ncf", (1,), 32768),
    ("deepspeech2", (4, 4), None),
    ("yolov3", (4, 4), None),
    ("imagenet", (4, 4, 4, 4), None),
]


def main():
    out = {"throughput": [], "grads": [], "runs": []}
    for name in sorted(APPLICATIONS):
        app = APPLICATIONS[name]
        lo, hi = int(app.placements.local_bsz.min()), int(app.max_local_bsz)
        for placement in PLACEMENTS:
            for atomic in sorted({lo, (lo + hi) // 2, hi}):
                try:
                    step, sync = (float(x) for x in app.get_throughput(placement, atomic))
                except (AssertionError, ValueError):
                    continue
                out["throughput"].append(
                    {
                        "app": name,
                        "placement": list(placement),
                        "atomic": atomic,
                        "step": step,
                        "sync": sync,
                    }
                )
        sizes = list(app.validation)
        for batch in (sizes[0], (sizes[0] + sizes[1]) // 2, sizes[-1]):
            for epoch in (0, app.max_epochs // 2, app.max_epochs - 1):
                sqr, var = (float(x) for x in app.get_grad_stats(batch, epoch))
                out["grads"].append(
                    {"app": name, "batch": batch, "epoch": epoch, "sqr": sqr, "var": var}
                )
    for name, placement, batch in RUNS:
        job = Job("job", APPLICATIONS[name], 0, target_batch_size=batch)
        job.reallocate(placement)
        job.rescale_time = 0  # no restart delay: the model alone
        first = (int(job.atomic_bsz), int(job.accum_steps))
        while job.completion_time is None:
            job.step(60)
        out["runs"].append(
            {
                "app": name,
                "placement": list(placement),
                "batch_size": batch,
                "first": list(first),
                "last": [int(job.atomic_bsz), int(job.accum_steps)],
                "completion": float(job.completion_time),
            }
        )
    json.dump(out, sys.stdout)
    print()


if __name__ == "__main__":
    main()
