"""How many trials the tuner needs, replayed against a measured grid (issue 40).

Every point of a tuning space is measured once, for real, into a ground-truth file;
this script then runs the tuner (``phalanx.tuning.search``) against that file, each
proposal answered from its measured point (no network, no replica), and counts the
trials each run measured before it proposed a spec within 5% of the grid's optimum:
with TPE, GP and random sampling, for a fixed seed and for five seeds. Prints JSON.

    .venv/bin/python bench/tuning_replay.py [--grid bench/data/tuning_grid.json]
        [--samplers cost,tpe,gp,random] [--seed 0] [--seeds 5] [--startup N]

The ground truth, ``bench/data/tuning_grid.json`` (format ``phalanx/tuning-grid/v1``)::

    {
      "format": "phalanx/tuning-grid/v1",
      "synthetic": false,                  # true only for generated test grids
      "about": "what was measured: model, runtime, nodes, date",
      "space": [                           # phalanx.tuning.space.parse_space's entries
        {"name": "cpu", "category": "resources", "kind": "discrete",
         "values": ["500m", "1", "2", "4"]},
        {"name": "WORKERS", "category": "env", "kind": "int", "low": 1, "high": 4}
      ],
      "base": {"cpu": "1", "memory": "2Gi"},   # the replica's resources the space leaves
      "objective": {
        "goal": "cheapest",                # or "throughputPerCost"
        "latencyP99": 0.25,                # seconds; required by cheapest
        "maxErrorRate": 0.01,              # optional
        "prices": {"cpu": 1.0, "memory": 0.125, "gpu": 10.0}   # optional: the defaults
      },
      "load": {"rates": [200], "duration": 30, "arrival": "uniform"},   # as measured
      "points": [                          # every grid point of the space, once
        {"params": {"cpu": "500m", "WORKERS": 1},
         "results": [{...LoadResult.to_dict(), one per rate...}],
         "failed": null}                   # or why the point has no measurement
      ]
    }

A point's value is what ``phalanx.tuning.objective`` makes of its results (cost for
``cheapest``, throughput per cost for ``throughputPerCost``); a point with ``failed``
is told to the search as a failed trial. The optimum is the best feasible value; a run
"reaches" it with its first measured trial whose value is feasible and within 5% of it
(at most 1.05 x a cost, at least 0.95 x a throughput per cost). Trials counted are
measured ones: a proposal that repeats a point already measured costs nothing and is
counted apart (``proposals``). The budget is 20% of the grid's points.

Output::

    {"grid": {"path", "synthetic", "points", "goal", "direction", "optimum": {"params",
              "value"}, "target", "good_points", "budget", "random_expected_trials"},
     "samplers": {"tpe": {"fixed_seed": RUN, "seeds": [RUN x5],
                          "summary": {"runs", "reached", "within_budget",
                                      "median_trials", "max_trials"}},
                  "gp": {...} or {"skipped": "why"}, "random": {...}}}
    RUN = {"seed", "trials" (measured until reached; null: never), "proposals",
           "reached", "within_budget", "found": {"params", "value"}}
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from phalanx.domain.errors import InvalidInput
from phalanx.tuning.load import LoadResult
from phalanx.tuning.objective import (
    CheapestWithinSlo,
    Limits,
    MostThroughputPerCost,
    Objective,
    Prices,
    ceiling_for,
)
from phalanx.tuning.search import SAMPLERS, SamplerName, Search
from phalanx.tuning.space import Space, grid, parse_space

FORMAT = "phalanx/tuning-grid/v1"
DEFAULT_GRID = Path(__file__).resolve().parent / "data" / "tuning_grid.json"
#: A run has reached the optimum at a feasible value this close to it.
TOLERANCE = 0.05
#: The trials a run may measure and still count as quick: this share of the grid.
BUDGET_SHARE = 0.20


@dataclass(frozen=True, slots=True, kw_only=True)
class Point:
    params: Mapping[str, Any]
    value: float | None  # None: the point failed (no measurement)
    feasible: bool


@dataclass(frozen=True, slots=True, kw_only=True)
class Truth:
    """A ground-truth file read: its space, objective, and each point's value."""

    space: Space
    base: Mapping[str, Any]
    objective: Objective
    goal: str
    synthetic: bool
    points: Mapping[tuple[Any, ...], Point]

    def key(self, params: Mapping[str, Any]) -> tuple[Any, ...]:
        return tuple(params[name] for name in self.space.names)

    def optimum(self) -> Point:
        feasible = [p for p in self.points.values() if p.feasible and p.value is not None]
        if not feasible:
            raise InvalidInput(
                "no point of the grid is feasible", field="points", fix="measure a wider space"
            )
        sign = 1.0 if self.objective.direction == "minimize" else -1.0
        return min(feasible, key=lambda p: sign * (p.value or 0.0))

    def good(self, point: Point, optimum: Point) -> bool:
        """Whether ``point`` is feasible and within TOLERANCE of ``optimum``."""
        if not point.feasible or point.value is None or optimum.value is None:
            return False
        if self.objective.direction == "minimize":
            return point.value <= optimum.value * (1 + TOLERANCE)
        return point.value >= optimum.value * (1 - TOLERANCE)


