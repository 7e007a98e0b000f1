"""A synthetic ground-truth grid (``bench/tuning_replay.py``'s format) for the tests:
made up by a queueing formula, marked ``synthetic``, never committed as ground truth."""

from __future__ import annotations

import itertools
import json
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from phalanx.domain.resources import parse_quantity
from phalanx.tuning.load import ERROR_KINDS, LoadResult

CPUS = ["250m", "500m", "1", "2", "4", "8"]
MEMORIES = ["512Mi", "1Gi", "2Gi", "4Gi"]
BATCHES = [1, 4, 16, 32]
RATE = 200.0


def result(*, rate: float, p99: float | None, error_rate: float) -> LoadResult:
    """A LoadResult as a 30 s run at ``rate`` could have measured it."""
    scheduled = int(rate * 30)
    failed = round(scheduled * error_rate)
    errors: dict[str, int] = dict.fromkeys(ERROR_KINDS, 0)
    errors["timeout"] = failed
    ok = scheduled - failed
    return LoadResult(
        rate=rate,
        duration=30.0,
        arrival="uniform",
        scheduled=scheduled,
        sent=scheduled,
        ok=ok,
        errors=errors,
        statuses={},
        window=30.0,
        throughput=ok / 30.0,
        p50=None if p99 is None else p99 / 3,
        p90=None if p99 is None else p99 / 1.5,
        p99=p99,
        max=None if p99 is None else p99 * 1.2,
        error_rate=failed / scheduled,
    )


def measure(cpu: str, memory: str, workers: int, batch: int, rate: float) -> LoadResult | None:
    """A made-up replica: capacity grows with cores (up to its workers) and batching;
    it needs memory per worker and batch (None: it ran out of memory)."""
    cores = parse_quantity(cpu)
    needed = 0.4 + 0.15 * workers * (1 + batch / 16)
    if parse_quantity(memory) / 2**30 < needed:
        return None
    capacity = 60.0 * min(cores, workers) * (1 + 0.35 * math.log2(batch))
    rho = rate / capacity
    if rho >= 1:
        return result(rate=rate, p99=3.0, error_rate=min(0.9, 1 - 1 / rho + 0.05))
    return result(rate=rate, p99=0.01 * (1 + batch / 8) + 0.02 / (1 - rho), error_rate=0.0)


def write_grid(
    path: Path,
    *,
    goal: str = "cheapest",
    cpus: Sequence[str] = CPUS,
    memories: Sequence[str] = MEMORIES,
    workers: int = 4,
    batches: Sequence[int] = BATCHES,
) -> dict[str, Any]:
    """Write the synthetic grid to ``path`` (384 points by default) and return it."""
    points: list[dict[str, Any]] = []
    for cpu, memory, threads, batch in itertools.product(
        cpus, memories, range(1, workers + 1), batches
    ):
        params = {"cpu": cpu, "memory": memory, "WORKERS": threads, "BATCH": batch}
        rates = [RATE] if goal == "cheapest" else [50.0, 100.0, 200.0, 400.0]
        runs = [measure(cpu, memory, threads, batch, rate) for rate in rates]
        if runs[0] is None:
            points.append({"params": params, "results": [], "failed": "out of memory"})
            continue
        results = [r.to_dict() for r in runs if r is not None]
        points.append({"params": params, "results": results, "failed": None})
    data: dict[str, Any] = {
        "format": "phalanx/tuning-grid/v1",
        "synthetic": True,
        "about": "made up by tests/unit/tuning/synthetic.py: not a measurement",
        "space": [
            {"name": "cpu", "category": "resources", "kind": "discrete", "values": list(cpus)},
            {
                "name": "memory",
                "category": "resources",
                "kind": "discrete",
                "values": list(memories),
            },
            {"name": "WORKERS", "category": "env", "kind": "int", "low": 1, "high": workers},
            {"name": "BATCH", "category": "args", "kind": "discrete", "values": list(batches)},
        ],
        "base": {"cpu": "1", "memory": "1Gi"},
        "objective": {"goal": goal, "latencyP99": 0.25, "maxErrorRate": 0.01},
        "load": {"rates": [RATE], "duration": 30, "arrival": "uniform"},
        "points": points,
    }
    path.write_text(json.dumps(data))
    return data
