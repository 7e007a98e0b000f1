"""Queue shares are a value the queue-share plugin publishes on the session."""

from __future__ import annotations

import numpy as np
import pytest

from phalanx.domain.errors import PluginError
from phalanx.engine import Snapshot
from phalanx.engine.cards import WHOLE
from phalanx.engine.cycle import open_session
from tests.builders import config, make_job, make_nodes, make_queue, res


def _snapshot() -> Snapshot:
    queues = [
        make_queue("a", deserved=res(gpu=6), guarantee=res(gpu=2)),
        make_queue("b", capability=res(gpu=8)),
    ]
    return Snapshot.build(nodes=make_nodes(2), queues=queues, jobs=[make_job("j", queue="a")])


@pytest.mark.parametrize("plugin", ["capacity", "proportion"])
def test_the_share_plugin_publishes_every_queues_shares_as_it_set_them(plugin: str) -> None:
    snapshot = _snapshot()
    session = open_session(snapshot, config(["allocate"], ["gang", plugin]), now=0.0)
    shares = session.shares
    assert shares is not None and shares.plugin == plugin
    assert set(shares.deserved) == set(snapshot.queues) == set(shares.capability)
    for name, queue in snapshot.queues.items():
        assert np.array_equal(shares.deserved[name], queue.deserved)
        assert np.array_equal(shares.guarantee[name], queue.guarantee)
        assert np.array_equal(shares.capability[name], queue.capability)
    gpu = snapshot.dim["gpu"]
    if plugin == "capacity":
        assert shares.deserved["a"][gpu] == 6 * WHOLE  # as written (engine units)
    with pytest.raises(ValueError, match="read-only"):
        shares.deserved["a"][gpu] = 0.0  # a value: nobody changes it behind the session


def test_without_a_share_plugin_no_queue_has_shares() -> None:
    session = open_session(_snapshot(), config(["allocate"], ["gang", "drf"]), now=0.0)
    assert session.shares is None


def test_two_share_plugins_are_refused_by_name() -> None:
    with pytest.raises(PluginError, match="'capacity' and 'proportion'"):
        open_session(_snapshot(), config(["allocate"], ["capacity", "proportion"]), now=0.0)
