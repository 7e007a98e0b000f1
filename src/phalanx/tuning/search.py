"""An ask/tell search over a space: an optuna study in memory, restorable from the
trial records a caller stores.

Guarantees:
- samplers by name, each seeded: ``tpe`` (the default, optuna's TPESampler), ``gp``
  (GPSampler: it needs scipy and torch, and without them ``Search`` refuses ``gp`` with
  an InvalidInput saying what to install), ``random`` and ``grid`` (every grid point
  once, in a seeded order; InvalidInput for a space without a grid) and ``cost``
  (``costfirst``: the grid in ascending order of a known cost, for the cheapest goal).
  The same space,
  sampler, seed and answers give the same proposals;
- trial numbers are the caller's: unique and ascending, also across ``restore`` (the
  next number follows the highest restored one);
- a point is measured once. When the sampler proposes a point that an earlier trial
  finished at, ``ask`` tells the new trial that trial's outcome at once (its value,
  or its failure) and returns it with ``repeat_of`` set: the caller records it and does
  not measure it again (it still counts as a trial; ask again for a new point). Trials
  run side by side are the exception: a point proposed while another trial at it is
  still pending is measured by both. A point whose trial failed (it crashed, it could not be placed)
  is therefore never measured again either, however often a sampler comes back to it;
  optuna records the failure as FAIL, which the model-based samplers leave out of their
  models;
- ``tell`` takes a trial once: a value (finite) for a measured trial, None (or state
  ``failed``) for one that failed or could not be placed;
- ``restore`` into a new Search rebuilds the study from records (``records()``'s
  form): ``best()`` and every record are as they were before.
"""

from __future__ import annotations

import importlib.util
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Final, Literal, get_args

import optuna
from optuna.samplers import BaseSampler, GPSampler, GridSampler, RandomSampler, TPESampler
from optuna.study import Study
from optuna.trial import FrozenTrial, Trial, TrialState, create_trial

from phalanx.domain.errors import InvalidInput
from phalanx.tuning.costfirst import Cost, CostFirstSampler, Feasible
from phalanx.tuning.space import (
    GRID_LIMIT,
    Space,
    distributions,
    from_optuna,
    grid,
    grid_size,
    to_optuna,
    values_of,
)

Direction = Literal["minimize", "maximize"]
SamplerName = Literal["tpe", "gp", "random", "grid", "cost"]
State = Literal["complete", "failed"]
DIRECTIONS: Final[tuple[Direction, ...]] = get_args(Direction)
SAMPLERS: Final[tuple[SamplerName, ...]] = get_args(SamplerName)
#: What the GP sampler imports when it first proposes.
GP_NEEDS: Final = ("scipy", "torch")

# optuna logs every study made and every trial told at INFO; the caller records trials
# itself, so optuna says only what goes wrong.
optuna.logging.set_verbosity(optuna.logging.WARNING)


@dataclass(frozen=True, slots=True, kw_only=True)
class Proposal:
    """A point to try. With ``repeat_of`` set, an earlier trial finished at this point
    and this one is already told its outcome (``value``, None when it failed): record
    it, do not measure it."""

    number: int
    params: Mapping[str, Any]
    repeat_of: int | None = None
    value: float | None = None

    @property
    def measure(self) -> bool:
        """Whether the caller is to measure this point and ``tell`` the result."""
        return self.repeat_of is None


@dataclass(frozen=True, slots=True, kw_only=True)
class TrialRecord:
    """A finished trial, as a caller stores it and ``restore`` reads it back."""

    number: int
    params: Mapping[str, Any]
    state: State
    value: float | None = None
    reason: str | None = None
    repeat_of: int | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "number": self.number,
            "params": dict(self.params),
            "state": self.state,
            "value": self.value,
            "reason": self.reason,
            "repeat_of": self.repeat_of,
        }

    @staticmethod
    def from_dict(data: Mapping[str, Any]) -> TrialRecord:
        try:
            return TrialRecord(
                number=int(data["number"]),
                params=dict(data["params"]),
                state=data["state"],
                value=None if data.get("value") is None else float(data["value"]),
                reason=data.get("reason"),
                repeat_of=None if data.get("repeat_of") is None else int(data["repeat_of"]),
            )
        except (KeyError, TypeError, ValueError) as bad:
            raise InvalidInput(
                f"not a trial record ({bad!r})", field="records", fix="write TrialRecord.to_dict()"
            ) from None


