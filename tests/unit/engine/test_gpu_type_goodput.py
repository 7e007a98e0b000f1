"""The goodput policy's parts for several GPU types: goodput per (type, size) learnt
across types (``typed``), and the search over type and size together
(``search_typed``)."""

from __future__ import annotations

import numpy as np
import pytest

from phalanx.domain.errors import PluginError
from phalanx.domain.progress import Progress, StepTiming
from phalanx.engine.plugins.goodput import GoodputPlugin
from phalanx.engine.plugins.goodput.models import Fits
from phalanx.engine.plugins.goodput.search import EPS, search_typed
from phalanx.engine.plugins.goodput.typed import TypePool, one_gpu_speed, type_goodputs
from phalanx.policies import load_policy

POOLS = [TypePool(name="A100", capacity=8, per_node=8), TypePool(name="T4", capacity=8, per_node=4)]
FITS = Fits(None)  # type: ignore[arg-type]


def _timing(
    model: str, replicas: int, step: float, *, nodes: int = 1, batch: int = 32
) -> StepTiming:
    return StepTiming(
        nodes=nodes,
        replicas=replicas,
        local_batch=batch,
        step_seconds=step,
        sync_seconds=step * 0.2 if replicas > 1 else 0.001,
        gpu_model=model,
    )


def _report(*timings: StepTiming) -> Progress:
    return Progress(
        time=0.0,
        grad_sqr=1.0,
        grad_var=10.0,
        timings=timings,
        init_batch_size=32,
        max_batch_size=1024,
        local_batch_bounds=(16, 64),
    )


def test_one_gpu_speed_is_taken_at_the_largest_batch_measured() -> None:
    timings = (_timing("T4", 1, 0.2, batch=16), _timing("T4", 1, 0.3, batch=32))
    assert one_gpu_speed(timings) == (pytest.approx(32 / 0.3), 32)
    assert one_gpu_speed((_timing("T4", 2, 0.3),)) is None


def test_before_any_model_goodput_is_linear_at_each_types_one_gpu_speed() -> None:
    progress = Progress(time=0.0, timings=(_timing("A100", 1, 0.1), _timing("T4", 1, 0.4)))
    goodput, measured = type_goodputs(progress, FITS, POOLS, most=4)
    assert not measured
    assert goodput[0].tolist() == pytest.approx([0, 320, 640, 960, 1280])
    assert goodput[1].tolist() == pytest.approx([0, 80, 160, 240, 320])


def test_a_type_without_a_point_counts_as_the_slowest_known() -> None:
    progress = Progress(time=0.0, timings=(_timing("A100", 1, 0.1),))
    three = [*POOLS, TypePool(name="V100", capacity=4, per_node=4)]
    with_t4 = Progress(time=0.0, timings=(*progress.timings, _timing("T4", 1, 0.4)))
    goodput, _ = type_goodputs(with_t4, FITS, three, most=2)
    assert goodput[2].tolist() == pytest.approx(goodput[1].tolist())  # V100 as T4
    alone, _ = type_goodputs(Progress(time=0.0), FITS, POOLS, most=2)
    assert alone[0].tolist() == alone[1].tolist() == [0, 1, 2]  # nothing known: equal


def test_a_job_measured_on_one_type_is_projected_on_another_by_its_bootstrap_ratio() -> None:
    # a full model on T4 (1, 2, 4, 8 replicas), one bootstrapping point on A100 that is
    # 3x the T4's one-GPU speed: the A100 curve is the T4 model's, nodes recounted for
    # A100's 8 GPUs a node, times 3
    t4 = (
        _timing("T4", 1, 0.3),
        _timing("T4", 2, 0.33),
        _timing("T4", 4, 0.36),
        _timing("T4", 8, 0.6, nodes=2),
    )
    progress = _report(*t4, _timing("A100", 1, 0.1))
    goodput, measured = type_goodputs(progress, FITS, POOLS, most=8)
    assert measured
    ratio = goodput[0, 1:] / goodput[1, 1:]
    assert ratio[:4] == pytest.approx([3.0] * 4, rel=0.05)  # one node on both
    assert ratio[7] > ratio[3]  # 8 GPUs: one A100 node, two T4 nodes
    assert goodput[1, 2] < 2 * goodput[1, 1]  # learnt, not linear


