"""tiresias-pollux: Tiresias as Pollux's simulator runs it (levels split at 16 GPU-hours,
no admission gate, the first level preempts the second)."""

from __future__ import annotations

import pytest

from phalanx.domain.errors import PluginError
from phalanx.domain.job import JobPhase
from phalanx.engine.plugins.las import LasPlugin
from phalanx.policies import load_policy
from tests.builders import cycle, evicted, make_job, make_nodes

POLICY = load_policy("tiresias-pollux").config


def test_a_new_job_preempts_one_past_sixteen_gpu_hours_not_before() -> None:
    # 8 GPUs since t=0: 57,600 GPU-s are reached at t=7,200
    veteran = make_job("veteran", gpus=8, running_on=["n0"], started=0.0)
    newcomer = make_job("newcomer", gpus=8, created=1, phase=JobPhase.PENDING)

    early = cycle(make_nodes(1), [veteran, newcomer], POLICY, now=7199)
    late = cycle(make_nodes(1), [veteran, newcomer], POLICY, now=7201)

    assert early.evictions == ()
    assert evicted(late, "veteran") == ["veteran-worker-0"]


def test_without_an_admission_gate_a_later_job_runs_where_an_earlier_one_does_not_fit() -> None:
    running = make_job("running", gpus=4, running_on=["n0"], started=0.0)
    big = make_job("big", gpus=8, created=1, phase=JobPhase.PENDING)
    small = make_job("small", gpus=4, created=2, phase=JobPhase.PENDING)

    decisions = cycle(make_nodes(1), [running, big, small], POLICY, now=10)

    assert [b.job for b in decisions.binds] == ["small"]
    assert decisions.evictions == ()  # the same level: big does not preempt


def test_an_earlier_job_preempts_a_later_one_of_its_own_level() -> None:
    # Both in the first level (800 GPU-s attained); Pollux fills GPUs in queue order, so
    # the earlier submission takes the node back. Plain las never preempts in a level.
    later = make_job("later", gpus=8, created=5, running_on=["n0"], started=100.0)
    earlier = make_job("earlier", gpus=8, created=1, phase=JobPhase.PENDING)

    pollux = cycle(make_nodes(1), [later, earlier], POLICY, now=200)
    plain = cycle(make_nodes(1), [later, earlier], load_policy("tiresias-las").config, now=200)

    assert evicted(pollux, "later") == ["later-worker-0"]
    assert plain.evictions == ()


def test_preempt_within_level_must_be_a_boolean() -> None:
    with pytest.raises(PluginError, match="preemptWithinLevel must be true or false"):
        LasPlugin({"preemptWithinLevel": "yes"})
