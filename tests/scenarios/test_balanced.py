"""balanced: a task goes where it evens out the node's resources most."""

from __future__ import annotations

import numpy as np
import pytest

from phalanx.domain.errors import PluginError
from phalanx.engine import Snapshot
from phalanx.engine.cycle import open_session
from phalanx.engine.plugins.balanced import BalancedPlugin
from tests.builders import bound, config, cycle, make_job, make_nodes, make_queue

CPU_GPU = config(["allocate"], ["predicates", ("balanced", {"resources": ["cpu", "gpu"]})])


def test_a_cpu_task_goes_where_the_gpus_are_used_and_the_cpu_is_idle() -> None:
    # n1's 8 GPUs are taken by a 1-core job: its CPU is what strands nothing there
    gpus_gone = make_job("gpus-gone", gpus=8, cpu=1, running_on=["n1"])
    cpu_task = make_job("cpu-task", gpus=0, cpu=12, created=1)

    decisions = cycle(make_nodes(2), [gpus_gone, cpu_task], CPU_GPU)

    assert bound(decisions, "cpu-task") == ["n1"]


def test_a_skewed_node_is_evened_out_before_a_balanced_one_is_added_to() -> None:
    # n0 is half used in both; n1 has its GPUs taken and its CPU idle. Scoring the balance
    # after placement (kube-scheduler's) would pick n0 and leave n1's CPU idle for good.
    half = make_job("half", gpus=4, cpu=8, running_on=["n0"])
    gpus_gone = make_job("gpus-gone", gpus=8, cpu=1, running_on=["n1"])
    small = make_job("small", gpus=0, cpu=2, created=1)

    decisions = cycle(make_nodes(2), [half, gpus_gone, small], CPU_GPU)

    assert bound(decisions, "small") == ["n1"]


def test_a_gpu_task_goes_where_the_cpu_is_used_and_the_gpus_are_idle() -> None:
    cpu_gone = make_job("cpu-gone", gpus=0, cpu=14, running_on=["n1"])
    gpu_task = make_job("gpu-task", gpus=6, cpu=1, created=1)

    decisions = cycle(make_nodes(2), [cpu_gone, gpu_task], CPU_GPU)

    # n1: shares (14/16, 0) -> (15/16, 6/8), std 0.44 -> 0.09; n0: (0, 0) -> (1/16, 6/8)
    assert bound(decisions, "gpu-task") == ["n1"]


def test_scores_are_50_plus_100_times_how_much_the_spread_of_the_used_shares_falls() -> None:
    gpus_gone = make_job("gpus-gone", gpus=8, cpu=1, running_on=["n1"])
    cpu_task = make_job("cpu-task", gpus=0, cpu=12, created=1)
    snapshot = Snapshot.build(
        nodes=make_nodes(2), queues=[make_queue("default")], jobs=[gpus_gone, cpu_task]
    )
    session = open_session(snapshot, CPU_GPU, now=0.0)
    task = snapshot.jobs["cpu-task"].tasks[0]
    scores = session.points.node_score(task, np.arange(2, dtype=np.intp))
    # n0: shares (0, 0) -> (12/16, 0): std 0 -> 0.375
    # n1: shares (1/16, 1) -> (13/16, 1): std 0.46875 -> 0.09375
    np.testing.assert_allclose(scores, [12.5, 87.5])


def test_balanced_refuses_resources_that_are_not_a_list_of_names() -> None:
    with pytest.raises(PluginError, match="resources"):
        BalancedPlugin({"resources": "cpu"})
    with pytest.raises(PluginError, match="resources"):
        BalancedPlugin({"resources": []})
