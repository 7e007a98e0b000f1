"""The ``SchedulerConfig`` document: the ordered actions and the plugin tiers of a session.

Guarantees: there is at least one action; action names are unique; a plugin
appears at most once over all tiers. ``to_engine()`` returns the engine's plain,
I/O-free ``SchedulerConfig``; whether each name is a known action or plugin is the
engine registry's to decide.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any, Literal, Self

from pydantic import BeforeValidator, Field, model_validator

from phalanx.spec.common import API_VERSION, Metadata, PluginName, SpecModel, located

if TYPE_CHECKING:
    from phalanx.engine.framework.config import SchedulerConfig


def _name_only(value: Any) -> Any:
    """An action may be written as its bare name."""
    return {"name": value} if isinstance(value, str) else value


class ActionSpec(SpecModel):
    """One action of the session, run in list order: ``enqueue`` or ``{name, args}``."""

    name: PluginName
    """The action: enqueue, allocate, reclaim, preempt, backfill (or a plugin-provided one)."""
    args: dict[str, Any] = Field(default_factory=dict)
    """The action's arguments."""


class PluginSpec(SpecModel):
    """A plugin of a tier, its arguments and the extension points it must not join."""

    name: PluginName
    """The plugin (priority, gang, drf, proportion, capacity, predicates, binpack, fgd ...)."""
    args: dict[str, Any] = Field(default_factory=dict)
    """The plugin's arguments (e.g. binpack's weights per resource)."""
    disable: list[PluginName] = Field(default_factory=list)
    """Extension points the plugin must not join (e.g. its job order)."""


class TierSpec(SpecModel):
    """Plugins whose answers are combined before the next tier is asked."""

    plugins: Annotated[list[PluginSpec], Field(min_length=1)]
    """The plugins of the tier; their answers are combined before the next tier is asked."""


class SchedulerConfigSpec(SpecModel):
    """``spec`` of a SchedulerConfig."""

    actions: Annotated[
        list[Annotated[ActionSpec, BeforeValidator(_name_only)]], Field(min_length=1)
    ]
    """The actions of each session, run in this order."""
    tiers: list[TierSpec] = Field(default_factory=list)
    """The plugins, in tiers."""

    @model_validator(mode="after")
    def _unique_names(self) -> Self:
        seen: set[str] = set()
        for i, action in enumerate(self.actions):
            if action.name in seen:
                raise located(
                    f"action {action.name!r} is listed twice",
                    "list every action once, in the order it should run",
                    at=("actions", i),
                )
            seen.add(action.name)
        seen.clear()
        for t, tier in enumerate(self.tiers):
            for p, plugin in enumerate(tier.plugins):
                if plugin.name in seen:
                    raise located(
                        f"plugin {plugin.name!r} appears more than once over the tiers",
                        "keep it in one tier only",
                        at=("tiers", t, "plugins", p, "name"),
                    )
                seen.add(plugin.name)
        return self


class SchedulerConfigDocument(SpecModel):
    """``apiVersion: phalanx/v1, kind: SchedulerConfig``."""

    api_version: Literal["phalanx/v1"] = API_VERSION
    """Always phalanx/v1."""
    kind: Literal["SchedulerConfig"] = "SchedulerConfig"
    """Always SchedulerConfig."""
    metadata: Metadata
    """The policy's name."""
    spec: SchedulerConfigSpec
    """Its actions and plugin tiers."""

    def to_engine(self) -> SchedulerConfig:
        """The engine's ``SchedulerConfig``: same order, arguments copied."""
        # Imported here so that documents load without the engine package.
        from phalanx.engine.framework.config import (  # noqa: PLC0415
            ActionConfig,
            PluginConfig,
            SchedulerConfig,
        )

        return SchedulerConfig(
            actions=tuple(ActionConfig(name=a.name, args=dict(a.args)) for a in self.spec.actions),
            tiers=tuple(
                tuple(
                    PluginConfig(
                        name=p.name,
                        args=dict(p.args),
                        disabled=frozenset(p.disable),
                    )
                    for p in tier.plugins
                )
                for tier in self.spec.tiers
            ),
        )