class Search:
    """Proposals over ``space`` toward the ``direction`` of a value (module guarantees)."""

    def __init__(
        self,
        space: Space,
        *,
        direction: Direction = "minimize",
        sampler: SamplerName = "tpe",
        seed: int = 0,
        startup_trials: int | None = None,
        cost: Cost | None = None,
        feasible: Feasible | None = None,
    ) -> None:
        if direction not in DIRECTIONS:
            raise InvalidInput(
                f"unknown direction {direction!r}", field="direction", fix=" or ".join(DIRECTIONS)
            )
        self.space = space
        self.direction: Direction = direction
        self.sampler: SamplerName = sampler
        self._distributions = distributions(space)
        self._study: Study = optuna.create_study(
            direction=direction,
            sampler=_sampler(space, sampler, seed, startup_trials, cost, feasible),
        )
        self._pending: dict[int, Trial] = {}
        self._records: dict[int, TrialRecord] = {}
        self._first_at: dict[tuple[Any, ...], int] = {}  # a point -> its first finished trial
        self._next = 0
        self._grid = grid_size(space)

    def ask(self) -> Proposal:
        """The next point (see the module's guarantees for repeats)."""
        trial = self._study.ask(self._distributions)
        params = from_optuna(self.space, trial.params)
        number = self._next
        self._next += 1
        earlier = self._first_at.get(self._key(params))
        if earlier is None:
            self._pending[number] = trial
            return Proposal(number=number, params=params)
        was = self._records[earlier]
        if was.state == "complete":
            self._study.tell(trial, was.value)
        else:
            self._study.tell(trial, state=TrialState.FAIL)
        self._records[number] = TrialRecord(
            number=number,
            params=params,
            state=was.state,
            value=was.value,
            reason=was.reason,
            repeat_of=earlier,
        )
        return Proposal(number=number, params=params, repeat_of=earlier, value=was.value)

    def tell(
        self,
        number: int,
        value: float | None,
        state: State = "complete",
        *,
        reason: str | None = None,
    ) -> TrialRecord:
        """Record trial ``number``'s outcome: ``value``, or a failure (``value`` None or
        ``state`` failed, with a ``reason`` for people). Returns its record."""
        trial = self._pending.get(number)
        if trial is None:
            told = "already told" if number in self._records else "never proposed"
            raise InvalidInput(
                f"trial {number} was {told}", field="number", fix="tell each proposal once"
            )
        failed = value is None or state == "failed"
        if not failed and not (isinstance(value, int | float) and math.isfinite(value)):
            raise InvalidInput(
                f"{value!r} is not a finite value",
                field="value",
                fix="tell None (a failed trial) when there is no measurement",
            )
        del self._pending[number]
        if failed:
            self._study.tell(trial, state=TrialState.FAIL)
        else:
            self._study.tell(trial, value)
        record = TrialRecord(
            number=number,
            params=from_optuna(self.space, trial.params),
            state="failed" if failed else "complete",
            value=None if failed else value,
            reason=reason,
        )
        self._keep(record)
        return record

    def restore(self, records: Iterable[TrialRecord]) -> None:
        """Rebuild a new Search's study from stored records (any order)."""
        if self._records or self._pending:
            raise InvalidInput(
                "this search has trials already",
                field="records",
                fix="restore into a new Search, before its first ask",
            )
        ordered = sorted(records, key=lambda r: r.number)
        numbers = [r.number for r in ordered]
        if len(set(numbers)) != len(numbers):
            raise InvalidInput(
                "two records have one number", field="records", fix="store each trial once"
            )
        for record in ordered:
            self._study.add_trial(self._frozen(record))
            self._keep(record)
        self._next = numbers[-1] + 1 if numbers else 0

    def best(self) -> TrialRecord | None:
        """The complete trial with the best value (the earliest among equals), or None."""
        complete = [r for r in self._records.values() if r.state == "complete"]
        if not complete:
            return None
        sign = 1.0 if self.direction == "minimize" else -1.0
        return min(complete, key=lambda r: (sign * _finite(r.value), r.number))

    def records(self) -> list[TrialRecord]:
        """Every finished trial, by number (what ``restore`` takes)."""
        return [self._records[n] for n in sorted(self._records)]

    @property
    def pending(self) -> tuple[int, ...]:
        """Trials proposed and not yet told."""
        return tuple(sorted(self._pending))

    @property
    def exhausted(self) -> bool:
        """Whether every point of a space with a grid has a finished trial (never, for a
        space without one), or the cost sampler found the cheapest spec within the SLO:
        nothing new is left to measure."""
        sampler = self._study.sampler
        if isinstance(sampler, CostFirstSampler) and sampler.finished(self._study):
            return True  # the cheapest spec within the SLO is found: the rest cost more
        return self._grid is not None and len(self._first_at) >= self._grid

    def _keep(self, record: TrialRecord) -> None:
        self._records[record.number] = record
        self._first_at.setdefault(self._key(record.params), record.number)

    def _key(self, params: Mapping[str, Any]) -> tuple[Any, ...]:
        return tuple(params[name] for name in self.space.names)

    def _frozen(self, record: TrialRecord) -> FrozenTrial:
        where = f"records[{record.number}]"
        params = to_optuna(self.space, record.params, field=f"{where}.params")
        if record.state == "complete":
            if record.value is None or not math.isfinite(record.value):
                raise InvalidInput(
                    f"a complete trial with value {record.value!r}",
                    field=f"{where}.value",
                    fix="a finite value, or state failed",
                )
            return create_trial(
                state=TrialState.COMPLETE,
                value=record.value,
                params=params,
                distributions=self._distributions,
            )
        if record.state == "failed":
            return create_trial(
                state=TrialState.FAIL, params=params, distributions=self._distributions
            )
        raise InvalidInput(
            f"unknown state {record.state!r}", field=f"{where}.state", fix="complete or failed"
        )


