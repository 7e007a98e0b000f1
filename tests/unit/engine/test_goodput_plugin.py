"""The goodput plugin's parts: the power-mean search over sizes, and speedups learnt
from a job's reports."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from phalanx.domain.progress import Progress, StepTiming
from phalanx.engine.framework.extension import FirstPoint
from phalanx.engine.goodput import (
    GAMMA_STARTS,
    PerfObservations,
    PerfParams,
    fit_perf_params,
    objective,
)
from phalanx.engine.plugins.goodput import models
from phalanx.engine.plugins.goodput.models import (
    REFIT_ABOVE,
    Fits,
    fitting_rows,
    observations_of,
    speedups,
)
from phalanx.engine.plugins.goodput.search import EPS, search


def _values(*curves: Sequence[float]) -> np.ndarray:
    """Rows of 1 / (speedup + EPS) from speedup curves (index = GPUs)."""
    return np.array([[1.0 / (s + EPS) for s in curve] for curve in curves])


def test_free_gpus_go_to_the_job_with_the_best_marginal_speedup() -> None:
    linear = [0, 1, 2, 3, 4]
    flat = [0, 1, 1.1, 1.15, 1.2]
    sizes = search(_values(linear, flat), np.array([1, 1]), capacity=4)
    assert sizes.tolist() == [3, 1]


def test_a_waiting_job_gets_room_from_a_large_one_fair_share_first() -> None:
    linear = [0, 1, 2, 3, 4]
    sizes = search(_values(linear, linear), np.array([4, 0]), capacity=4)
    assert sizes.tolist() == [2, 2]


def test_sizes_never_exceed_the_capacity_nor_leave_what_is_allowed() -> None:
    rng = np.random.default_rng(7)
    for _ in range(50):
        jobs = int(rng.integers(1, 8))
        curves = np.cumsum(rng.random((jobs, 9)), axis=1)
        curves[:, 0] = 0
        values = 1.0 / (curves + EPS)
        values[:, 7:] = np.inf  # at most 6 GPUs each
        capacity = int(rng.integers(0, 20))
        sizes = search(values, rng.integers(0, 7, size=jobs), capacity)
        assert sizes.sum() <= capacity
        assert np.isfinite(values[np.arange(jobs), sizes]).all()


def test_a_penalised_change_that_does_not_pay_is_not_made() -> None:
    # job 0 runs on 2; moving to 3 would gain 1 %, but any change costs it 10 %
    curve = np.array([0, 1.0, 2.0, 2.02])
    penalised = curve * 0.9
    penalised[2] = curve[2]
    sizes = search(np.array([1.0 / (penalised + EPS)]), np.array([2]), capacity=3)
    assert sizes.tolist() == [2]


def test_no_report_means_linear_speedup_relative_to_the_fair_share() -> None:
    curve = speedups(None, Fits(None), most=4, fair=2, per_node=4)  # type: ignore[arg-type]
    assert curve.tolist() == [0.0, 0.5, 1.0, 1.5, 2.0]


def test_a_report_gives_a_learnt_concave_speedup() -> None:
    timings = (
        StepTiming(nodes=1, replicas=1, local_batch=32, step_seconds=0.2, sync_seconds=0.05),
        StepTiming(nodes=1, replicas=4, local_batch=32, step_seconds=0.3, sync_seconds=0.15),
        StepTiming(nodes=2, replicas=8, local_batch=32, step_seconds=0.45, sync_seconds=0.3),
        StepTiming(nodes=1, replicas=4, local_batch=16, step_seconds=0.2, sync_seconds=0.1),
        StepTiming(nodes=1, replicas=4, local_batch=16, step_seconds=0.25, sync_seconds=0.1),
    )
    rows = fitting_rows(timings)  # one per configuration, the first reported
    assert [row[:3] for row in rows] == [(1, 1, 32), (1, 4, 16), (1, 4, 32), (2, 8, 32)]
    assert rows[1][4] == 0.2
    progress = Progress(
        time=0.0,
        grad_sqr=1.0,
        grad_var=20.0,
        timings=timings,
        init_batch_size=32,
        max_batch_size=1024,
        local_batch_bounds=(8, 64),
    )
    fits = Fits(None)  # type: ignore[arg-type]
    curve = speedups(progress, fits, most=16, fair=1, per_node=4)
    assert curve[0] == 0.0 and curve[1] == pytest.approx(1.0)
    assert curve[1] < curve[2] < curve[4]  # more GPUs help at first ...
    assert curve[16] < 8  # ... far less than linearly across nodes
    again = speedups(progress, fits, most=16, fair=1, per_node=4)
    assert again.tolist() == curve.tolist()  # the kept fit is the fresh one


def test_the_targets_point_takes_the_first_answer() -> None:
    point: FirstPoint[[], dict[str, int]] = FirstPoint("elastic_targets")
    point.register("a", 0, lambda: None)
    point.register("b", 1, lambda: {"j": 3})
    point.register("c", 1, lambda: {"j": 5})
    assert point() == {"j": 3}


def test_a_fit_whose_single_start_diverges_is_redone_from_every_start() -> None:
    # Real rows on which Pollux's single start diverges (objective 26: every step off by
    # orders of magnitude); the fit a scheduler keeps must explain them.
    path = Path(__file__).parent / "goodput" / "diverging_rows.json"
    rows = tuple(tuple(r) for r in json.loads(path.read_text())["rows"])
    observations = observations_of(rows)
    single = fit_perf_params(observations, gamma_starts=GAMMA_STARTS[:1])
    assert objective(single, observations) > REFIT_ABOVE
    kept = Fits(None).perf(rows)  # type: ignore[arg-type]
    assert objective(kept, observations) < 0.1


def test_fits_forget_the_least_recently_used_first(monkeypatch: pytest.MonkeyPatch) -> None:
    fitted: list[PerfObservations] = []
    real = models.fit_perf_params

    def counting(observations: PerfObservations, **kwargs: Any) -> PerfParams:
        fitted.append(observations)
        return real(observations, **kwargs)

    monkeypatch.setattr(models, "MAX_FITS", 2)
    monkeypatch.setattr(models, "fit_perf_params", counting)
    rows = [((1, r, 32, 0.1 * r, 0.12 * r),) for r in (1, 2, 3)]
    fits = Fits(None)  # type: ignore[arg-type]
    first = fits.perf(rows[0])
    fits.perf(rows[1])
    assert fits.perf(rows[0]) is first  # a hit: now the most recently used
    fits.perf(rows[2])  # forgets rows[1], not rows[0]
    count = len(fitted)
    assert fits.perf(rows[0]) is first and len(fitted) == count
    fits.perf(rows[1])
    assert len(fitted) > count  # fitted again
