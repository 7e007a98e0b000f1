"""Simulator benchmarks from the simulator issue; prints one JSON object per line.

    .venv/bin/python bench/sim.py philly [POLICY ...]   # full Philly replay (82,247 jobs)
    .venv/bin/python bench/sim.py kueue [POLICY ...]    # Kueue's published scheduler benchmark
    .venv/bin/python bench/sim.py sia [POLICY ...] [--workloads 1-8] [--workloads-dir DIR]

Traces are read in place from ../shared/traces (or $PHALANX_TRACES).

``sia``: Sia's eight Philly workloads (``sia-philly/workloads/philly``) with their per-GPU-
type profiles on the ``sia`` cluster (64 GPUs of three types); ``--workloads-dir`` reads
another set of Sia's (its ``saturn`` or ``newtrace`` folders, kept out of the traces
folder as the sets a policy was not tuned on), as ``phalanx sim run
--cluster sia --workload pollux:... --profiles .../app_profiles`` runs them; the
policies alternate per workload. One JSON line per run (hours), then per policy the
means over the workloads run: average JCT (and its spread, the paper's +-), p99 as the
mean of the workloads' and pooled over every job (as Sia's Table 3, by Sia's rule: the
sorted JCTs' entry at int(0.99 n)), makespan, beside
Sia's published figures and its simulator re-run here (``bench/sia_reference.py``).
"""

from __future__ import annotations

import json
import os
import statistics
import sys
from collections import defaultdict
from pathlib import Path

from phalanx.policies import load_policy
from phalanx.sim.clusters import load_cluster
from phalanx.sim.metrics import HEADLINE_FIGURES
from phalanx.sim.runner import SimOptions, Simulation
from phalanx.sim.traces import load_workload
from phalanx.sim.traces.kueue import kueue_nodes, kueue_workload

TRACES = Path(os.environ.get("PHALANX_TRACES", "../shared/traces"))
#: Kueue's published figures for this benchmark (total time, average queue usage, waits).
KUEUE_PUBLISHED = {
    "total_s": 351.0,
    "usage": 0.559,
    "wait_s": {"large": 16.5, "medium": 76.8, "small": 215.0},
}
#: Sia's Table 3 (Philly, 64 heterogeneous GPUs), hours, and its simulator re-run here
#: (docs/benchmarks/simulator.md, "Sia's simulator, re-run here": means of the eight).
SIA_PUBLISHED = {
    "sia": {"avg_jct_h": 0.6, "p99_jct_h": 9.5, "makespan_h": 14.2},
    "pollux": {"avg_jct_h": 1.0, "p99_jct_h": 14.9, "makespan_h": 24.5},
}
SIA_RERUN = {"avg_jct_h": 0.66, "p99_jct_h": 10.7, "makespan_h": 14.3}
HOUR = 3600.0


def philly(policies: list[str]) -> None:
    """Full Philly replay: avg JCT and queue delay per policy, and the wall time."""
    workload = load_workload("philly:", traces_dir=TRACES)
    nodes = load_cluster("philly", traces_dir=TRACES)
    for name in policies or ["phalanx-default", "fifo", "drf", "tiresias-las", "sjf-oracle"]:
        policy = load_policy(name)
        sim = Simulation(
            nodes, workload, policy.config, options=SimOptions(oracle_runtime=policy.oracle_runtime)
        )
        summary = sim.run().summary(sim_wall_s=sim.wall_seconds)
        keys = (*HEADLINE_FIGURES, "sessions", "session_p99_ms")
        print(
            json.dumps({"bench": "philly", "policy": name, **{k: summary[k] for k in keys}}),
            flush=True,
        )