def read_truth(path: Path) -> Truth:
    """Read and check a ground-truth file (the module's format)."""
    data = json.loads(path.read_text())
    if data.get("format") != FORMAT:
        raise InvalidInput(
            f"format {data.get('format')!r}", field="format", fix=f"write format: {FORMAT}"
        )
    space = parse_space(data["space"], field="space")
    spec = data["objective"]
    prices = Prices(**spec.get("prices", {}))
    limits = Limits(p99=spec.get("latencyP99"), error_rate=spec.get("maxErrorRate"))
    base: dict[str, Any] = dict(data.get("base", {}))
    objective: Objective
    if spec.get("goal") == "cheapest":
        ceiling = ceiling_for(space, prices, base)
        objective = CheapestWithinSlo(limits=limits, ceiling=ceiling, prices=prices)
    elif spec.get("goal") == "throughputPerCost":
        objective = MostThroughputPerCost(limits=limits, prices=prices)
    else:
        raise InvalidInput(
            f"goal {spec.get('goal')!r}",
            field="objective.goal",
            fix="cheapest or throughputPerCost",
        )
    points: dict[tuple[Any, ...], Point] = {}
    for i, entry in enumerate(data["points"]):
        params = entry["params"]
        key = tuple(params[name] for name in space.names)
        if entry.get("failed"):
            points[key] = Point(params=params, value=None, feasible=False)
            continue
        results = [
            LoadResult.from_dict(r, field=f"points[{i}].results[{j}]")
            for j, r in enumerate(entry["results"])
        ]
        resources = {**base, **space.by_category(params)["resources"]}
        scored = objective.score(resources, results)
        points[key] = Point(params=params, value=scored.value, feasible=scored.feasible)
    expected = {tuple(p[name] for name in space.names) for p in grid(space)}
    if set(points) != expected:
        raise InvalidInput(
            f"{len(expected - set(points))} grid points missing, "
            f"{len(set(points) - expected)} not on the grid",
            field="points",
            fix="measure every point of the space's grid, once",
        )
    return Truth(
        space=space,
        base=base,
        objective=objective,
        goal=spec["goal"],
        synthetic=bool(data.get("synthetic", False)),
        points=points,
    )


