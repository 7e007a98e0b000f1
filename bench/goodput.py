"""Micro-benchmark of the goodput speedup function (engine/goodput), as a scheduler calls it.

    .venv/bin/python bench/goodput.py [--jobs 100] [--gpus 64] [--per-node 4] [--seed 0]

Builds ``--jobs`` goodput models (random throughput parameters and gradient statistics
around those of Pollux's six applications, their batch limits), then times, over every
allocation of up to ``--gpus`` GPUs on nodes of ``--per-node`` (nodes from
ceil(replicas / per_node) to min(replicas, gpus / per_node)):

- build: a ``Speedup`` per job (its one-GPU baseline);
- cold: the first call per job with all allocations (each distinct one optimised once);
- warm: the same call again (answered from the memo);
- scattered: 100 calls per job of 64 random allocations each (a genetic search's pattern).

Prints one JSON object.
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np

from phalanx.engine.goodput import BatchLimits, GoodputModel, GradParams, PerfParams, Speedup

#: (init batch, max batch, min local batch, max local batch) of Pollux's applications.
APPS = (
    (12, 384, 4, 12),  # bert
    (128, 4096, 32, 1024),  # cifar10
    (20, 640, 10, 80),  # deepspeech2
    (200, 12800, 20, 200),  # imagenet
    (256, 32768, 32, 32768),  # ncf
    (8, 512, 4, 8),  # yolov3
)


def make_jobs(count: int, seed: int) -> list[tuple[GoodputModel, BatchLimits]]:
    rng = np.random.default_rng(seed)
    jobs = []
    for i in range(count):
        init, top, low, high = APPS[i % len(APPS)]
        a = rng.lognormal(mean=np.log([0.05, 0.002, 0.1, 0.01, 0.02, 0.002]), sigma=0.5)
        perf = PerfParams.from_array([*a, rng.uniform(1.0, 3.0)])
        grad = GradParams(sqr=float(rng.lognormal(0, 1)), var=float(rng.lognormal(2, 1)))
        limits = BatchLimits(max_batch_size=top, min_atomic_bsz=low, max_atomic_bsz=high)
        jobs.append((GoodputModel(perf=perf, grad=grad, init_batch_size=init), limits))
    return jobs


def allocations(gpus: int, per_node: int) -> tuple[np.ndarray, np.ndarray]:
    nodes_max = gpus // per_node
    pairs = [
        (n, r) for r in range(1, gpus + 1) for n in range(-(-r // per_node), min(r, nodes_max) + 1)
    ]
    table = np.array(pairs, dtype=np.int64)
    return table[:, 0], table[:, 1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=100)
    parser.add_argument("--gpus", type=int, default=64)
    parser.add_argument("--per-node", type=int, default=4)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    jobs = make_jobs(args.jobs, args.seed)
    nodes, replicas = allocations(args.gpus, args.per_node)

    start = time.perf_counter()
    speedups = [Speedup(model, limits) for model, limits in jobs]
    build = time.perf_counter() - start

    start = time.perf_counter()
    cold = [s(nodes, replicas) for s in speedups]
    cold_s = time.perf_counter() - start

    start = time.perf_counter()
    warm = [s(nodes, replicas) for s in speedups]
    warm_s = time.perf_counter() - start
    assert all(np.array_equal(a, b) for a, b in zip(cold, warm, strict=True))

    rng = np.random.default_rng(args.seed)
    picks = rng.integers(0, len(nodes), size=(len(speedups), 100, 64))
    start = time.perf_counter()
    for s, rows in zip(speedups, picks, strict=True):
        for row in rows:
            s(nodes[row], replicas[row])
    scattered_s = time.perf_counter() - start

    evaluated = len(speedups) * len(nodes)
    print(
        json.dumps(
            {
                "jobs": len(speedups),
                "allocations_per_job": len(nodes),
                "build_ms": round(build * 1e3, 2),
                "cold_ms": round(cold_s * 1e3, 2),
                "cold_us_per_allocation": round(cold_s / evaluated * 1e6, 3),
                "warm_ms": round(warm_s * 1e3, 2),
                "warm_us_per_allocation": round(warm_s / evaluated * 1e6, 3),
                "scattered_calls": int(picks.shape[0] * picks.shape[1]),
                "scattered_us_per_call": round(scattered_s / picks[..., 0].size * 1e6, 2),
                "max_speedup": round(float(max(c.max() for c in cold)), 2),
            }
        )
    )


if __name__ == "__main__":
    main()