def kueue(policies: list[str]) -> None:
    """Kueue's benchmark: total time, average CPU usage, mean admission wait per class."""
    workload = kueue_workload()
    for name in policies or ["phalanx-default"]:
        policy = load_policy(name)
        options = SimOptions(trigger_delay=0.05, period=1.0, max_period=10.0)
        sim = Simulation(kueue_nodes(), workload, policy.config, options=options)
        metrics = sim.run()
        summary = metrics.summary(sim_wall_s=sim.wall_seconds)
        waits: dict[str, list[float]] = defaultdict(list)
        for record in metrics.jobs.values():
            klass = next(c for c in ("small", "medium", "large") if f"-{c}-" in record.name)
            if record.queue_delay is not None:
                waits[klass].append(record.queue_delay)
        print(
            json.dumps(
                {
                    "bench": "kueue",
                    "policy": name,
                    "jobs": summary["jobs"],
                    "finished": summary["finished"],
                    "total_s": summary["makespan_s"],
                    "usage": summary["cpu_alloc_ratio_avg"],
                    "wait_s": {k: round(sum(v) / len(v), 1) for k, v in sorted(waits.items())},
                    "kueue_published": KUEUE_PUBLISHED,
                    "sim_wall_s": summary["sim_wall_s"],
                }
            ),
            flush=True,
        )


def sia(args: list[str]) -> None:
    """Sia's eight Philly workloads on the sia cluster (see the module docstring)."""
    numbers = list(range(1, 9))
    if "--workloads" in args:
        at = args.index("--workloads")
        low, _, high = args[at + 1].partition("-")
        numbers = list(range(int(low), int(high or low) + 1))
        args = args[:at] + args[at + 2 :]
    folder = TRACES / "sia-philly"
    workloads = folder / "workloads" / "philly"
    if "--workloads-dir" in args:
        at = args.index("--workloads-dir")
        workloads = Path(args[at + 1])
        args = args[:at] + args[at + 2 :]
    policies = args or ["phalanx-default"]
    nodes = load_cluster("sia", traces_dir=TRACES)
    runs: dict[str, list[dict[str, float]]] = defaultdict(list)
    jcts: dict[str, list[float]] = defaultdict(list)
    for number in numbers:
        workload = load_workload(
            f"pollux:{workloads / f'workload-{number}.csv'}",
            profiles_dir=folder / "app_profiles",
        )
        for name in policies:
            sim = Simulation(nodes, workload, load_policy(name).config, options=SimOptions())
            metrics = sim.run()
            summary = metrics.summary(sim_wall_s=sim.wall_seconds)
            row = {
                "avg_jct_h": summary["avg_jct_s"] / HOUR,
                "p99_jct_h": summary["p99_jct_s"] / HOUR,
                "makespan_h": summary["makespan_s"] / HOUR,
            }
            runs[name].append(row)
            jcts[name] += [r.jct for r in metrics.jobs.values() if r.jct is not None]
            print(
                json.dumps(
                    {
                        "bench": "sia",
                        "workload": number,
                        "policy": name,
                        **{k: round(v, 3) for k, v in row.items()},
                        "finished": summary["finished"],
                        "jobs": summary["jobs"],
                        "gpu_type_jobs": summary.get("gpu_type_jobs"),
                        "sim_wall_s": summary["sim_wall_s"],
                    }
                ),
                flush=True,
            )
    for name, rows in runs.items():
        averages = [r["avg_jct_h"] for r in rows]
        print(
            json.dumps(
                {
                    "bench": "sia",
                    "policy": name,
                    "workloads": numbers,
                    "avg_jct_h": round(statistics.fmean(averages), 3),
                    "avg_jct_spread_h": round(statistics.pstdev(averages), 3),
                    "p99_jct_h": round(statistics.fmean(r["p99_jct_h"] for r in rows), 2),
                    "p99_jct_pooled_h": round(_sia_p99(jcts[name]) / HOUR, 2),
                    "makespan_h": round(statistics.fmean(r["makespan_h"] for r in rows), 2),
                    "sia_published": SIA_PUBLISHED,
                    "sia_rerun_here": SIA_RERUN,
                }
            ),
            flush=True,
        )


def _sia_p99(values: list[float]) -> float:
    """The 99th percentile as Sia's ``print_run_stats.py`` takes it: the sorted values'
    entry at index ``int(0.99 n)``."""
    ordered = sorted(values)
    return ordered[min(int(0.99 * len(ordered)), len(ordered) - 1)]


if __name__ == "__main__":
    {"philly": philly, "kueue": kueue, "sia": sia}[sys.argv[1]](sys.argv[2:])
