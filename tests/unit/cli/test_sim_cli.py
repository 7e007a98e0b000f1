"""``phalanx sim run`` and ``compare`` write summary, events and one report; bad input is one line."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from phalanx.cli.main import app
from phalanx.cli.sim import _workload_label

runner = CliRunner()


@pytest.mark.traces
def test_compare_writes_a_folder_per_policy_and_one_report(
    traces_dir: Path, tmp_path: Path
) -> None:
    result = runner.invoke(
        app,
        [
            "sim",
            "compare",
            "--cluster",
            "tiresias",
            "--workload",
            "tiresias:",
            "--traces-dir",
            str(traces_dir),
            "--scheduler",
            "fifo",
            "--scheduler",
            "tiresias-las",
            "--out",
            str(tmp_path),
            "--json",
        ],
    )
    assert result.exit_code == 0, result.output
    summaries = json.loads(result.stdout.strip().splitlines()[-1])
    assert [s["policy"] for s in summaries] == ["fifo", "tiresias-las"]
    assert all(s["jobs"] == 60 and s["finished"] == 60 for s in summaries)
    for policy in ("fifo", "tiresias-las"):
        assert (tmp_path / policy / "events.jsonl").stat().st_size > 0
        assert json.loads((tmp_path / policy / "summary.json").read_text())["policy"] == policy
    assert "<svg" in (tmp_path / "report.html").read_text()
    # Each policy's progress stays on stderr when it ends: its jobs finished of all.
    for policy in ("fifo", "tiresias-las"):
        line = next(line for line in result.stderr.splitlines() if line.startswith(policy))
        assert "60/60 jobs finished" in line and "at day " in line, result.stderr


@pytest.mark.parametrize(
    ("flags", "delays"),
    [
        # sessions come 1 s after an arrival or a release
        ([], [1.0, 1.0, 1.0, 1.0, 62.0, 62.0]),
        # sessions only at whole minutes (Pollux's simulator): j4 waits for j0's end at 100,
        # j5 for j1-j3's at 160
        (["--fixed-period"], [0.0, 50.0, 40.0, 30.0, 80.0, 130.0]),
    ],
)
def test_run_on_a_jsonl_workload_and_a_cluster_document(
    tmp_path: Path, flags: list[str], delays: list[float]
) -> None:
    cluster = tmp_path / "cluster.yaml"
    cluster.write_text(
        "apiVersion: phalanx/v1\nkind: Cluster\nmetadata: {name: lab}\n"
        "spec:\n  nodeGroups:\n  - {name: gpu, count: 2, resources: {cpu: 32, memory: 128Gi}, gpus: {count: 4}}\n"
    )
    workload = tmp_path / "jobs.jsonl"
    rows = [
        {
            "name": f"j{i}",
            "submitTime": 10 * i,
            "duration": 100,
            "queue": "default",
            "user": "u",
            "priority": 0,
            "roles": [
                {"name": "w", "replicas": 1, "resources": {"cpu": 1, "memory": "1Gi", "gpu": 2}}
            ],
        }
        for i in range(6)
    ]
    workload.write_text("".join(json.dumps(r) + "\n" for r in rows))
    out = tmp_path / "out"
    result = runner.invoke(
        app,
        [
            "sim",
            "run",
            "--cluster",
            str(cluster),
            "--workload",
            str(workload),
            "--scheduler",
            "drf",
            "--out",
            str(out),
            "--json",
            *flags,
        ],
    )
    assert result.exit_code == 0, result.output
    summary = json.loads(result.stdout.strip().splitlines()[-1])
    assert summary["finished"] == 6 and summary["total_gpus"] == 8
    assert (out / "report.html").exists()
    with (out / "jobs.csv").open(encoding="utf-8") as file:
        jobs = list(csv.DictReader(file))
    assert [j["job"] for j in jobs] == [f"j{i}" for i in range(6)]
    # 8 GPUs, 2 per job, a job every 10 s for 100 s: the fifth and sixth wait for the
    # first ones to end
    assert [float(j["queue_delay_s"]) for j in jobs] == delays
    assert all(float(j["jct_s"]) == float(j["queue_delay_s"]) + 100 for j in jobs)
    assert {j["outcome"] for j in jobs} == {"finished"}


def test_failing_runs_and_failing_nodes_retry_as_the_control_plane_does(tmp_path: Path) -> None:
    cluster = tmp_path / "cluster.yaml"
    cluster.write_text(
        "apiVersion: phalanx/v1\nkind: Cluster\nmetadata: {name: lab}\n"
        "spec:\n  nodeGroups:\n  - {name: gpu, count: 2, resources: {cpu: 32, memory: 128Gi}, gpus: {count: 4}}\n"
    )
    role = {"name": "w", "replicas": 1, "resources": {"cpu": 1, "memory": "1Gi", "gpu": 1}}
    rows = [
        {"name": "flaky", "submitTime": 0, "duration": 100, "failAfter": [30], "roles": [role]},
        {"name": "long", "submitTime": 0, "duration": 20000, "maxRetry": 100, "roles": [role]},
    ]
    workload = tmp_path / "jobs.jsonl"
    workload.write_text("".join(json.dumps(r) + "\n" for r in rows))
    out = tmp_path / "out"
    args = ["sim", "run", "--cluster", str(cluster), "--workload", str(workload), "--out", str(out)]
    result = runner.invoke(app, [*args, "--node-mtbf", "2h", "--node-mttr", "10m", "--json"])
    assert result.exit_code == 0, result.output
    events = [json.loads(line) for line in (out / "events.jsonl").read_text().splitlines()]
    failed = [e for e in events if e["ev"] == "TaskFailed"]
    assert "flaky-w-0 exited with code 1; retry 1 of 3" in failed[0]["message"]
    assert any("was lost with its node" in e["message"] for e in failed if e["job"] == "long")
    assert {e["ev"] for e in events} >= {"NodeDown", "NodeUp", "Pending", "Succeeded"}
    with (out / "jobs.csv").open(encoding="utf-8") as file:
        jobs = {j["job"]: j for j in csv.DictReader(file)}
    assert jobs["flaky"]["outcome"] == "finished" and int(jobs["flaky"]["restarts"]) >= 1


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--cluster", "kueue", "--workload", "synthetic:", "--node-mtbf", "soon"], "soon"),
        (["--cluster", "nowhere", "--workload", "synthetic:"], "nowhere"),
        (["--cluster", "kueue", "--workload", "bogus:x"], "bogus"),
        (
            ["--cluster", "kueue", "--workload", "synthetic:", "--scheduler", "no-such-policy"],
            "no-such-policy",
        ),
    ],
)
def test_bad_input_is_one_clear_line(tmp_path: Path, args: list[str], message: str) -> None:
    result = runner.invoke(app, ["sim", "run", *args, "--out", str(tmp_path)])
    assert result.exit_code == 2
    assert "error:" in result.output and message in result.output
    assert "Traceback" not in result.output


def test_report_titles_name_the_trace_file_instead_of_a_stray_colon() -> None:
    assert _workload_label("tiresias:") == "tiresias (tiresias-sample/60_job.csv)"
    assert _workload_label("synthetic:") == "synthetic"
    assert _workload_label("pollux:x.csv") == "pollux:x.csv"
    assert _workload_label("jobs.jsonl") == "jobs.jsonl"
