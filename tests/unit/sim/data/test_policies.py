"""bench/phalanx-no-locality.yaml is phalanx-default less the datalocality plugin, so a
comparison of the two shows what that one plugin is worth."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from phalanx.policies import load_policy

VARIANT = Path(__file__).resolve().parents[4] / "bench" / "phalanx-no-locality.yaml"


def test_the_variant_is_the_default_less_datalocality() -> None:
    default = load_policy("phalanx-default").config
    variant = load_policy(str(VARIANT)).config
    tiers = tuple(tuple(p for p in tier if p.name != "datalocality") for tier in default.tiers)
    assert tiers != default.tiers  # the default places by data locality
    assert variant == replace(default, tiers=tiers)
