"""What fair-share between a queue's users buys and costs on a trace; JSON lines.

    .venv/bin/python bench/sim_fairshare.py [--workload philly:] [--cluster philly]
        [--queues shared|trace] [--nodes N] [--days D] [--fairness-window 1d] [POLICY ...]

Replays the workload under ``phalanx-default`` and ``phalanx-no-fairshare.yaml`` beside
this script (the same policy less its ``fairshare`` plugin), or the POLICY names or files
given, and prints one JSON object per policy: JCT, queueing delay, utilisation and the
per-user figures of the simulator (Jain's index over users' GPU-time against their fair
share per window, the worst-off user's mean wait, the longest any user waited, the
spread of users' mean waits).

Philly's public job table has no user column: its loader makes each virtual cluster
(VC) the user, and each VC a queue of its own, where fair-share inside a queue has
nothing to share. ``--queues shared`` (the default) puts every job in one queue, so the
VCs share the whole cluster as a Slurm partition's accounts do; ``--queues trace`` keeps
the trace's queues. On all 352 of Philly's nodes the trace hardly waits (13% of the GPUs
held on average, under a second's queueing): ``--nodes N`` keeps the first N nodes, so
that users contend as they do on a busy cluster; ``--days D`` keeps the jobs submitted in
the trace's first D days. Traces are read in place from ../shared/traces (or $PHALANX_TRACES).
"""

from __future__ import annotations

import argparse
import json
import os
from dataclasses import replace
from pathlib import Path

from phalanx.domain.queue import Queue
from phalanx.policies import load_policy
from phalanx.sim.clusters import load_cluster
from phalanx.sim.runner import SimOptions, Simulation
from phalanx.sim.traces import load_workload
from phalanx.sim.workload import Workload
from phalanx.spec.common import parse_duration

TRACES = Path(os.environ.get("PHALANX_TRACES", "../shared/traces"))
POLICIES = ("phalanx-default", str(Path(__file__).with_name("phalanx-no-fairshare.yaml")))
SHARED = "shared"
FIGURES = (
    "jobs",
    "finished",
    "avg_jct_s",
    "p50_jct_s",
    "p95_jct_s",
    "avg_queue_delay_s",
    "makespan_s",
    "gpu_alloc_ratio_avg",
    "users",
    "user_jain_mean",
    "user_jain_min",
    "user_worst",
    "user_worst_avg_wait_s",
    "user_max_wait_s",
    "user_wait_max_over_mean",
    "sim_wall_s",
)


def one_queue(workload: Workload) -> Workload:
    """``workload`` with every job in one queue, ``shared``."""
    jobs = tuple(replace(w, job=replace(w.job, queue=SHARED)) for w in workload.jobs)
    return replace(workload, jobs=jobs, queues=(Queue(name=SHARED),))


def first_days(workload: Workload, days: float) -> Workload:
    """``workload`` less the jobs submitted after its first ``days`` days."""
    start = min((w.job.creation_time for w in workload.jobs), default=0.0)
    end = start + days * 86400
    return replace(workload, jobs=tuple(w for w in workload.jobs if w.job.creation_time < end))


def main() -> None:
    """Parse the options, play each policy, print its figures."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("policies", nargs="*", default=list(POLICIES))
    parser.add_argument("--workload", default="philly:")
    parser.add_argument("--cluster", default="philly")
    parser.add_argument("--queues", choices=("shared", "trace"), default="shared")
    parser.add_argument("--nodes", type=int, default=0, help="keep the first N nodes (0: all)")
    parser.add_argument("--days", type=float, default=0, help="keep the first D days (0: all)")
    parser.add_argument("--fairness-window", default="1d")
    args = parser.parse_args()
    workload = load_workload(args.workload, traces_dir=TRACES)
    if args.days:
        workload = first_days(workload, args.days)
    if args.queues == "shared":
        workload = one_queue(workload)
    nodes = load_cluster(args.cluster, traces_dir=TRACES)
    if args.nodes:
        nodes = nodes[: args.nodes]
    window = parse_duration(args.fairness_window)
    setting = {
        "workload": args.workload,
        "cluster": args.cluster,
        "nodes": len(nodes),
        "days": args.days or None,
        "queues": args.queues,
    }
    for name in args.policies:
        policy = load_policy(name)
        options = SimOptions(oracle_runtime=policy.oracle_runtime)
        simulation = Simulation(nodes, workload, policy.config, options=options)
        metrics = simulation.run()
        summary = metrics.summary(sim_wall_s=simulation.wall_seconds, fairness_window=window)
        figures = {key: summary.get(key) for key in FIGURES}
        print(json.dumps({"bench": "sim-fairshare", "policy": policy.name, **setting, **figures}))


if __name__ == "__main__":
    main()
