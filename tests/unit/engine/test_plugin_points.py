"""A plugin provides the extension points its class defines methods for, found once per
class; a session registers them in tier order, with the class's options, without the
points the config disables or the plugin skips for that session."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pytest
from numpy.typing import NDArray

from phalanx.domain.errors import PluginError
from phalanx.engine import SchedulerConfig, Snapshot
from phalanx.engine.cycle import builtin_registry, open_session
from phalanx.engine.framework.config import ActionConfig, PluginConfig
from phalanx.engine.framework.extension import POINT_NAMES
from phalanx.engine.framework.plugin import Plugin, ScorePromises
from phalanx.engine.framework.session import Session
from phalanx.engine.plugins.gang import GangPlugin
from phalanx.engine.plugins.shares.capacity import CapacityPlugin
from phalanx.engine.plugins.shares.proportion import ProportionPlugin
from phalanx.engine.snapshot import JobInfo, TaskInfo
from tests.builders import make_job, make_nodes, make_queue


class _Probe(Plugin[list[str]]):
    """Orders jobs, scores nodes (with a look-ahead) and filters victims; skips its job
    order when told to through its args."""

    name = "probe"
    accepted_args = frozenset({"weight", "skip"})
    default_weight = 3.0
    promises = ScorePromises(fills=True)
    judges_each = True

    def open(self, session: Session) -> list[str]:
        return ["opened"]

    def skipped(self, state: list[str]) -> tuple[str, ...]:
        return ("job_order",) if self.args.get("skip") else ()

    def job_order(self, state: list[str], job: JobInfo) -> str:
        state.append(job.name)
        return job.name

    def node_score(
        self, state: list[str], task: TaskInfo, nodes: NDArray[np.intp]
    ) -> NDArray[np.float64]:
        return np.zeros(len(nodes))

    def score_ahead(
        self, state: list[str], task: TaskInfo, node: int, count: int
    ) -> NDArray[np.float64]:
        return np.zeros(count)

    def preemptable(
        self, state: list[str], preemptor: TaskInfo, candidates: Sequence[TaskInfo]
    ) -> Sequence[TaskInfo]:
        return candidates


def _session(plugin: PluginConfig) -> Session:
    snapshot = Snapshot.build(nodes=make_nodes(2), queues=[make_queue()], jobs=[make_job("a")])
    config = SchedulerConfig(actions=(ActionConfig(name="allocate"),), tiers=((plugin,),))
    return open_session(snapshot, config, now=0.0, registry=builtin_registry().with_plugin(_Probe))


def test_a_class_provides_the_points_it_defines_in_points_order() -> None:
    assert _Probe.provides == ("job_order", "preemptable", "node_score")
    assert _Probe.looks_ahead and not _Probe.has_basis
    assert GangPlugin.provides == (
        "job_order",
        "victim_order",
        "job_valid",
        "job_ready",
        "job_pipelined",
    )
    assert "overused" in ProportionPlugin.provides
    assert "overused" not in CapacityPlugin.provides
    every = type("Every", (Plugin,), dict.fromkeys(POINT_NAMES, lambda *_: None))
    assert every.provides == POINT_NAMES


def test_a_session_registers_the_points_with_the_class_options() -> None:
    session = _session(PluginConfig(name="probe"))
    points = session.points
    assert points.job_order.plugins == ("probe",)
    assert points.preemptable.in_any_order
    (_, _, scorer) = points.node_score._entries[0]
    assert (scorer.weight, scorer.fills, scorer.ahead is not None) == (3.0, True, True)
    job = session.snapshot.jobs["a"]
    assert points.job_order.key(job) == ("a",)


def test_disabled_and_skipped_points_are_left_out_and_args_weigh() -> None:
    disabled = _session(
        PluginConfig(name="probe", args={"weight": 2}, disabled=frozenset({"preemptable"}))
    )
    assert not disabled.points.preemptable
    assert disabled.points.node_score._entries[0][2].weight == 2.0
    skipped = _session(PluginConfig(name="probe", args={"skip": True}))
    assert not skipped.points.job_order
    assert skipped.points.preemptable


def test_each_session_gets_its_own_state() -> None:
    first, second = _session(PluginConfig(name="probe")), _session(PluginConfig(name="probe"))
    first.points.job_order.key(first.snapshot.jobs["a"])
    fn = second.points.job_order._entries[0][2]
    assert fn.args[1] == ["opened"]  # type: ignore[attr-defined]


def test_a_look_ahead_without_a_score_is_refused() -> None:
    with pytest.raises(PluginError, match="score_ahead"):
        type("Ahead", (Plugin,), {"score_ahead": lambda *_: None})
