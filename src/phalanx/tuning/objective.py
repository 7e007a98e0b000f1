"""What a trial's measurement is worth: the two objectives of issue 40, priced by the
admin's ``Prices``.

Guarantees:
- ``Prices.cost``: the sum over cpu (per core), memory (per GiB) and gpu (per device) of
  quantity x price; other resources cost nothing. The defaults (cpu 1.0, memory 0.125
  per GiB, gpu 10.0) make 8 GiB cost as much as a core and a GPU as much as ten; the
  unit of money is the admin's, and only ratios matter to a search;
- ``CheapestWithinSlo`` (minimise): a spec is feasible when, in every run, the p99
  latency is at most the SLO and the error rate at most the limit; its value is then
  its cost. An infeasible spec's value is ``ceiling x (1 + violation)``, above every
  feasible cost (``ceiling`` exceeds them all: ``ceiling_for`` gives one), and ordered:
  more violation, a larger value, so that a sampler learns where the boundary lies;
- ``MostThroughputPerCost`` (maximise): a run is within the SLO when it meets the
  limits given (none: every run is); the value is the highest throughput of a run
  within them divided by the cost (>= 0). With no run within them, the value is
  ``-violation`` of the least-violating run: below every feasible value, and ordered;
- ``violation`` is 0 for a run within the limits, else the p99's relative excess over
  the SLO (``p99 / slo - 1``, at most 10, and 10 without an ok request) plus ten times
  the error rate's excess over its limit: it lies in [0, 20], and more of either is more.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Final, Protocol

from phalanx.domain.errors import InvalidInput
from phalanx.domain.resources import CPU, GPU, MEMORY, canonical_amount
from phalanx.tuning.load import LoadResult
from phalanx.tuning.search import Direction
from phalanx.tuning.space import Space, values_of

#: The most a run's latency adds to its violation (and what a run without an ok request adds).
LATENCY_CAP: Final = 10.0
#: What one unit of error-rate excess (all requests failing over the limit) weighs.
ERROR_WEIGHT: Final = 10.0

Quantities = Mapping[str, str | int | float]
Runs = LoadResult | Sequence[LoadResult]


@dataclass(frozen=True, slots=True, kw_only=True)
class Prices:
    """What the admin charges: per core, per GiB of memory, per GPU."""

    cpu: float = 1.0
    memory: float = 0.125
    gpu: float = 10.0

    def __post_init__(self) -> None:
        for name in (CPU, MEMORY, GPU):
            price = getattr(self, name)
            if not (isinstance(price, int | float) and math.isfinite(price) and price >= 0):
                raise InvalidInput(
                    f"{price!r} is not a price", field=f"prices.{name}", fix="a number >= 0"
                )

    def cost(self, resources: Quantities) -> float:
        """The cost of ``resources`` (quantities, as a Job's resources block holds them)."""
        total = 0.0
        for name, value in resources.items():
            amount = canonical_amount(name, value, field=f"resources.{name}")
            if name == CPU:
                total += amount / 1000.0 * self.cpu
            elif name == MEMORY:
                total += amount / 2**30 * self.memory
            elif name == GPU:
                total += amount * self.gpu
        return total


@dataclass(frozen=True, slots=True, kw_only=True)
class Score:
    """A trial's worth: the value a search is told, whether the spec met the limits, its
    cost, the throughput that counted, and a sentence for people."""

    value: float
    feasible: bool
    cost: float
    throughput: float
    reason: str


class Objective(Protocol):
    """What a tuning run optimises: a direction and a value per measured spec."""

    @property
    def direction(self) -> Direction: ...

    def score(self, resources: Quantities, results: Runs) -> Score: ...


@dataclass(frozen=True, slots=True, kw_only=True)
class Limits:
    """The SLO a run is held to: p99 latency in seconds and error rate, each optional."""

    p99: float | None = None
    error_rate: float | None = None

    def __post_init__(self) -> None:
        if self.p99 is not None and not (math.isfinite(self.p99) and self.p99 > 0):
            raise InvalidInput(f"{self.p99!r} s", field="slo.p99", fix="seconds > 0, e.g. 0.25")
        if self.error_rate is not None and not 0 <= self.error_rate < 1:
            raise InvalidInput(
                f"{self.error_rate!r}", field="slo.errorRate", fix="a fraction in [0, 1), e.g. 0.01"
            )

    def violation(self, run: LoadResult) -> float:
        """How far ``run`` is outside the limits (the module's guarantees); 0 within."""
        latency = 0.0
        if self.p99 is not None:
            latency = LATENCY_CAP if run.p99 is None else max(0.0, run.p99 / self.p99 - 1)
        errors = 0.0
        if self.error_rate is not None:
            errors = max(0.0, run.error_rate - self.error_rate)
        return min(latency, LATENCY_CAP) + ERROR_WEIGHT * errors

    def within(self, run: LoadResult) -> bool:
        """Whether ``run`` met every limit given."""
        return self.violation(run) == 0

    def explain(self, run: LoadResult) -> str:
        """Which limit ``run`` broke, or that it met them, in words."""
        broken = []
        if self.p99 is not None and (run.p99 is None or run.p99 > self.p99):
            seen = "no answer" if run.p99 is None else f"p99 {run.p99:.3g} s"
            broken.append(f"{seen} over the SLO {self.p99:g} s")
        if self.error_rate is not None and run.error_rate > self.error_rate:
            broken.append(f"errors {run.error_rate:.2%} over {self.error_rate:.2%}")
        where = f"at {run.rate:g} requests/s"
        return f"{' and '.join(broken)} {where}" if broken else f"within the SLO {where}"


@dataclass(frozen=True, slots=True, kw_only=True)
class CheapestWithinSlo:
    """Objective (a): the cheapest spec whose runs all hold the SLO (see the module)."""

    limits: Limits
    ceiling: float
    prices: Prices = Prices()

    def __post_init__(self) -> None:
        if self.limits.p99 is None:
            raise InvalidInput(
                "the cheapest spec within an SLO needs the SLO",
                field="slo.p99",
                fix="a p99 latency in seconds, e.g. 0.25",
            )
        if not (math.isfinite(self.ceiling) and self.ceiling > 0):
            raise InvalidInput(
                f"{self.ceiling!r}", field="ceiling", fix="ceiling_for(space, prices)"
            )

    @property
    def direction(self) -> Direction:
        return "minimize"

    def score(self, resources: Quantities, results: Runs) -> Score:
        runs = _runs(results)
        cost = self.prices.cost(resources)
        if cost >= self.ceiling:
            raise InvalidInput(
                f"a candidate costs {cost:g}, not below the ceiling {self.ceiling:g}",
                field="ceiling",
                fix="a ceiling above every candidate's cost (ceiling_for gives one)",
            )
        worst = max(runs, key=self.limits.violation)
        violation = self.limits.violation(worst)
        throughput = min(run.throughput for run in runs)
        if violation == 0:
            reason = f"{self.limits.explain(worst)}, costing {cost:.4g}"
            return Score(value=cost, feasible=True, cost=cost, throughput=throughput, reason=reason)
        return Score(
            value=self.ceiling * (1 + violation),
            feasible=False,
            cost=cost,
            throughput=throughput,
            reason=self.limits.explain(worst),
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class MostThroughputPerCost:
    """Objective (b): the most ok requests/s, within the SLO when one is given, per unit
    of cost (see the module)."""

    limits: Limits = Limits()
    prices: Prices = Prices()

    @property
    def direction(self) -> Direction:
        return "maximize"

    def score(self, resources: Quantities, results: Runs) -> Score:
        runs = _runs(results)
        cost = self.prices.cost(resources)
        if cost <= 0:
            raise InvalidInput(
                "a candidate that costs nothing has no throughput per cost",
                field="prices",
                fix="price a resource the candidates use (cpu, memory or gpu)",
            )
        within = [run for run in runs if self.limits.within(run)]
        if within:
            best = max(within, key=lambda run: run.throughput)
            return Score(
                value=best.throughput / cost,
                feasible=True,
                cost=cost,
                throughput=best.throughput,
                reason=f"{best.throughput:.4g} requests/s {self.limits.explain(best)}, "
                f"costing {cost:.4g}",
            )
        least = min(runs, key=self.limits.violation)
        return Score(
            value=-self.limits.violation(least),
            feasible=False,
            cost=cost,
            throughput=0.0,
            reason=self.limits.explain(least),
        )


def ceiling_for(space: Space, prices: Prices, base: Quantities | None = None) -> float:
    """Twice the cost of the dearest candidate of ``space`` (each tuned resource at its
    most, the rest as in ``base``), and at least 1: a ``CheapestWithinSlo`` ceiling."""
    dearest: dict[str, str | int | float] = dict(base or {})
    for p in space:
        if p.category != "resources":
            continue
        if p.kind in ("int", "float"):
            assert p.high is not None
            dearest[p.name] = p.high
        else:
            dearest[p.name] = max(
                (v for v in values_of(p) if isinstance(v, str | int | float)),
                key=lambda v: canonical_amount(p.name, v),
            )
    return max(1.0, 2 * prices.cost(dearest))


def _runs(results: Runs) -> Sequence[LoadResult]:
    runs = (results,) if isinstance(results, LoadResult) else tuple(results)
    if not runs:
        raise InvalidInput("no run to judge", field="results", fix="measure at least one run")
    return runs


@dataclass(frozen=True, slots=True, kw_only=True)
class MostSamplesPerGpu:
    """A training tuning's objective (maximise): the samples/s a job reported, per GPU
    it held (per replica's GPUs x replicas; a job without GPUs: per core instead, so a
    CPU-only job is tuned the same way). A job that reported nothing is no measurement:
    the caller fails its trial."""

    prices: Prices = Prices()

    @property
    def direction(self) -> Direction:
        return "maximize"

    def score_samples(
        self, resources: Quantities, replicas: int, samples_per_second: float
    ) -> Score:
        """The worth of a job of ``replicas`` tasks of ``resources`` each that reported
        ``samples_per_second`` in all."""
        gpus = canonical_amount(GPU, resources.get(GPU, 0)) * replicas
        cores = canonical_amount(CPU, resources.get(CPU, 0)) / 1000.0 * replicas
        per, unit = (gpus, "GPU") if gpus > 0 else (cores, "core")
        if per <= 0 or replicas < 1:
            raise InvalidInput(
                "a trial that holds no GPU and no CPU has no samples per GPU",
                field="resources",
                fix="give the tuned role gpu or cpu",
            )
        value = samples_per_second / per
        cost = self.prices.cost(resources) * replicas
        return Score(
            value=value,
            feasible=True,
            cost=cost,
            throughput=samples_per_second,
            reason=f"{samples_per_second:.4g} samples/s on {per:g} {unit}s: {value:.4g} per {unit}",
        )
