"""Engine benchmark at the issue's reference shapes; prints one JSON object per line.

    .venv/bin/python bench/engine.py                      # every shape, both schedulers
    .venv/bin/python bench/engine.py yunikorn             # one shape
    .venv/bin/python bench/engine.py yunikorn --scheduler fifo --scheduler my.yaml

Shapes: YuniKorn's core benchmark (5,000 nodes, 5 queues x 80 jobs x 125 tasks),
the same at 10,000 nodes, a GPU gang mix, and KAI-Scheduler's busy cluster
(140,000 running tasks on 4,000 nodes, 1,000 pending), and a backlog (1,000 GPU gangs
on 250 nodes, most left pending: what reporting them costs). Each shape runs under each
scheduler (a shipped policy name or a SchedulerConfig file; by default
``phalanx-default`` and ``phalanx-binpack.yaml`` beside this script, the same policy
placing by binpack, so what placement quality costs is always in view). The runs of
one shape alternate between the schedulers ``repeat`` times, so that a machine's drift
hits them alike; the best run is reported with the median beside it.
"""

from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path

from phalanx.benchmarks.engine import EngineBenchSpec, run
from phalanx.policies import load_policy

SHAPES = {
    "yunikorn": EngineBenchSpec(nodes=5000, queues=5, jobs_per_queue=80, tasks_per_job=125),
    "yunikorn-10k": EngineBenchSpec(nodes=10000, queues=5, jobs_per_queue=160, tasks_per_job=125),
    "gpu-mix": EngineBenchSpec(nodes=5000, queues=5, jobs_per_queue=400, gpu_mix=True),
    "kai-busy": EngineBenchSpec(
        nodes=4000, queues=5, jobs_per_queue=8, tasks_per_job=25, running=140000
    ),
    # a backlog: 1,000 GPU gangs on 2,000 GPUs, most left pending (reasons and places)
    "gpu-backlog": EngineBenchSpec(nodes=250, queues=5, jobs_per_queue=200, gpu_mix=True),
}
SCHEDULERS = ("phalanx-default", str(Path(__file__).with_name("phalanx-binpack.yaml")))


def main(names: list[str], schedulers: list[str], repeat: int = 3) -> None:
    policies = [load_policy(s) for s in schedulers]
    for name in names or list(SHAPES):
        runs: list[list[dict[str, float | int | bool]]] = [[] for _ in policies]
        for _ in range(repeat):
            for i, policy in enumerate(policies):
                runs[i].append(run(SHAPES[name], policy.config))
        for policy, done in zip(policies, runs, strict=True):
            best = min(done, key=lambda r: r["seconds"])
            result = {
                "shape": name,
                "scheduler": policy.name,
                **best,
                "median_seconds": round(statistics.median(r["seconds"] for r in done), 4),
            }
            print(json.dumps(result), flush=True)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("shapes", nargs="*", metavar="SHAPE", help=", ".join(SHAPES))
    parser.add_argument("--scheduler", action="append", help="a policy name or a file")
    parser.add_argument("--repeat", type=int, default=3)
    arguments = parser.parse_args()
    unknown = sorted(set(arguments.shapes) - set(SHAPES))
    if unknown:
        parser.error(f"unknown shape {', '.join(unknown)}; use {', '.join(SHAPES)}")
    main(arguments.shapes, arguments.scheduler or list(SCHEDULERS), arguments.repeat)
