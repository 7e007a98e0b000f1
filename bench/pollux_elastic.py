"""Issue 21's figures: elastic, goodput-aware scheduling against Pollux on its workloads.

    .venv/bin/python bench/pollux_elastic.py [--load 1.0 ...] [--policy NAME ...] [--workloads 8]

For each load (default all four: 0.5, 1.0, 1.5, 2.0) replays Pollux's eight workloads on
the ``pollux`` cluster (16 nodes x 4 GPUs) under each policy (default phalanx-default,
pollux, tiresias-las, fifo), sessions every 60 s on the minute as Pollux's simulator
schedules. The loader makes every job elastic (Pollux's evaluation); policies with the
``elastic`` action rescale them, the others run them at their row's size. Prints one
JSON line per run (average and p99 JCT, makespan, seconds of wall time), then per
load and policy the means over the workloads beside Pollux's published figures for
its own policy (``published_results/results-jobload/pollux-<load>``): average JCT
(its ``avgs``), p99 JCT and makespan (from its per-job JCTs and the workloads'
submit times).

Makespan: from the first submission to the last completion. Traces are read in place
from ../shared/traces (or $PHALANX_TRACES).
"""

from __future__ import annotations

import argparse
import csv
import json
import os
from pathlib import Path

import numpy as np

from phalanx.policies import load_policy
from phalanx.sim.clusters import load_cluster
from phalanx.sim.runner import SimOptions, Simulation
from phalanx.sim.traces.pollux import load_pollux

TRACES = Path(os.environ.get("PHALANX_TRACES", "../shared/traces"))
POLLUX = TRACES / "philly-jobs-pollux"
LOADS = ("0.5", "1.0", "1.5", "2.0")
POLICIES = ("phalanx-default", "pollux", "tiresias-las", "fifo")


def _folder(load: str) -> Path:
    return POLLUX / ("workloads" if load == "1.0" else f"workloads-{load}")


def _figures(jcts: list[float], ends: list[float], submits: list[float]) -> dict[str, float]:
    return {
        "avg_jct_s": float(np.mean(jcts)),
        "p99_jct_s": float(np.percentile(jcts, 99)),
        "makespan_s": max(ends) - min(submits),
    }


def published(load: str, workload: str) -> dict[str, float]:
    """Pollux's own figures for ``workload`` at ``load``."""
    path = POLLUX / "published_results" / "results-jobload" / f"pollux-{load}" / "summary.json"
    summary = json.loads(path.read_text())
    jcts: dict[str, float] = summary["jcts"][workload]
    with (_folder(load) / f"{workload}.csv").open() as stream:
        submit = {row["name"]: float(row["time"]) for row in csv.DictReader(stream)}
    figures = _figures(
        list(jcts.values()), [submit[n] + j for n, j in jcts.items()], list(submit.values())
    )
    figures["avg_jct_s"] = float(summary["avgs"][workload])
    return figures


def run(load: str, workload: str, policy: str) -> dict[str, float]:
    """phalanx's figures for ``workload`` at ``load`` under ``policy``."""
    jobs = load_pollux(_folder(load) / f"{workload}.csv")
    sim = Simulation(
        load_cluster("pollux"),
        jobs,
        load_policy(policy).config,
        options=SimOptions(fixed_period=True),
    )
    metrics = sim.run()
    records = list(metrics.jobs.values())
    if any(r.end is None or r.outcome != "finished" for r in records):
        raise RuntimeError(f"{workload} at {load} under {policy}: not every job finished")
    figures = _figures(
        [r.end - r.submit for r in records if r.end is not None],
        [r.end for r in records if r.end is not None],
        [r.submit for r in records],
    )
    figures["wall_s"] = sim.wall_seconds
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--load", action="append", dest="loads", choices=LOADS)
    parser.add_argument("--policy", action="append", dest="policies")
    parser.add_argument("--workloads", type=int, default=8, choices=range(1, 9))
    args = parser.parse_args()
    names = [f"workload-{n}" for n in range(1, args.workloads + 1)]
    for load in args.loads or LOADS:
        means: dict[str, list[dict[str, float]]] = {}
        for name in names:
            means.setdefault("pollux (published)", []).append(published(load, name))
            for policy in args.policies or POLICIES:
                figures = run(load, name, policy)
                means.setdefault(policy, []).append(figures)
                row = {"bench": "pollux_elastic", "load": load, "workload": name}
                row |= {"policy": policy} | {k: round(v, 1) for k, v in figures.items()}
                print(json.dumps(row), flush=True)
        for policy, rows in means.items():
            mean = {k: round(float(np.mean([r[k] for r in rows])), 1) for k in rows[0]}
            row = {"bench": "pollux_elastic", "load": load, "workload": f"mean of {len(rows)}"}
            print(json.dumps(row | {"policy": policy} | mean), flush=True)


if __name__ == "__main__":
    main()
