"""What sampling a node's GPUs costs the node: CPU time per sample; prints one JSON object.

    .venv/bin/python bench/telemetry.py [--tasks 8] [--samples 2000] [--interval 5]

On the recorded 8-card node (``h100-sxm-8``, read through the real adapter: the sampler
is given ``RecordedNvml``), it starts TASKS live task process trees (a shell with two
``sleep`` children each), gives task i card i % 8 (more than 8 tasks share cards) and
lists each task's processes on its card with their memory and SM share, as NVML would.
Then it takes SAMPLES samples, as a node agent does each tick: one look at the node's
processes for every task's tree (``process_trees``), then ``GpuSampler.sample``.

CPU time is this process's (``time.process_time``: user + system, all threads).
``cpu_ms_per_sample`` is the whole tick, ``cpu_ms_sample`` and ``cpu_ms_process_trees``
its two parts; ``core_share_at_interval`` is the tick's CPU time over the sampling
interval (the target is under 1% of one core). The recorded NVML answers from memory:
a real driver's NVML calls (about 10 per card) are not in the figure.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import psutil

from phalanx.telemetry.readings import TaskCards
from phalanx.telemetry.recorded import MIB, RecordedNvml
from phalanx.telemetry.sampler import DEFAULT_INTERVAL, GpuSampler, process_tree, process_trees

RECORDING = "h100-sxm-8"
TREE = "sleep 600 & sleep 600 & wait"  # a task: its shell and two children


@contextmanager
def live_tasks(count: int) -> Iterator[list[int]]:
    """``count`` task process trees (three processes each), their roots' pids."""
    roots = [subprocess.Popen(["sh", "-c", TREE], start_new_session=True) for _ in range(count)]
    try:
        for root in roots:  # until each shell has started both children
            for _ in range(1000):
                if len(process_tree(root.pid)) == 3:
                    break
                time.sleep(0.01)
            else:
                raise SystemExit(f"task {root.pid} did not start its children")
        yield [root.pid for root in roots]
    finally:
        for root in roots:
            os.killpg(root.pid, signal.SIGKILL)
            root.wait()


def measure(tasks: int, samples: int, interval: float) -> dict[str, Any]:
    nvml = RecordedNvml.load(RECORDING)
    cards = len(nvml.cards)
    sampler = GpuSampler("bench-node", nvml=nvml, interval=interval)
    with live_tasks(tasks) as roots:
        for n, pids in enumerate(process_trees(roots).values()):
            for pid in sorted(pids):
                nvml.add_process(n % cards, pid, memory=1024 * MIB, utilisation=30.0)
        on_node = len(psutil.pids())

        def tick(now: float) -> tuple[float, float]:
            start = time.process_time()
            trees = process_trees(roots)
            looked = time.process_time()
            given = [
                TaskCards(job=f"job-{n}", task=f"job-{n}-0", gpus=(n % cards,), pids=trees[root])
                for n, root in enumerate(roots)
            ]
            sample = sampler.sample(given, now)
            assert sample is not None and len(sample.tasks) == tasks
            return looked - start, time.process_time() - looked

        for n in range(10):  # NVML opened, psutil's caches warm
            tick(n * interval)
        looking = sampling = 0.0
        for n in range(samples):
            looked, sampled = tick((10 + n) * interval)
            looking += looked
            sampling += sampled
    sampler.close()
    per_sample = (looking + sampling) / samples
    return {
        "bench": "telemetry-sampling",
        "recording": RECORDING,
        "nvml": "recorded (answers from memory; a real driver's calls not included)",
        "cards": cards,
        "tasks": tasks,
        "task_processes": 3 * tasks,
        "node_processes": on_node,
        "samples": samples,
        "cpu_ms_per_sample": round(per_sample * 1000, 3),
        "cpu_ms_sample": round(sampling / samples * 1000, 3),
        "cpu_ms_process_trees": round(looking / samples * 1000, 3),
        "interval_s": interval,
        "core_share_at_interval": round(per_sample / interval, 6),
    }


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=8)
    parser.add_argument("--samples", type=int, default=2000)
    parser.add_argument("--interval", type=float, default=DEFAULT_INTERVAL)
    args = parser.parse_args(argv)
    print(json.dumps(measure(args.tasks, args.samples, args.interval)))


if __name__ == "__main__":
    main(sys.argv[1:])
