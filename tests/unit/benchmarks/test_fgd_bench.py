"""The FGD replay: the authors' arrival sequence and columns, and the CSV it writes."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import numpy as np
from typer.testing import CliRunner

from phalanx.benchmarks.fgd import OPENB, _sessions, arrivals, discrete_columns, run_one
from phalanx.benchmarks.fgd_report import _expected_at
from phalanx.cli.bench import ProgressLine
from phalanx.cli.main import app
from tests.builders import make_job

EXPECTED = Path(OPENB) / "fgd_expected_results" / "analysis_allo_discrete.csv"


def test_columns_average_the_arrivals_that_round_to_each_percent() -> None:
    # 10 GPUs: an arrival of 100 milli-GPU is 1% of the cluster
    arrived = np.array([40, 60, 100, 160, 290, 300])  # 0.4, 0.6, 1, 1.6, 2.9, 3 %
    used = np.array([40, 60, 100, 100, 200, 300])
    columns = discrete_columns(arrived, used, total_gpus=10)
    assert columns[0] == 0.4  # only 0.4% rounds to 0
    assert columns[1] == round((0.6 + 1.0) / 2, 2)  # 0.6 and 1 round to 1
    assert columns[2] == 1.0  # 1.6 rounds to 2
    assert columns[3] == round((2.0 + 3.0) / 2, 2)
    assert columns[4] == columns[3]  # no arrival at 4%: those at 3..5% stand in
    assert 5 not in columns and 130 not in columns


def test_a_session_never_holds_an_arrival_of_higher_priority_than_one_before_it() -> None:
    # 10 GPUs: the first three arrivals bring the cluster to 0.x%, the next three to 1.x%
    arrived = np.array([30, 60, 90, 130, 160, 190])
    priorities = np.array([0, 200, 0, 0, 100, 100])
    # a priority job order would put arrival 1 before 0, and 4 before 3: cut there
    assert list(_sessions(arrived, priorities, total_gpus=10)) == [(0, 1), (1, 3), (3, 4), (4, 6)]
    same = np.zeros(6)
    assert list(_sessions(arrived, same, total_gpus=10)) == [(0, 3), (3, 6)]


def test_arrivals_are_a_seeded_shuffle_then_copies_up_to_the_tuned_load() -> None:
    pods = [make_job(f"p{i:02d}", gpus=(0.5, 1, 2, 0)[i % 4]) for i in range(20)]
    # 17.5 GPUs asked; 130% of 20 GPUs is 26
    first = arrivals(pods, 20_000, seed=42, tune=1.3)
    again = arrivals(pods, 20_000, seed=42, tune=1.3)
    other = arrivals(pods, 20_000, seed=43, tune=1.3)
    assert [p.job.name for p in first] == [p.job.name for p in again]
    assert [p.job.name for p in first] != [p.job.name for p in other]
    assert sorted(p.job.name for p in first[:20]) == sorted(p.name for p in pods)
    total = sum(p.gpu_milli for p in first)
    assert 26_000 - 2_000 < total <= 26_000 + 1_000  # stops when the next would pass 130%
    assert all("-tuned-" in p.job.name for p in first[20:])
    assert len({p.job.name for p in first}) == len(first)
    fewer = arrivals(pods, 10_000, seed=42, tune=1.0)  # more than 100% asked: pods dropped
    assert sum(p.gpu_milli for p in fewer) <= 10_000 and len(fewer) < 20


def _bench(traces_dir: Path, out: Path) -> dict[str, object]:
    result = CliRunner().invoke(
        app,
        [
            "bench",
            "fgd",
            "--traces-dir",
            str(traces_dir),
            "--policies",
            "bestfit,fgd",
            "--seeds",
            "42",
            "--limit",
            "300",
            "--tune",
            "0.3",
            "--out",
            str(out),
        ],
    )
    assert result.exit_code == 0, result.output
    # stdout alone: a slow run also says its progress, on stderr (after 2 s of wall time)
    summary: dict[str, object] = json.loads(result.stdout)
    return summary


def test_bench_writes_the_authors_columns_with_allocation_rising_with_load(
    traces_dir: Path, tmp_path: Path
) -> None:
    summary = _bench(traces_dir, tmp_path)
    with (traces_dir / EXPECTED).open(newline="") as theirs:
        header = next(csv.reader(theirs))
    with (tmp_path / "analysis_allo_discrete.csv").open(newline="") as ours:
        rows = list(csv.DictReader(ours))
        assert list(rows[0]) == header
    assert [(r["sc_policy"], r["seed"], r["tune"]) for r in rows] == [
        ("05-BestFit", "42", "0.3"),
        ("06-FGD", "42", "0.3"),
    ]
    for row in rows:
        # --limit 300 is a subsample: the nodes those pods fill to 30%, not all 6,212 GPUs
        assert row["workload"] == "openb_pod_list_default" and int(row["total_gpus"]) < 6212
        values = [(k, float(row[str(k)])) for k in range(131) if row[str(k)]]
        assert [k for k, _ in values] == list(range(len(values)))  # 0.. up to the load reached
        assert 29 <= len(values) <= 32
        ratios = [v for _, v in values]
        assert ratios == sorted(ratios)  # pods are never deleted: allocation only rises
        assert all(v <= k + 1 for k, v in values)  # never more than has arrived
    runs = summary["runs"]
    assert isinstance(runs, list)
    assert all(r["pods"] <= 300 and r["subsample"] for r in runs)  # --limit limits
    # a subsample is not set beside the authors' full-trace figures
    assert [r["authors_130"] for r in runs] == [None, None]
    sub = summary["subsample"]
    assert isinstance(sub, dict) and sub["pods"] == 300 and sub["of_nodes"] == 1213
    assert "subsample" in str(summary["note"]) and "not comparable" in str(summary["note"])
    chart = (tmp_path / "analysis_allo_discrete.svg").read_text()
    assert chart.startswith("<svg") and "subsample" in chart and "authors" not in chart
    # the full-trace figures the authors published for seed 42, as read for full runs
    expected = _expected_at(traces_dir)
    assert [
        expected[("openb_pod_list_default", p, 42)]["130"] for p in ("05-BestFit", "06-FGD")
    ] == [
        "93.13",
        "95.29",
    ]


def test_a_limit_caps_the_arrivals_and_keeps_the_load_reaching_the_tuned_share(
    traces_dir: Path,
) -> None:
    run = run_one(traces_dir, "default", "random", 42, limit=500)

    assert run.subsample is not None and len(run.arrived) <= 500
    assert run.subsample.nodes < run.subsample.of_nodes == 1213
    assert run.columns().get(130) is not None  # the curve still reaches 130%


def test_progress_is_quiet_at_first_then_at_most_every_few_seconds_off_a_terminal() -> None:
    now = [0.0]
    out = io.StringIO()
    line = ProgressLine(out, every=5.0, after=2.0, clock=lambda: now[0])

    for t, done in [(1.0, 10), (2.5, 20), (4.0, 30), (7.6, 40), (8.0, 50), (13.0, 60)]:
        now[0] = t
        line("default random seed 42", done, 60)

    assert out.getvalue().splitlines() == [
        "default random seed 42: 20/60 pods (33%)",
        "default random seed 42: 40/60 pods (67%)",
        "default random seed 42: 60/60 pods (100%)",
    ]
