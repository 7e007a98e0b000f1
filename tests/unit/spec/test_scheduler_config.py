"""SchedulerConfig documents: action and plugin forms, and the engine's config value."""

from __future__ import annotations

import textwrap

import pytest

from phalanx.spec import SchedulerConfigDocument, load_documents

TEXT = """\
    apiVersion: phalanx/v1
    kind: SchedulerConfig
    metadata: {name: custom}
    spec:
      actions:
      - enqueue
      - {name: allocate, args: {maxRounds: 3}}
      tiers:
      - plugins:
        - {name: gang, disable: [job_order]}
        - {name: binpack, args: {weights: {gpu: 5}}}
    """


def load_config() -> SchedulerConfigDocument:
    (document,) = load_documents(textwrap.dedent(TEXT))
    assert isinstance(document, SchedulerConfigDocument)
    return document


def test_actions_may_be_names_or_mappings() -> None:
    spec = load_config().spec
    assert [(a.name, a.args) for a in spec.actions] == [
        ("enqueue", {}),
        ("allocate", {"maxRounds": 3}),
    ]
    assert spec.tiers[0].plugins[0].disable == ["job_order"]


def test_to_engine_keeps_order_args_and_disabled_points() -> None:
    config_module = pytest.importorskip("phalanx.engine.framework.config")
    config = load_config().to_engine()
    assert config == config_module.SchedulerConfig(
        actions=(
            config_module.ActionConfig(name="enqueue"),
            config_module.ActionConfig(name="allocate", args={"maxRounds": 3}),
        ),
        tiers=(
            (
                config_module.PluginConfig(name="gang", disabled=frozenset({"job_order"})),
                config_module.PluginConfig(name="binpack", args={"weights": {"gpu": 5}}),
            ),
        ),
    )
