"""bench/sia_check.py's pure parts: the rigid variant of a workload and the comparison
(nothing here runs either simulator)."""

from __future__ import annotations

import csv
import importlib.util
import sys
from pathlib import Path
from types import ModuleType, SimpleNamespace
from typing import Any

import numpy as np
import pytest

BENCH = Path(__file__).resolve().parents[3] / "bench"


@pytest.fixture(scope="module")
def check() -> ModuleType:
    sys.path.insert(0, str(BENCH))  # it imports its sibling sia_reference
    try:
        spec = importlib.util.spec_from_file_location("sia_check", BENCH / "sia_check.py")
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules["sia_check"] = module  # dataclasses look their module up
        spec.loader.exec_module(module)
    finally:
        sys.path.remove(str(BENCH))
    return module


ROWS = [
    {"name": "cifar10-0", "time": "107", "application": "cifar10", "num_replicas": "6",
     "batch_size": "2048"},
    {"name": "bert-1", "time": "110", "application": "bert", "num_replicas": "12",
     "batch_size": "384", "category": "adaptive"},
]  # fmt: skip


def test_the_rigid_variant_fixes_every_job_and_only_moves_its_submission(
    check: ModuleType, tmp_path: Path
) -> None:
    rows = check.rigid_rows(ROWS, [600, 1800])
    assert [r["category"] for r in rows] == ["rigid", "rigid"]  # an adaptive one too
    assert [r["time"] for r in rows] == ["600", "1800"]
    for before, after in zip(ROWS, rows, strict=True):
        kept = {k: v for k, v in after.items() if k not in ("time", "category")}
        assert kept == {k: v for k, v in before.items() if k not in ("time", "category")}
    path = tmp_path / "rigid.csv"
    check.write_rows(path, rows)
    with path.open(newline="") as stream:
        read = list(csv.DictReader(stream))
    assert read[0]["category"] == "rigid" and read[1]["num_replicas"] == "12"
    assert next(iter(read[0])) == "name"  # the workload's columns first, in its order
    with pytest.raises(ValueError, match="2 rows for 1"):
        check.rigid_rows(ROWS, [600])


def test_jobs_are_spaced_on_whole_rounds_so_each_ends_before_the_next(
    check: ModuleType,
) -> None:
    submits = check.spaced([100.0, 1000.0, 5.0], interval=600, factor=2.5, pad=600.0)
    # first at Sia's first round; then 2.5 x 100 + 600 = 850 -> 1,200; 3,100 -> 3,600
    assert submits == [600, 1800, 5400]
    assert all(isinstance(at, int) and at % 600 == 0 for at in submits)
    assert check.spaced([], interval=600) == []


def test_a_lone_jobs_jct_as_sia_counts_it_rounds_each_epochs_end(check: ModuleType) -> None:
    epochs = [1.4, 1.4, 1.4]
    assert check.rounded_jct(epochs, 1.0, 50.0) == 50 + 3 * 1  # 1.4 -> 1 each
    assert check.rounded_jct(epochs, 1.8, 50.0) == 50 + 3 * 3  # 2.52 -> 3 each
    assert check.rounded_jct([], 1.2, 25.0) == 25.0


def run(check: ModuleType, name: str, jct: float, *, gpus: int = 4, restart: float = 30.0) -> Any:
    """A run of ``name`` that never waited (``check.JobRun``)."""
    return check.JobRun(
        name=name,
        application=name.rsplit("-", 1)[0],
        gpus=gpus,
        jct=jct,
        waited=0.0,
        restart=restart,
    )


SLOWDOWNS = {"cifar10": 1.8, "bert": 1.2}
RESTARTS = {"cifar10": 50.0, "bert": 120.0}


def test_the_adjusted_jct_puts_in_sias_slowdown_and_restart_separately(
    check: ModuleType,
) -> None:
    job = run(check, "bert-1", 130.0)  # 100 s of training after its 30 s start
    assert check.adjusted(job, SLOWDOWNS, RESTARTS) == pytest.approx(100 * 1.2 + 120)
    assert check.adjusted(job, SLOWDOWNS, RESTARTS, restart=False) == pytest.approx(150.0)
    assert check.adjusted(job, SLOWDOWNS, RESTARTS, slowdown=False) == pytest.approx(220.0)
    waited = check.JobRun(
        name="bert-2", application="bert", gpus=4, jct=140.0, waited=10.0, restart=30.0
    )
    assert check.adjusted(waited, SLOWDOWNS, RESTARTS) == pytest.approx(10 + 120 + 120)
    calibrated = check.JobRun(
        name="bert-3", application="bert", gpus=4, jct=240.0, waited=0.0, restart=120.0,
        slowdown=1.2,
    )  # fmt: skip
    # a run already at Sia's constants is left as it is
    assert check.adjusted(calibrated, SLOWDOWNS, RESTARTS) == pytest.approx(240.0)