def test_a_type_run_on_more_than_one_replica_has_its_own_model() -> None:
    t4 = (_timing("T4", 1, 0.3), _timing("T4", 2, 0.33), _timing("T4", 4, 0.36))
    a100 = (_timing("A100", 1, 0.1), _timing("A100", 2, 0.5), _timing("A100", 4, 0.9))
    goodput, _ = type_goodputs(_report(*t4, *a100), FITS, POOLS, most=4)
    # A100 scales badly by its own steps, however fast its one GPU is
    assert goodput[0, 4] < 2 * goodput[0, 1]
    assert goodput[1, 4] > 2.5 * goodput[1, 1]  # T4 scales well by its own


def _values(curves: list[list[list[float]]]) -> np.ndarray:
    return 1.0 / (np.array(curves, dtype=np.float64) + EPS)


def test_the_job_that_gains_most_on_a_type_gets_it_the_other_goes_elsewhere() -> None:
    # two types of 4 GPUs; job 0 is 5x faster on type 0, job 1 1.25x
    fast = [[0, 5, 10, 15, 20], [0, 1, 2, 3, 4]]
    even = [[0, 1.25, 2.5, 3.75, 5], [0, 1, 2, 3, 4]]
    alloc, kind, _ = search_typed(_values([even, fast]), np.array([4, 4]))
    assert kind.tolist() == [1, 0] and alloc.tolist() == [4, 4]


def test_capacities_hold_and_only_allowed_entries_are_chosen() -> None:
    rng = np.random.default_rng(11)
    for _ in range(40):
        jobs, types = int(rng.integers(1, 9)), int(rng.integers(2, 4))
        curves = np.cumsum(rng.random((jobs, types, 9)), axis=2)
        curves[:, :, 0] = 0
        values = 1.0 / (curves + EPS)
        values[:, :, 7:] = np.inf
        capacity = rng.integers(0, 10, size=types)
        kinds = np.full(jobs, -1)
        for j in range(jobs):  # some hold GPUs of one type, and may keep only that one
            if rng.random() < 0.4:
                t = int(rng.integers(types))
                kinds[j] = t
                values[j, np.arange(types) != t, 1:] = np.inf
        alloc, kind, _ = search_typed(values, capacity)
        for t in range(types):
            assert alloc[kind == t].sum() <= capacity[t]
        assert (kind[alloc == 0] == -1).all()
        assert np.isfinite(values[np.arange(jobs), np.maximum(kind, 0), alloc]).all()
        held = kinds >= 0
        assert ((kind[held] == kinds[held]) | (alloc[held] == 0)).all()
        again = search_typed(values, capacity)
        assert again[0].tolist() == alloc.tolist() and again[1].tolist() == kind.tolist()


def test_with_room_for_all_every_job_gets_gpus_on_its_best_type() -> None:
    a = [[0, 2, 4], [0, 1, 2]]
    b = [[0, 1, 2], [0, 2, 4]]
    alloc, kind, _ = search_typed(_values([a, b, a]), np.array([4, 2]))
    assert (alloc > 0).all()
    assert kind[1] == 1 and kind[0] == kind[2] == 0


def test_the_power_mean_is_an_arg_below_zero_and_sia_ships_with_sias() -> None:
    assert GoodputPlugin({"powerMean": -0.5}).power == -0.5
    with pytest.raises(PluginError, match="'powerMean' must be below 0"):
        GoodputPlugin({"powerMean": 0.5})
    sia = load_policy("sia").config
    (goodput,) = [p for tier in sia.tiers for p in tier if p.name == "goodput"]
    assert goodput.args == {"powerMean": -0.5}
