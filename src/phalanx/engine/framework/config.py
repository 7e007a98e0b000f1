"""The engine's own, I/O-free description of a scheduler configuration.

``phalanx.spec`` turns a SchedulerConfig document into this value.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True, slots=True, kw_only=True)
class ActionConfig:
    """One action of the session, run in list order."""

    name: str
    args: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True, kw_only=True)
class PluginConfig:
    """One plugin of a tier; ``disabled`` names extension points it must not join."""

    name: str
    args: Mapping[str, Any] = field(default_factory=dict)
    disabled: frozenset[str] = frozenset()


@dataclass(frozen=True, slots=True, kw_only=True)
class SchedulerConfig:
    """Actions in order, and plugins in tiers (earlier tiers are consulted first)."""

    actions: tuple[ActionConfig, ...]
    tiers: tuple[tuple[PluginConfig, ...], ...]

    @staticmethod
    def build(
        actions: list[str], tiers: list[list[str | tuple[str, Mapping[str, Any]]]]
    ) -> SchedulerConfig:
        """Shorthand for tests and presets: names, or (name, args) pairs."""
        return SchedulerConfig(
            actions=tuple(ActionConfig(name=name) for name in actions),
            tiers=tuple(
                tuple(
                    PluginConfig(name=p)
                    if isinstance(p, str)
                    else PluginConfig(name=p[0], args=p[1])
                    for p in tier
                )
                for tier in tiers
            ),
        )


def default_config() -> SchedulerConfig:
    """phalanx's default policy, the same as the shipped ``phalanx-default`` document: gang +
    priority first, then fairness, quota and placement (fgd with memory, balanced,
    spot-like nodes to elastic replicas first, nodes caching a role's datasets first);
    preemption never evicts more than the preemptor will use; elastic jobs grow into idle
    room, those nearest their end weighing most (on several GPU types, type and size
    chosen together by Sia's objective, p = -0.5, none suspended), and when they
    outnumber the GPUs the least served run; among the rest, users who used their queue
    less lately go first and waiting lifts a job (Slurm's multifactor priority); queues'
    per-user limits and budgets before all."""
    tiers = SchedulerConfig.build(
        [],
        [
            [
                "userlimits",
                "priority",
                "gang",
                ("sla", {"waitingTime": 3600}),
                "overcommit",
                (
                    "goodput",
                    {
                        "suspendAbove": 600,
                        "remainingExponent": 0.5,
                        "typedPowerMean": -0.5,
                        "typedRemainingExponent": 0,
                        "typedSuspendAbove": 0,
                    },
                ),
                "compact",
                "fairshare",
            ],
            [
                "drf",
                "predicates",
                "capacity",
                ("fgd", {"memory": True, "relearn": 16, "integerScores": False}),
                ("balanced", {"weight": 0.3}),
                ("reclaimable", {"weight": 2}),
                "datalocality",
            ],
        ],
    ).tiers
    actions = (
        ActionConfig(name="enqueue"),
        ActionConfig(name="allocate"),
        ActionConfig(name="reclaim"),
        ActionConfig(name="preempt", args={"victimBudget": 1}),
        ActionConfig(name="backfill"),
        ActionConfig(name="elastic"),
    )
    return SchedulerConfig(actions=actions, tiers=tiers)
