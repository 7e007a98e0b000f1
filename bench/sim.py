"""Simulator benchmarks from the simulator issue; prints one JSON object per line.

    .venv/bin/python bench/sim.py philly [POLICY ...]   # full Philly replay (82,247 jobs)
    .venv/bin/python bench/sim.py kueue [POLICY ...]    # Kueue's published scheduler benchmark

Traces are read in place from ../shared/traces (or $PHALANX_TRACES).
"""

from __future__ import annotations

import json
import os
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


if __name__ == "__main__":
    {"philly": philly, "kueue": kueue}[sys.argv[1]](sys.argv[2:])
