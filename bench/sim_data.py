"""What node caches and data locality are worth on a trace (issue 39); JSON lines.

    .venv/bin/python bench/sim_data.py [--workload philly:] [--cluster philly]
        [--datasets 100] [--dataset-size 200Gi] [--node-cache 2Ti] [--node-bandwidth 1G]
        [POLICY ...]

Replays the workload with each job given one of ``--datasets`` datasets (Zipf-like
popularity, seed 0: ``phalanx.sim.data.with_datasets``) under ``phalanx-default`` and
``phalanx-no-locality.yaml`` beside this script (the same policy less the
``datalocality`` plugin), or the POLICY names or files given, and prints one JSON
object per policy: JCT, queueing delay, makespan, GPU allocation and the data figures
(task starts reading data, the share that found it all warm, bytes read from the
remote store, start delay for data, evictions). The same as

    .venv/bin/phalanx sim compare --cluster philly --workload philly: --datasets 100 \\
        --scheduler phalanx-default --scheduler bench/phalanx-no-locality.yaml --out DIR --json

Traces are read in place from ../shared/traces (or $PHALANX_TRACES).
"""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path

from phalanx.policies import load_policy
from phalanx.sim.clusters import load_cluster
from phalanx.sim.data import DATA_FIGURES, byte_amount, parse_cache_model, with_datasets
from phalanx.sim.runner import SimOptions, Simulation
from phalanx.sim.traces import load_workload

TRACES = Path(os.environ.get("PHALANX_TRACES", "../shared/traces"))
POLICIES = ("phalanx-default", str(Path(__file__).with_name("phalanx-no-locality.yaml")))
FIGURES = (
    "jobs",
    "finished",
    "avg_jct_s",
    "p50_jct_s",
    "p95_jct_s",
    "avg_queue_delay_s",
    "makespan_s",
    "gpu_alloc_ratio_avg",
    *DATA_FIGURES,
    "sim_wall_s",
)


def main() -> None:
    """Parse the options, play each policy, print its figures."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("policies", nargs="*", default=list(POLICIES))
    parser.add_argument("--workload", default="philly:")
    parser.add_argument("--cluster", default="philly")
    parser.add_argument("--datasets", type=int, default=100)
    parser.add_argument("--dataset-size", default="200Gi")
    parser.add_argument("--node-cache", default="2Ti")
    parser.add_argument("--node-bandwidth", default="1G")
    args = parser.parse_args()
    size = int(byte_amount(args.dataset_size, option="--dataset-size"))
    workload = with_datasets(
        load_workload(args.workload, traces_dir=TRACES), count=args.datasets, size=size, seed=0
    )
    nodes = load_cluster(args.cluster, traces_dir=TRACES)
    model = parse_cache_model(args.node_cache, args.node_bandwidth)
    setting = {
        "workload": args.workload,
        "cluster": args.cluster,
        "datasets": args.datasets,
        "dataset_size": args.dataset_size,
        "node_cache": args.node_cache,
        "node_bandwidth": args.node_bandwidth,
    }
    for name in args.policies:
        policy = load_policy(name)
        options = SimOptions(oracle_runtime=policy.oracle_runtime, data=model)
        simulation = Simulation(nodes, workload, policy.config, options=options)
        summary = simulation.run().summary(sim_wall_s=simulation.wall_seconds)
        figures = {key: summary.get(key) for key in FIGURES}
        print(json.dumps({"bench": "sim-data", "policy": policy.name, **setting, **figures}))


if __name__ == "__main__":
    main()
