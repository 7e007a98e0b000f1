"""Registries are values: duplicates refused, unknown names explained, entry points loaded."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest

from phalanx.domain.errors import PluginError
from phalanx.engine.cycle import builtin_registry
from phalanx.engine.framework.plugin import Plugin
from phalanx.engine.plugins.gang import GangPlugin


class _Extra(Plugin):
    name = "extra"


@dataclass
class _Entry:
    name: str
    target: Any

    def load(self) -> Any:
        if isinstance(self.target, Exception):
            raise self.target
        return self.target


def test_builtin_registry_knows_every_shipped_name() -> None:
    registry = builtin_registry()
    assert set(registry.action_names) == {
        "enqueue",
        "allocate",
        "reclaim",
        "preempt",
        "backfill",
        "elastic",
    }
    assert {
        "priority",
        "gang",
        "drf",
        "proportion",
        "capacity",
        "overcommit",
        "predicates",
        "binpack",
        "spread",
        "sla",
    } <= set(registry.plugin_names)


def test_duplicates_are_refused() -> None:
    with pytest.raises(PluginError, match="already registered"):
        builtin_registry().with_plugin(GangPlugin)


def test_unknown_names_list_the_known_ones() -> None:
    with pytest.raises(PluginError, match=r"unknown plugin 'gnag'.*gang"):
        builtin_registry().plugin("gnag", {})


def test_unknown_plugin_args_are_refused() -> None:
    with pytest.raises(PluginError, match="does not take"):
        builtin_registry().plugin("gang", {"minMember": 3})


def test_entry_points_add_third_party_plugins() -> None:
    registry = builtin_registry().with_entry_points([_Entry("extra", _Extra)])
    assert "extra" in registry.plugin_names
    assert isinstance(registry.plugin("extra", {}), _Extra)


@pytest.mark.parametrize("target", [ImportError("no module named x"), object, GangPlugin])
def test_broken_or_clashing_entry_points_are_refused_by_name(target: Any) -> None:
    with pytest.raises(PluginError):
        builtin_registry().with_entry_points([_Entry("bad", target)])


def test_check_refuses_bad_configs_before_any_session() -> None:
    from phalanx.engine import SchedulerConfig, default_config

    registry = builtin_registry()
    registry.check(default_config())
    with pytest.raises(PluginError, match="unknown action 'alocate'"):
        registry.check(SchedulerConfig.build(["alocate"], [["gang"]]))
    with pytest.raises(PluginError, match=r"binpack.*weight"):
        registry.check(SchedulerConfig.build(["allocate"], [[("binpack", {"weight": "high"})]]))


def test_action_args_and_disabled_points_are_checked() -> None:
    from phalanx.engine import ActionConfig, PluginConfig, SchedulerConfig

    registry = builtin_registry()
    bad_factor = SchedulerConfig(
        actions=(ActionConfig(name="enqueue", args={"overcommitFactor": "lots"}),), tiers=()
    )
    with pytest.raises(PluginError, match="overcommitFactor"):
        registry.check(bad_factor)
    typo = SchedulerConfig(
        actions=(ActionConfig(name="backfill", args={"maxReservation": 2}),), tiers=()
    )
    with pytest.raises(PluginError, match="accepts: maxReservations"):
        registry.check(typo)
    bad_point = SchedulerConfig(
        actions=(ActionConfig(name="allocate"),),
        tiers=((PluginConfig(name="drf", disabled=frozenset({"job_ordr"})),),),
    )
    with pytest.raises(PluginError, match="job_ordr"):
        registry.check(bad_point)


def test_the_engine_default_is_the_shipped_phalanx_default_policy() -> None:
    from phalanx.engine import default_config
    from phalanx.policies import load_policy

    assert load_policy("phalanx-default").config == default_config()