def replay(
    truth: Truth, sampler: SamplerName, seed: int, *, startup: int | None = None
) -> dict[str, Any]:
    """One tuning run answered from ``truth``: the trials it measured until it reached
    the optimum (or until it had measured every point)."""
    objective = truth.objective
    known = isinstance(objective, CheapestWithinSlo)  # a spec's value is its cost

    def cost(params: Mapping[str, Any]) -> float:
        assert isinstance(objective, CheapestWithinSlo)
        return objective.prices.cost({**truth.base, **truth.space.by_category(params)["resources"]})

    def feasible(value: float) -> bool:
        assert isinstance(objective, CheapestWithinSlo)
        return value < objective.ceiling

    search = Search(
        truth.space,
        direction=objective.direction,
        sampler=sampler,
        seed=seed,
        startup_trials=startup,
        cost=cost if known else None,
        feasible=feasible if known else None,
    )
    optimum = truth.optimum()
    size = len(truth.points)
    budget = math.ceil(BUDGET_SHARE * size)
    measured = proposals = 0
    reached: Point | None = None
    # repeats cost nothing but must end: a sampler stuck on measured points stops here
    while measured < size and proposals < 50 * size and not search.exhausted:
        proposal = search.ask()
        proposals += 1
        if not proposal.measure:
            continue
        point = truth.points[truth.key(proposal.params)]
        search.tell(proposal.number, point.value)
        measured += 1
        if truth.good(point, optimum):
            reached = point
            break
    return {
        "seed": seed,
        "trials": measured if reached else None,
        "proposals": proposals,
        "reached": reached is not None,
        "within_budget": reached is not None and measured <= budget,
        "found": None if reached is None else {"params": reached.params, "value": reached.value},
    }


def summary(runs: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    trials = [r["trials"] for r in runs if r["trials"] is not None]
    return {
        "runs": len(runs),
        "reached": len(trials),
        "within_budget": sum(1 for r in runs if r["within_budget"]),
        "median_trials": statistics.median(trials) if trials else None,
        "max_trials": max(trials) if trials else None,
    }


def report(
    truth: Truth,
    path: Path,
    samplers: Sequence[SamplerName],
    *,
    seed: int,
    seeds: int,
    startup: int | None = None,
) -> dict[str, Any]:
    optimum = truth.optimum()
    size = len(truth.points)
    good = sum(1 for p in truth.points.values() if truth.good(p, optimum))
    target = (optimum.value or 0.0) * (
        1 + TOLERANCE if truth.objective.direction == "minimize" else 1 - TOLERANCE
    )
    out: dict[str, Any] = {
        "grid": {
            "path": str(path),
            "synthetic": truth.synthetic,
            "points": size,
            "goal": truth.goal,
            "direction": truth.objective.direction,
            "optimum": {"params": optimum.params, "value": optimum.value},
            "target": target,
            "good_points": good,
            "budget": math.ceil(BUDGET_SHARE * size),
            # drawing points without replacement: the expected draws to the first good one
            "random_expected_trials": (size + 1) / (good + 1),
        },
        "samplers": {},
    }
    for name in samplers:
        try:
            runs = [replay(truth, name, s, startup=startup) for s in range(seed, seed + seeds)]
        except InvalidInput as refused:  # gp without scipy or torch: say so, run the rest
            out["samplers"][name] = {"skipped": str(refused)}
            continue
        out["samplers"][name] = {"fixed_seed": runs[0], "seeds": runs, "summary": summary(runs)}
    return out


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--grid", type=Path, default=DEFAULT_GRID)
    parser.add_argument("--samplers", default="cost,tpe,gp,random")
    parser.add_argument("--seed", type=int, default=0, help="the fixed seed (the first run)")
    parser.add_argument("--seeds", type=int, default=5, help="runs per sampler")
    parser.add_argument("--startup", type=int, default=None, help="random trials first")
    args = parser.parse_args(argv)
    if not args.grid.is_file():
        print(
            f"no ground truth at {args.grid}: measure a grid into it first (format in "
            f"{Path(__file__).name}'s docstring)",
            file=sys.stderr,
        )
        return 2
    samplers: list[SamplerName] = []
    for name in args.samplers.split(","):
        if name not in SAMPLERS:
            parser.error(f"unknown sampler {name!r}: " + ", ".join(SAMPLERS))
        samplers.append(name)
    try:
        truth = read_truth(args.grid)
    except (InvalidInput, KeyError, TypeError, ValueError) as bad:
        print(f"{args.grid}: {bad}", file=sys.stderr)
        return 2
    result = report(
        truth, args.grid, samplers, seed=args.seed, seeds=args.seeds, startup=args.startup
    )
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
