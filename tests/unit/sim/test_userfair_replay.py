"""Per-user figures of whole replays: a short real Philly replay, and what ``sim run`` and
``sim compare`` print and write (n/a for a workload of one user)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from phalanx.cli.main import app
from phalanx.domain.node import Node
from phalanx.domain.resources import Resources
from phalanx.policies import load_policy
from phalanx.sim.metrics import USER_FIGURES
from phalanx.sim.runner import SimOptions, Simulation
from phalanx.sim.traces.philly import load_philly

DAY = 86_400.0
GIB = 2**30
PHILLY = Path("philly-jobs-pollux/philly.csv.gz")
USER_ROW = {"jobs", "finished", "avg_jct_s", "avg_wait_s", "starvation_s", "gpu_time_s"}


@pytest.mark.traces
def test_a_short_philly_replay_reports_per_user_figures(traces_dir: Path) -> None:
    # The first 300 jobs (20 days; the VC stands in for the user) on 64 GPUs for 21 days:
    # the trace's early jobs run for weeks, so the cluster fills and users wait.
    workload = load_philly(traces_dir / PHILLY, limit=300)
    nodes = [
        Node(name=f"n{i}", capacity=Resources.of({"cpu": 64_000, "memory": 512 * GIB, "gpu": 8}))
        for i in range(8)
    ]
    simulation = Simulation(
        nodes, workload, load_policy("fifo").config, options=SimOptions(until=21 * DAY)
    )
    metrics = simulation.run()
    summary = metrics.summary(sim_wall_s=0.0)
    per_user = summary["per_user"]
    assert isinstance(per_user, dict)
    users = {item.job.user for item in workload.jobs}
    assert set(per_user) == users and summary["users"] == len(users) >= 5
    assert all(set(row) >= USER_ROW for row in per_user.values())
    # GPU-time adds up to the cluster's allocation over the run
    received = sum(row["gpu_time_s"] for row in per_user.values())
    total = summary["gpu_alloc_ratio_avg"] * 64 * summary["makespan_s"]  # type: ignore[operator]
    assert received == pytest.approx(total, rel=1e-4)
    mean, low = summary["user_jain_mean"], summary["user_jain_min"]
    assert isinstance(mean, float) and isinstance(low, float)
    assert 1 / len(users) - 1e-9 <= low <= mean <= 1.0
    assert summary["user_jain_windows"] == 19  # of 21 daily windows, two had one user active
    worst, longest = summary["user_worst_avg_wait_s"], summary["user_max_wait_s"]
    assert isinstance(worst, float) and isinstance(longest, float) and 0 < worst <= longest
    assert longest == max(row["starvation_s"] for row in per_user.values())
    assert 1.0 <= summary["user_wait_max_over_mean"] <= len(users)  # type: ignore[operator]


def _jsonl(path: Path, users: tuple[str, ...]) -> Path:
    """A job of an hour per user, submitted 10 s apart, on the 64-GPU pollux cluster
    (16 x 4 GPUs): each asks all 64 GPUs, so they run one after another."""
    rows = [
        {"name": f"j{i}", "submitTime": 10 * i, "duration": 3600, "user": user,
         "roles": [{"name": "w", "replicas": 16, "resources": {"gpu": 4}}]}
        for i, user in enumerate(users)
    ]  # fmt: skip
    path.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    return path


def _sim(*args: str) -> str:
    """What ``phalanx sim ARGS`` printed on stdout; it must succeed."""
    result = CliRunner().invoke(app, ["sim", *args])
    assert result.exit_code == 0, result.output
    return result.stdout


def test_compare_prints_the_user_figures_and_a_per_user_table(tmp_path: Path) -> None:
    jobs = _jsonl(tmp_path / "jobs.jsonl", ("ann", "bob"))
    out = _sim("compare", "--cluster", "pollux", "--workload", str(jobs), "--scheduler",
                  "fifo", "--scheduler", "drf", "--out", str(tmp_path / "out"), "--per-user",
                  "--fairness-window", "1h")  # fmt: skip
    for key in USER_FIGURES:
        assert key in out
    assert "per user: fifo" in out and "per user: drf" in out and "ann" in out
    summary = json.loads((tmp_path / "out" / "fifo" / "summary.json").read_text())
    assert summary["users"] == 2 and summary["user_window_s"] == 3600
    # ann holds the whole cluster for the first hour while bob waits: 1/2 (the second
    # hour, bob's, has ann active for its first second only)
    assert summary["user_jain_min"] == pytest.approx(0.5, abs=0.01)
    assert summary["user_jain_windows"] == 2
    assert summary["user_worst"] == "bob"
    assert summary["user_max_wait_s"] == summary["user_worst_avg_wait_s"] > 3500
    page = (tmp_path / "out" / "report.html").read_text()
    assert "Jain&#x27;s index over users" in page or "Jain's index over users" in page
    assert "<h3>Per user</h3>" in page


def test_a_workload_of_one_user_reports_user_figures_as_n_a(tmp_path: Path) -> None:
    jobs = _jsonl(tmp_path / "jobs.jsonl", ("default", "default"))
    out = _sim("run", "--cluster", "pollux", "--workload", str(jobs), "--out",
                  str(tmp_path / "out"))  # fmt: skip
    row = next(line for line in out.splitlines() if "user_jain_mean" in line)
    assert "n/a" in row
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert summary["users"] == 1
    assert all(summary[key] is None for key in USER_FIGURES[1:])
    assert "<h3>Per user" not in (tmp_path / "out" / "report.html").read_text()