def _finite(value: float | None) -> float:
    assert value is not None  # a complete record has its value
    return value


class _AskTellGrid(GridSampler):
    """optuna's GridSampler for ask/tell: its ``after_trial`` stops an ``optimize`` loop
    once the grid is done, and raises outside one (optuna 5.0); ``Search.exhausted``
    says when the grid is done instead."""

    def after_trial(
        self,
        study: Study,
        trial: FrozenTrial,
        state: TrialState,
        values: Any,
    ) -> None:
        return None


def _sampler(
    space: Space,
    name: SamplerName,
    seed: int,
    startup_trials: int | None,
    cost: Cost | None = None,
    feasible: Feasible | None = None,
) -> BaseSampler:
    startup = 10 if startup_trials is None else startup_trials
    if name == "cost":
        if cost is None or feasible is None:
            raise InvalidInput(
                "the cost sampler needs each spec's cost and the objective's SLO",
                field="sampler",
                fix="use it with the cheapest goal, or another sampler",
            )
        return CostFirstSampler(space, cost, feasible, seed=seed)
    if name == "tpe":
        return TPESampler(seed=seed, n_startup_trials=startup)
    if name == "gp":
        missing = [m for m in GP_NEEDS if importlib.util.find_spec(m) is None]
        if missing:
            raise InvalidInput(
                f"the gp sampler needs {' and '.join(missing)}, not installed here",
                field="sampler",
                fix=f"pip install {' '.join(GP_NEEDS)} (the CPU build of torch is enough), "
                "or use the tpe sampler",
            )
        return GPSampler(seed=seed, n_startup_trials=startup)
    if name == "random":
        return RandomSampler(seed=seed)
    if name == "grid":
        size = grid_size(space)
        if size is None or size > GRID_LIMIT:
            grid(space)  # raises the InvalidInput that says why (no grid, or too large)
        columns = {  # in optuna's terms: a discrete parameter's values are its ranks
            p.name: list(range(len(p.values))) if p.kind == "discrete" else values_of(p)
            for p in space
        }
        return _AskTellGrid(columns, seed=seed)
    raise InvalidInput(f"unknown sampler {name!r}", field="sampler", fix=" or ".join(SAMPLERS))