def test_the_calibration_is_phalanxs_step_over_the_profiled_one(
    check: ModuleType, tmp_path: Path
) -> None:
    (tmp_path / "placements-aws.csv").write_text(
        "local_bsz,step_time,sync_time,placement\n16,0.5,0.01,1\n8,0.25,0.01,1\n8,0.4,0.02,2\n"
    )
    curve = (np.array([8.0, 16.0]), np.array([0.3, 0.6]), np.array([0.01, 0.01]))
    slowed = SimpleNamespace(gpu_model="T4", placements={1: curve})
    assert check.calibration(slowed, tmp_path) == pytest.approx(1.2)  # 0.3 / 0.25 at 8
    as_measured = SimpleNamespace(
        gpu_model="T4", placements={1: (curve[0], curve[0] / 32, curve[2])}
    )
    assert check.calibration(as_measured, tmp_path) == pytest.approx(1.0)
    assert check.calibration(SimpleNamespace(gpu_model="T4", placements={}), tmp_path) == 1.0


def test_the_comparison_reports_both_averages_and_the_jobs_furthest_apart(
    check: ModuleType,
) -> None:
    sia = {
        "cifar10-0": run(check, "cifar10-0", 230.0, restart=50.0),  # 100 s x 1.8 + 50
        "bert-1": run(check, "bert-1", 300.0, restart=120.0),  # 150 s x 1.2 + 120
    }
    phalanx = {"cifar10-0": run(check, "cifar10-0", 130.0), "bert-1": run(check, "bert-1", 130.0)}
    row = check.compare(sia, phalanx, SLOWDOWNS, RESTARTS, {"cifar10-0": 230.0, "bert-1": 240.0})
    assert row["jobs"] == 2
    assert row["sia_avg_jct_s"] == 265.0 and row["phalanx_avg_jct_s"] == 130.0
    assert row["diff"] == round(130 / 265 - 1, 4)
    assert row["phalanx_adjusted_avg_jct_s"] == 235.0  # 230 and 240
    assert row["adjusted_diff"] == round(235 / 265 - 1, 4)
    assert row["diff_with_sia_slowdowns"] == round((210 + 150) / 2 / 265 - 1, 4)
    assert row["diff_with_sia_restarts"] == round((150 + 220) / 2 / 265 - 1, 4)
    assert row["rounded_diff"] == row["adjusted_diff"]
    assert row["rounded_exact_jobs"] == 1  # cifar10-0's, to the second
    worst = row["worst_adjusted"][0]
    assert worst["job"] == "bert-1" and worst["adjusted_diff"] == round(240 / 300 - 1, 4)
    assert worst["rounded_jct_s"] == 240.0
    assert "rounded_diff" not in check.compare(sia, phalanx, SLOWDOWNS, RESTARTS)


def test_the_comparison_refuses_runs_of_different_jobs_or_sizes(check: ModuleType) -> None:
    sia = {"bert-1": run(check, "bert-1", 300.0)}
    with pytest.raises(ValueError, match="different jobs"):
        check.compare(sia, {"bert-2": run(check, "bert-2", 130.0)}, SLOWDOWNS, RESTARTS)
    with pytest.raises(ValueError, match="different GPU counts"):
        check.compare(sia, {"bert-1": run(check, "bert-1", 130.0, gpus=8)}, SLOWDOWNS, RESTARTS)


def test_the_mean_row_holds_the_check_to_five_percent(check: ModuleType) -> None:
    def row(sia: float, phalanx: float) -> dict[str, float]:
        return {
            "sia_avg_jct_s": sia,
            "phalanx_avg_jct_s": phalanx,
            "phalanx_adjusted_avg_jct_s": sia,
            "phalanx_rounded_avg_jct_s": sia,
        }

    close = check.means([row(1000.0, 1040.0), row(2000.0, 2020.0)])
    assert close["workload"] == "mean of 2" and close["sia_avg_jct_s"] == 1500.0
    assert close["diff"] == 0.02 and close["within_5pct"] is True
    assert close["adjusted_diff"] == 0.0
    far = check.means([row(1000.0, 800.0)])
    assert far["diff"] == -0.2 and far["within_5pct"] is False


def test_training_ratios_group_by_application_and_type(check: ModuleType) -> None:
    pairs = [
        ("aws", run(check, "bert-1", 150.0), run(check, "bert-1", 130.0)),  # 120 / 100
        ("aws", run(check, "bert-2", 270.0), run(check, "bert-2", 230.0)),  # 240 / 200
        ("rtx", run(check, "bert-3", 90.0), run(check, "bert-3", 90.0)),
    ]
    ratios = check.training_ratios(pairs)
    assert set(ratios) == {("bert", "aws"), ("bert", "rtx")}
    assert ratios["bert", "aws"]["jobs"] == 2
    assert ratios["bert", "aws"]["mean"] == pytest.approx(1.2)
    assert ratios["bert", "aws"]["slowdowns"] == 1.0  # both runs at their curves' speed
    assert ratios["bert", "rtx"]["min"] == ratios["bert", "rtx"]["max"] == pytest.approx(1.0)


def test_sia_runs_with_its_own_flags_but_the_checks_rounds(check: ModuleType) -> None:
    flags = check.sia_flags(600)
    assert "--interval=600" in flags and "--policy=sia" in flags
    assert not any(flag == "--interval=60" for flag in flags)
    compile(check.DRIVER, "driver", "exec")  # the driver Sia's interpreter runs parses
