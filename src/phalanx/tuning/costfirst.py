"""The cost-first sampler: for an objective whose value, when a spec meets its SLO, is
that spec's cost, known before it is measured (``CheapestWithinSlo``).

Finding the cheapest spec that meets the SLO is then a search for a boundary, not for a
value: the sampler proposes the grid's points in ascending order of cost, so the first
one measured within the SLO is the cheapest spec there is (as far as the measurements
go), and nothing left can do better: ``finished`` says so, and the search stops there
instead of measuring costlier specs.

Guarantees: every proposal is a grid point not yet proposed (running trials included),
the cheapest of those, ties in a seeded order; when every point was proposed, one at
random (``Search`` then answers it as a repeat). ``finished`` is true once a trial met
the SLO and every point not yet proposed costs at least as much as it.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Mapping
from typing import Any

from optuna.distributions import BaseDistribution
from optuna.samplers import BaseSampler, RandomSampler
from optuna.study import Study
from optuna.trial import FrozenTrial, TrialState

from phalanx.tuning.space import Space, distributions, grid, to_optuna

#: A point's cost, from its parameters (as ``Search`` proposes them).
Cost = Callable[[Mapping[str, Any]], float]
#: Whether a told value is one of a spec within the SLO.
Feasible = Callable[[float], bool]


class CostFirstSampler(BaseSampler):
    """See the module docstring."""

    def __init__(self, space: Space, cost: Cost, feasible: Feasible, *, seed: int = 0) -> None:
        points = grid(space)
        order = list(range(len(points)))
        random.Random(seed).shuffle(order)
        tiebreak = {i: rank for rank, i in enumerate(order)}
        self._distributions = distributions(space)
        self._internal = [to_optuna(space, point) for point in points]
        self._keys = [_key(internal) for internal in self._internal]
        self._costs = [cost(point) for point in points]
        self._order = sorted(range(len(points)), key=lambda i: (self._costs[i], tiebreak[i]))
        self._feasible = feasible
        self._fallback = RandomSampler(seed=seed)

    def finished(self, study: Study) -> bool:
        """Whether a trial met the SLO and no point left costs less than it."""
        index = {key: i for i, key in enumerate(self._keys)}
        best: float | None = None
        for trial in study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,)):
            i = index.get(_key(trial.params))
            if i is not None and trial.value is not None and self._feasible(trial.value):
                best = self._costs[i] if best is None else min(best, self._costs[i])
        if best is None:
            return False
        taken = self._taken(study, None)
        return all(self._costs[i] >= best for i in self._order if self._keys[i] not in taken)

    def infer_relative_search_space(
        self, study: Study, trial: FrozenTrial
    ) -> dict[str, BaseDistribution]:
        return dict(self._distributions)

    def sample_relative(
        self, study: Study, trial: FrozenTrial, search_space: dict[str, BaseDistribution]
    ) -> dict[str, Any]:
        taken = self._taken(study, trial.number)
        left = [i for i in self._order if self._keys[i] not in taken]
        return dict(self._internal[left[0]]) if left else {}  # {}: the fallback picks one

    def sample_independent(
        self,
        study: Study,
        trial: FrozenTrial,
        param_name: str,
        param_distribution: BaseDistribution,
    ) -> Any:
        return self._fallback.sample_independent(study, trial, param_name, param_distribution)

    def _taken(self, study: Study, asking: int | None) -> set[tuple[Any, ...]]:
        """The points proposed already (running trials included), but trial ``asking``'s."""
        return {
            _key(other.params)
            for other in study.get_trials(deepcopy=False)
            if other.number != asking and other.params
        }


def _key(params: Mapping[str, Any]) -> tuple[Any, ...]:
    return tuple(sorted(params.items()))
