"""phalanx's goodput model against Pollux's own code, on a grid of inputs.

The expected values in ``pollux_reference.json`` were produced by Pollux's simulator
(adaptdl branch ``osdi21-artifact``, ``simulator/``: ``goodput.py``, ``speedup.py``,
``applications.py``) with the script ``tests/reference/pollux_goodput.py``:

    cd /work/pollux/simulator && /work/pollux/venv/bin/python \
        /work/wt-goodput/tests/reference/pollux_goodput.py \
        > /work/wt-goodput/tests/unit/engine/goodput/pollux_reference.json

Pollux is not imported here (CI does not have it). The closed-form parts (throughput,
efficiency, batch optimisation, speedup) agree to rounding (rtol 1e-12, batch choices
exactly). The fit, which Pollux does with scipy's L-BFGS-B from one start and phalanx
with its own projected BFGS from four, lands in other basins of a non-convex objective:
on these 18 observation sets its objective is lower than Pollux's on 16, equal (1e-9)
on one, 5e-5 higher on one (yolov3, 3 rows); the step times it predicts for the
observed configurations are within 8% of Pollux's fit's.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from phalanx.engine.goodput import (
    BatchLimits,
    GoodputModel,
    GradParams,
    PerfObservations,
    PerfParams,
    Speedup,
    efficiency,
    fit_perf_params,
    iteration_time,
    objective,
    throughput,
)

REFERENCE: dict[str, list[dict[str, Any]]] = json.loads(
    (Path(__file__).parent / "pollux_reference.json").read_text()
)


def _model(case: dict[str, Any]) -> GoodputModel:
    sqr, var = case["grad"]
    return GoodputModel(
        perf=PerfParams.from_array(case["params"]),
        grad=GradParams(sqr=sqr, var=var),
        init_batch_size=case["init_batch_size"],
    )


def _limits(case: dict[str, Any]) -> BatchLimits:
    return BatchLimits(**case["limits"], accumulation=True)


def _observations(rows: list[list[float]]) -> PerfObservations:
    table = np.array(rows)
    return PerfObservations.of(
        nodes=table[:, 0],
        replicas=table[:, 1],
        atomic_bsz=table[:, 2],
        accum_time=table[:, 3],
        sync_time=table[:, 4],
    )


@pytest.mark.parametrize("case", REFERENCE["perf"], ids=lambda c: c["app"])
def test_throughput_matches_pollux(case: dict[str, Any]) -> None:
    grid = np.array(case["grid"])
    params = PerfParams.from_array(case["params"])
    ours = throughput(params, grid[:, 0], grid[:, 1], grid[:, 2], grid[:, 3])
    np.testing.assert_allclose(ours, case["throughput"], rtol=1e-12)


@pytest.mark.parametrize("case", REFERENCE["efficiency"], ids=lambda c: c["app"])
def test_efficiency_matches_pollux(case: dict[str, Any]) -> None:
    sqr, var = case["grad"]
    ours = efficiency(GradParams(sqr=sqr, var=var), case["batch_size"], case["init_batch_size"])
    np.testing.assert_allclose(ours, case["efficiency"], rtol=1e-12)


@pytest.mark.parametrize("case", REFERENCE["optimize"], ids=lambda c: c["app"])
def test_batch_optimisation_matches_pollux(case: dict[str, Any]) -> None:
    choice = _model(case).optimize(case["nodes"], case["replicas"], _limits(case))
    np.testing.assert_allclose(choice.goodput, case["goodput"], rtol=1e-12)
    assert choice.atomic_bsz.tolist() == case["atomic_bsz"]
    assert choice.accum_steps.tolist() == case["accum_steps"]


@pytest.mark.parametrize("case", REFERENCE["speedup"], ids=lambda c: c["app"])
def test_speedup_matches_pollux(case: dict[str, Any]) -> None:
    speedup = Speedup(_model(case), _limits(case))
    np.testing.assert_allclose(
        speedup(case["nodes"], case["replicas"]), case["speedup"], rtol=1e-12
    )
    # A second call is answered from the memo, with the same values.
    again = speedup(np.array(case["nodes"])[::-1], np.array(case["replicas"])[::-1])
    np.testing.assert_allclose(again[::-1], case["speedup"], rtol=1e-12)


@pytest.mark.parametrize("case", REFERENCE["fits"], ids=lambda c: f"{c['app']}-{len(c['rows'])}")
def test_fit_reaches_pollux_objective_and_predictions(case: dict[str, Any]) -> None:
    obs = _observations(case["rows"])
    ours = fit_perf_params(obs)
    theirs = PerfParams.from_array(case["params"])
    assert objective(theirs, obs) == pytest.approx(case["objective"], rel=1e-9)
    assert objective(ours, obs) <= case["objective"] + 1e-4
    args = (obs.nodes, obs.replicas, obs.atomic_bsz, 0)
    np.testing.assert_allclose(
        iteration_time(ours, *args), iteration_time(theirs, *args), rtol=0.08
    )
