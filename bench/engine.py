"""Engine benchmark at the issue's reference shapes; prints one JSON object per line.

    .venv/bin/python bench/engine.py            # every shape
    .venv/bin/python bench/engine.py yunikorn   # one shape

Shapes: YuniKorn's core benchmark (5,000 nodes, 5 queues x 80 jobs x 125 tasks),
the same at 10,000 nodes, a GPU gang mix, and KAI-Scheduler's busy cluster
(140,000 running tasks on 4,000 nodes, 1,000 pending). Each shape runs ``repeat``
times; the best run is reported with the median beside it.
"""

from __future__ import annotations

import json
import statistics
import sys

from phalanx.benchmarks.engine import EngineBenchSpec, run

SHAPES = {
    "yunikorn": EngineBenchSpec(nodes=5000, queues=5, jobs_per_queue=80, tasks_per_job=125),
    "yunikorn-10k": EngineBenchSpec(nodes=10000, queues=5, jobs_per_queue=160, tasks_per_job=125),
    "gpu-mix": EngineBenchSpec(nodes=5000, queues=5, jobs_per_queue=400, gpu_mix=True),
    "kai-busy": EngineBenchSpec(
        nodes=4000, queues=5, jobs_per_queue=8, tasks_per_job=25, running=140000
    ),
}


def main(names: list[str], repeat: int = 3) -> None:
    for name in names or list(SHAPES):
        runs = [run(SHAPES[name]) for _ in range(repeat)]
        best = min(runs, key=lambda r: r["seconds"])
        result = {
            "shape": name,
            **best,
            "median_seconds": round(statistics.median(r["seconds"] for r in runs), 4),
        }
        print(json.dumps(result), flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
