"""fairshare: Slurm's multifactor job priority, with fair-share that remembers usage.

Each job gets a priority, the weighted sum of four factors, each from 0 to 1 (Slurm's
``sprio`` columns), and jobs with a higher priority go first (``job_order``):

- ``age``: how long since the job was submitted, over ``maxAge`` (capped at 1);
- ``fairShare``: ``2 ** (-U / S)`` for the job's user in its queue (Slurm's classic
  formula), where ``U`` is the user's share of the queue's decayed usage (the largest
  over resources: a user who had half the queue's GPU-time has ``U`` 0.5) and ``S`` the
  user's share of the queue: equal among the users with jobs waiting or running there.
  A user who has used nothing gets 1; one who used exactly their share 0.5; usage
  decays with ``halfLife`` (see ``snapshot.usage``), so a heavy user comes level again;
- ``size``: the job's gang as a share of the cluster (its dominant share), so larger jobs
  go first (Slurm's default; ``favorSmall: true`` turns it round);
- ``priority``: the job's own priority class, scaled between the lowest and highest
  priority of the jobs waiting in the session (all alike: 0).

``weights`` sets each factor's weight (default ``{age: 1, fairShare: 1, size: 0,
priority: 0}``); ``maxAge`` defaults to a day. A job's factors are computed once per
session at its ``now`` and do not change within it. With one user and no size or
priority weight, the order is submission order: what it is without this plugin.
Usage is counted by ``ClusterState`` from each task's placement to its leaving the node;
``halfLife`` (seconds, default 7 days, Slurm's ``PriorityDecayHalfLife``) is read by the
drivers through ``half_life_of`` when they build the state.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

import numpy as np

from phalanx.domain.errors import PluginError
from phalanx.engine.framework.config import SchedulerConfig
from phalanx.engine.framework.plugin import Plugin
from phalanx.engine.framework.session import Session
from phalanx.engine.snapshot import JobInfo, Snapshot, Vector
from phalanx.engine.snapshot.usage import DEFAULT_HALF_LIFE, UserKey, decayed_usage

NAME: Final = "fairshare"
FACTORS: Final = ("age", "fairShare", "size", "priority")
DEFAULT_WEIGHTS: Final = {"age": 1.0, "fairShare": 1.0, "size": 0.0, "priority": 0.0}
DEFAULT_MAX_AGE: Final = 86400.0


@dataclass(frozen=True, slots=True, kw_only=True)
class Factors:
    """One job's priority factors (each 0..1) and their weighted sum."""

    age: float
    fair_share: float
    size: float
    priority: float
    total: float


