"""KeptState: slots keyed by a declared builder and its arguments, invalid by lifetime."""

from __future__ import annotations

import pytest

from phalanx.domain.errors import EngineInvariantError
from phalanx.engine import Snapshot, default_config
from phalanx.engine.cycle import builtin_registry
from phalanx.engine.framework.kept import KeptState, Lifetime
from tests.builders import make_nodes, make_queue


def _names(snapshot: Snapshot, prefix: str = "") -> list[str]:
    return [prefix + node.name for node in snapshot.nodes]


def _snapshot() -> Snapshot:
    return Snapshot.build(nodes=make_nodes(2), queues=[make_queue()])


def test_a_slot_is_built_once_per_builder_and_arguments() -> None:
    kept = KeptState(_snapshot())
    first = kept.get(_names, Lifetime.FIXED)
    assert kept.get(_names, Lifetime.FIXED) is first == ["n0", "n1"]
    assert kept.get(_names, Lifetime.FIXED, "x-") == ["x-n0", "x-n1"]
    assert kept.get(_names, Lifetime.FIXED, prefix="x-") is not first


def test_an_epoch_slot_is_built_again_once_the_epoch_moves_and_never_kept_without_one() -> None:
    snapshot = _snapshot()
    kept = KeptState(snapshot)
    assert kept.get(_names, Lifetime.EPOCH) is not kept.get(_names, Lifetime.EPOCH)  # no epoch
    snapshot.epoch = 0
    first = kept.get(_names, Lifetime.EPOCH)
    assert kept.get(_names, Lifetime.EPOCH) is first
    snapshot.epoch = 1
    assert kept.get(_names, Lifetime.EPOCH) is not first


def test_a_lambda_is_no_slot() -> None:
    kept = KeptState(_snapshot())
    with pytest.raises(EngineInvariantError, match="lambda or a closure"):
        kept.get(lambda s: len(s.nodes), Lifetime.FIXED)


def test_a_config_builds_its_instances_once_compared_by_value() -> None:
    kept = KeptState(_snapshot())
    built = kept.built(default_config(), builtin_registry())
    assert kept.built(default_config(), builtin_registry()) is built  # an equal config
    assert built.scores.snapshot is kept.snapshot
