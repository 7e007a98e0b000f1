"""The backlog bound (issue 43): every shipped policy on a Philly replay at 1x-10x load.

    .venv/bin/python bench/backlog.py [--base 100] [--loads 1 2 5 10] [--nodes 8]
                                      [--start 60000] [--policy NAME ...]

At load k the replay takes ``k x base`` consecutive jobs of Philly's job table
(``philly-jobs-pollux/philly.csv.gz``, from job ``start`` in submit order) and divides
their submit times (from the first of them) by k: the same span of time with k times
the jobs, on the first ``nodes`` nodes of the ``philly`` preset (8 GPUs each). With the
defaults, 64 GPUs: at 1x few jobs wait; at 10x (1,000 jobs) hundreds wait for days.
Policies alternate within each load (every policy at 1x, then every one at 2x, ...), so a
slow spell of the machine falls on all of them alike, and each run is compared with the
``fifo`` run of the same load. Prints one JSON object: per policy, the jobs, wall
seconds, seconds per 1,000 jobs, the ratio to ``fifo``, the sessions and the most jobs
waiting at once, at each load (and each run's wall seconds to stderr as it ends). With
the defaults it takes about six minutes on a 2-core machine; ``--base 300`` (3,000 jobs
at 10x, over a thousand waiting at once) takes several times that. Traces are read in
place from ``$PHALANX_TRACES`` (default ``../shared/traces``).
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
import os
import sys
import time
from collections.abc import Iterable
from dataclasses import replace
from pathlib import Path

from phalanx.policies import load_policy, policy_names
from phalanx.sim.clusters import PHILLY_DIR, philly_nodes
from phalanx.sim.metrics import JobRecord
from phalanx.sim.runner import SimOptions, Simulation
from phalanx.sim.traces.philly import VC_FILE, load_philly
from phalanx.sim.workload import Workload

TRACES = Path(os.environ.get("PHALANX_TRACES", "../shared/traces"))


def at_load(trace: Workload, *, start: int, base: int, load: int) -> Workload:
    """``load x base`` jobs of ``trace`` from job ``start``, submitted ``load`` times as
    fast (times from the first of them)."""
    jobs = trace.jobs[start : start + load * base]
    if len(jobs) < load * base:
        raise SystemExit(f"the trace has {len(trace.jobs)} jobs, fewer than {start + load * base}")
    first = jobs[0].job.creation_time
    compressed = tuple(
        replace(j, job=replace(j.job, creation_time=(j.job.creation_time - first) / load))
        for j in jobs
    )
    return replace(trace, jobs=compressed, source=f"{trace.source} from job {start} at {load}x")


def peak_waiting(records: Iterable[JobRecord]) -> int:
    """The most jobs waiting for their first start at once."""
    steps = sorted(
        (when, step)
        for r in records
        for when, step in (
            (r.submit, 1),
            (r.first_start if r.first_start is not None else math.inf, -1),
        )
    )
    return max(itertools.accumulate(step for _, step in steps), default=0)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--base", type=int, default=100, help="jobs at 1x load")
    parser.add_argument("--loads", type=int, nargs="+", default=[1, 2, 5, 10])
    parser.add_argument("--nodes", type=int, default=8, help="nodes of the philly preset")
    parser.add_argument("--start", type=int, default=60000, help="first job of the table")
    parser.add_argument("--policy", dest="policies", action="append", choices=policy_names())
    args = parser.parse_args()
    policies = list(dict.fromkeys(["fifo", *(args.policies or policy_names())]))
    folder = TRACES / PHILLY_DIR
    trace = load_philly(folder / "philly.csv.gz")
    nodes = philly_nodes(folder / VC_FILE)[: args.nodes]
    table: dict[str, dict[str, dict[str, float]]] = {
        p: {
            "jobs": {},
            "wall_s": {},
            "s_per_1000_jobs": {},
            "ratio_to_fifo": {},
            "sessions": {},
            "peak_waiting": {},
        }
        for p in policies
    }
    for load in args.loads:
        workload = at_load(trace, start=args.start, base=args.base, load=load)
        for name in policies:
            policy = load_policy(name)
            options = SimOptions(oracle_runtime=policy.oracle_runtime)
            sim = Simulation(nodes, workload, policy.config, options=options)
            began = time.perf_counter()
            metrics = sim.run()
            wall = time.perf_counter() - began
            summary = metrics.summary(sim_wall_s=wall)
            if summary["finished"] != len(workload.jobs):
                raise SystemExit(f"{name} at {load}x finished {summary['finished']} jobs")
            row = table[name]
            key = f"{load}x"
            row["jobs"][key] = len(workload.jobs)
            row["wall_s"][key] = round(wall, 3)
            row["s_per_1000_jobs"][key] = round(1000 * wall / len(workload.jobs), 2)
            row["sessions"][key] = len(metrics.session_seconds)
            row["peak_waiting"][key] = peak_waiting(metrics.jobs.values())
            print(
                json.dumps({"policy": name, "load": key, "wall_s": row["wall_s"][key]}),
                file=sys.stderr,
                flush=True,
            )
        for name in policies:
            fifo = table["fifo"]["wall_s"][f"{load}x"]
            wall = table[name]["wall_s"][f"{load}x"]
            table[name]["ratio_to_fifo"][f"{load}x"] = round(wall / fifo, 2)
    print(
        json.dumps(
            {
                "bench": "backlog",
                "trace": f"philly jobs {args.start}.., {args.base} x load",
                "cluster": f"philly preset, first {args.nodes} nodes ({8 * args.nodes} GPUs)",
                "policies": table,
            },
            indent=1,
        )
    )


if __name__ == "__main__":
    main()
