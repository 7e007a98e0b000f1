"""What outlives a cycle, declared and owned in one place: ``KeptState``.

Volcano builds its plugins afresh every session; kube-scheduler hands a typed
CycleState to one cycle. phalanx keeps more than one cycle's worth (placement on a
cluster of 100k tasks cannot afford to rebuild what did not change), so what it keeps is
one typed object: a driver that runs many cycles over one snapshot (``ClusterState``)
owns a ``KeptState`` and passes it to every ``run_cycle``; a one-off ``run_cycle`` makes
a fresh one and drops it. Nothing else in the engine (no module global, no plugin or
action instance, no snapshot attribute) carries state from one cycle to the next; the
snapshot itself, and what follows it (``Snapshot.epoch``, change counters, job
watchers), is the cluster's state, not the cycles'.

A ``KeptState`` holds:

- per config lately used (compared by value) with its registry: the plugin and action
  instances it builds (they hold only their validated args) and the node scores per
  task class of its scorers (``ClassScores``);
- slots: values plugins and actions build from the snapshot and reuse, each keyed by its
  builder (a module-level function or class: a declared object, never a lambda or a
  closure, whose identity would change every session) with its arguments, and each
  declaring its ``Lifetime``, which says when it is invalid.

Determinism contract
--------------------

1. Same snapshot + config + ``now`` + kept state => same Decisions, where "same kept
   state" is what the same sequence of cycles and snapshot changes leaves behind.
2. A kept state gives the Decisions a fresh one gives (``run_cycle`` without ``kept``,
   or a snapshot rebuilt from the same jobs), except where history is meant to count:

   a. ``enqueue``: a job refused in an earlier cycle while ``Snapshot.epoch`` has not
      moved since is passed over and given the reason it was given then. Only a change
      that bumps the epoch (a task moving, a job leaving or changing phase, a node
      opening or closing) can make room, so the verdict is the one a fresh evaluation
      reaches; the reason's wording is the earlier one.
   b. ``fgd`` with ``relearn`` > 1: the target workload is the one learnt when the
      window of newest jobs had last changed by ``relearn`` jobs, so it may be up to
      ``relearn - 1`` arrivals or departures old (``phalanx-default`` sets 16). With
      the plugin's default ``relearn`` 1 it is the target a fresh build learns.

3. Reuse never changes a decision otherwise: a ``FIXED`` slot is derived from what never
   changes in a snapshot's life; a ``FOLLOWS`` slot brings itself up to date (from
   ``Snapshot.changed_nodes`` or the jobs ``Snapshot.watch_jobs`` reports) before it is
   read; an ``EPOCH`` slot is built again once ``Snapshot.epoch`` moved (every cycle
   where nobody keeps the epoch). Class scores are scored again on changed nodes and
   dropped when their scorers' basis changes (``framework.scores``).

``tests/property/test_kept_state.py`` checks 1 and 2 over cycles that add and remove
jobs and start and finish tasks, and 2b by a kept state that goes stale on purpose.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, Concatenate, ParamSpec, TypeVar

from phalanx.domain.errors import EngineInvariantError
from phalanx.engine.framework.config import PluginConfig, SchedulerConfig
from phalanx.engine.framework.plugin import Action, Plugin
from phalanx.engine.framework.registry import Registry
from phalanx.engine.framework.scores import ClassScores
from phalanx.engine.snapshot import Snapshot

T = TypeVar("T")
P = ParamSpec("P")

#: configs whose instances and class scores are kept, the most recently used
CONFIGS_KEPT = 4


class Lifetime(StrEnum):
    """How long a slot's value stays valid: its declared invalidation."""

    #: derived from what never changes in the snapshot's life (nodes' capacity, labels,
    #: taints and topology, the queue tree): valid for the snapshot's life
    FIXED = "fixed"
    #: brings itself up to date before it is read (it reads ``Snapshot.changed_nodes``
    #: or watches jobs through ``Snapshot.watch_jobs``): valid for the snapshot's life
    FOLLOWS = "follows"
    #: valid while ``Snapshot.epoch`` is unchanged; never kept where it is None
    EPOCH = "epoch"


@dataclass(frozen=True, slots=True)
class Built:
    """What one config builds with one registry: its plugins (tier, config, instance) in
    tier order, its actions in order, and its scorers' kept class scores."""

    config: SchedulerConfig
    registry: Registry
    plugins: tuple[tuple[int, PluginConfig, Plugin[Any]], ...]
    actions: tuple[Action, ...]
    scores: ClassScores


class KeptState:
    """Everything one snapshot's cycles keep from one to the next (see the module)."""

    def __init__(self, snapshot: Snapshot) -> None:
        self.snapshot = snapshot
        self._built: list[Built] = []  # least recently used first
        self._slots: dict[object, tuple[int | None, object]] = {}

    def built(self, config: SchedulerConfig, registry: Registry) -> Built:
        """The instances and class scores of ``config`` with ``registry``, built on first
        use and kept while the config (an equal one) is among the last used."""
        for found in self._built:
            if found.registry is registry and (found.config is config or found.config == config):
                if found is not self._built[-1]:
                    self._built.remove(found)
                    self._built.append(found)
                return found
        built = Built(
            config,
            registry,
            tuple(
                (tier_index, plugin_config, registry.plugin(plugin_config.name, plugin_config.args))
                for tier_index, tier in enumerate(config.tiers)
                for plugin_config in tier
            ),
            tuple(registry.action(a.name, a.args) for a in config.actions),
            ClassScores(self.snapshot),
        )
        if len(self._built) >= CONFIGS_KEPT:
            del self._built[0]
        self._built.append(built)
        return built

    def get(
        self,
        build: Callable[Concatenate[Snapshot, P], T],
        lifetime: Lifetime,
        *args: P.args,
        **kwargs: P.kwargs,
    ) -> T:
        """The slot of ``build`` with its arguments: ``build(snapshot, *args, **kwargs)``,
        built on first use and again once invalid by its ``lifetime``. ``build`` must be a
        module-level function or a class; its arguments must be hashable."""
        # a slot without arguments is keyed by its builder alone (the common case, asked
        # for per job in a session: no tuple to build and hash)
        key = (build, args, tuple(sorted(kwargs.items()))) if args or kwargs else build
        epoch = self.snapshot.epoch
        found = self._slots.get(key)
        if found is not None and (
            lifetime is not Lifetime.EPOCH or (epoch is not None and found[0] == epoch)
        ):
            return found[1]  # type: ignore[return-value]
        if getattr(build, "__name__", "") == "<lambda>" or getattr(build, "__closure__", None):
            raise EngineInvariantError(
                f"kept state slot {build!r} is a lambda or a closure: its identity changes "
                "every session; declare a module-level function or class"
            )
        value = build(self.snapshot, *args, **kwargs)
        self._slots[key] = (epoch, value)
        return value