class Multifactor:
    """One session's view of usage and shares: each job's factors, computed on demand."""

    def __init__(self, plugin: FairsharePlugin, snapshot: Snapshot, now: float) -> None:
        self.plugin = plugin
        self.snapshot = snapshot
        self.now = now
        self._scale = _inverse(snapshot.total)
        priorities = [job.priority for job in snapshot.waiting.values()] or [0]
        self._lowest, self._highest = min(priorities), max(priorities)
        self._usage: dict[UserKey, Vector] | None = None  # read on first need
        self._queue_usage: dict[str, Vector] = {}
        self._active: dict[str, int] = {}
        self._fair: dict[UserKey, float] = {}
        self._found: dict[str, Factors] = {}

    def _read_usage(self) -> dict[UserKey, Vector]:
        """Every user's decayed usage, each queue's total and its active users' count."""
        usage = self._usage = decayed_usage(self.snapshot, self.now)
        for (queue, _), used in usage.items():
            self._queue_usage[queue] = self._queue_usage.get(queue, 0.0) + used
        active: dict[str, set[str]] = {}
        for job in self.snapshot.jobs.values():
            active.setdefault(job.queue.name, set()).add(job.user)
        self._active = {queue: len(users) for queue, users in active.items()}
        return usage

    def fair_share(self, key: UserKey) -> float:
        """``2 ** (-U / S)`` for ``key`` (1 for a user with no usage)."""
        found = self._fair.get(key)
        if found is None:
            usage = self._read_usage() if self._usage is None else self._usage
            used = usage.get(key)
            total = self._queue_usage.get(key[0])
            if used is None or total is None:
                found = 1.0
            else:
                shares = np.divide(used, total, out=np.zeros_like(used), where=total > 0)
                usage_share = float(shares.max()) if shares.size else 0.0
                # rounded, as Slurm's integer priorities are: held usage is summed in
                # whatever order tasks came and went (see ``snapshot.usage``)
                found = round(2.0 ** (-usage_share * self._active.get(key[0], 1)), 6)
            self._fair[key] = found
        return found

    def factors(self, job: JobInfo) -> Factors:
        """The job's factors at the session's time."""
        found = self._found.get(job.name)
        if found is None:
            found = self._found[job.name] = self._compute(job)
        return found

    def _compute(self, job: JobInfo) -> Factors:
        plugin = self.plugin
        age = min(max(self.now - job.creation_time, 0.0) / plugin.max_age, 1.0)
        fair = self.fair_share((job.queue.name, job.user))
        request = job.min_request()
        dominant = float((request * self._scale).max()) if request.size else 0.0
        size = min(dominant, 1.0)
        if plugin.favor_small:
            size = 1.0 - size
        spread = self._highest - self._lowest
        klass = (job.priority - self._lowest) / spread if spread > 0 else 0.0
        klass = min(max(klass, 0.0), 1.0)
        w = plugin.weights
        total = w["age"] * age + w["fairShare"] * fair + w["size"] * size + w["priority"] * klass
        return Factors(age=age, fair_share=fair, size=size, priority=klass, total=total)


def _inverse(total: Vector) -> Vector:
    return np.where(total > 0, 1.0 / np.where(total > 0, total, 1.0), 0.0)


class FairsharePlugin(Plugin[Multifactor]):
    """Orders jobs by their multifactor priority, highest first."""

    name = NAME
    in_line_only = True  # no plugin judges a job by its multifactor priority
    accepted_args = frozenset({"weights", "maxAge", "halfLife", "favorSmall"})

    def __init__(self, args: Mapping[str, Any] | None = None) -> None:
        super().__init__(args)
        raw = self.args.get("weights", {})
        if not isinstance(raw, Mapping) or not all(
            isinstance(v, int | float) and not isinstance(v, bool) and v >= 0 for v in raw.values()
        ):
            raise PluginError(
                f"plugin {NAME!r}: weights must map factors to numbers >= 0, got {raw!r}"
            )
        unknown = sorted(set(raw) - set(FACTORS))
        if unknown:
            raise PluginError(
                f"plugin {NAME!r}: weights has no factor {', '.join(unknown)}; "
                f"the factors are {', '.join(FACTORS)}"
            )
        self.weights = {**DEFAULT_WEIGHTS, **{k: float(v) for k, v in raw.items()}}
        self.max_age = self.number("maxAge", DEFAULT_MAX_AGE, minimum=1.0)
        self.half_life = self.number("halfLife", DEFAULT_HALF_LIFE, minimum=1.0)
        self.favor_small = self.flag("favorSmall", False)

    def open(self, session: Session) -> Multifactor:
        return Multifactor(self, session.snapshot, session.now)

    def job_order(self, state: Multifactor, job: JobInfo) -> float:
        """Higher multifactor priority first."""
        return -state.factors(job).total


def plugin_of(config: SchedulerConfig) -> FairsharePlugin | None:
    """``config``'s fairshare plugin, built from its args; None when it has none."""
    for tier in config.tiers:
        for entry in tier:
            if entry.name == NAME:
                return FairsharePlugin(entry.args)
    return None


def half_life_of(config: SchedulerConfig) -> float:
    """The usage half-life ``config``'s fairshare plugin asks for (the default without one)."""
    plugin = plugin_of(config)
    return DEFAULT_HALF_LIFE if plugin is None else plugin.half_life
