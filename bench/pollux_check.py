"""Model check (issue 21): phalanx's simulator against Pollux's on the same jobs at fixed size.

    .venv/bin/python bench/pollux_check.py [--load 1.0] [--policy NAME ...] [--free-period]

For each of Pollux's eight workloads at that relative load (``workloads/`` for 1.0,
``workloads-<load>/`` otherwise), replays the jobs on the ``pollux`` cluster under each
policy (default ``tiresias-pollux``) and prints one JSON line per run with phalanx's
average JCT beside the one Pollux's simulator published for its Tiresias
(``published_results/results-jobload/tiresias-<load>/summary.json``; its simulator
re-run here gives the same figures), then a line with the means.

Sessions run every 60 s on the minute, as Pollux's simulator schedules
(``SimOptions.fixed_period``); ``--free-period`` uses phalanx's default instead (a
session one second after each arrival or release).

Traces are read in place from ../shared/traces (or $PHALANX_TRACES).
"""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path

from phalanx.policies import load_policy
from phalanx.sim.clusters import load_cluster
from phalanx.sim.runner import SimOptions, Simulation
from phalanx.sim.traces.pollux import load_pollux

TRACES = Path(os.environ.get("PHALANX_TRACES", "../shared/traces"))
POLLUX = TRACES / "philly-jobs-pollux"
#: Pollux's Tiresias threshold between its two queues, GPU-seconds (16 GPU-hours).
THRESHOLD = 57_600.0


def _folder(load: str) -> Path:
    return POLLUX / ("workloads" if load == "1.0" else f"workloads-{load}")


def _published(load: str) -> dict[str, float]:
    path = POLLUX / "published_results" / "results-jobload" / f"tiresias-{load}" / "summary.json"
    avgs: dict[str, float] = json.loads(path.read_text())["avgs"]
    return avgs


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--load", default="1.0", choices=["0.5", "1.0", "1.5", "2.0"])
    parser.add_argument("--policy", action="append", dest="policies")
    parser.add_argument("--free-period", action="store_true")
    args = parser.parse_args()
    configs = {name: load_policy(name).config for name in args.policies or ["tiresias-pollux"]}
    options = SimOptions(fixed_period=not args.free_period)
    nodes = load_cluster("pollux")
    published = _published(args.load)
    totals: dict[str, list[float]] = {name: [] for name in configs}
    for n in range(1, 9):
        name = f"workload-{n}"
        workload = load_pollux(_folder(args.load) / f"{name}.csv")
        for policy, config in configs.items():
            sim = Simulation(nodes, workload, config, options=options)
            summary = sim.run().summary(sim_wall_s=sim.wall_seconds)
            jct = summary["avg_jct_s"]
            assert isinstance(jct, float), "every job of a Pollux workload finishes"
            totals[policy].append(jct)
            row = {
                "bench": "pollux_check",
                "load": args.load,
                "workload": name,
                "policy": policy,
                "avg_jct_s": round(jct, 1),
                "pollux_avg_jct_s": round(published[name], 1),
                "diff": round(jct / published[name] - 1, 4),
                "preemptions": summary["preemptions"],
                "fixed_period": not args.free_period,
            }
            print(json.dumps(row), flush=True)
    reference = sum(published.values()) / len(published)
    for policy, jcts in totals.items():
        mean = sum(jcts) / len(jcts)
        row = {
            "bench": "pollux_check",
            "load": args.load,
            "workload": "mean of 8",
            "policy": policy,
            "avg_jct_s": round(mean, 1),
            "pollux_avg_jct_s": round(reference, 1),
            "diff": round(mean / reference - 1, 4),
        }
        print(json.dumps(row), flush=True)


if __name__ == "__main__":
    main()
