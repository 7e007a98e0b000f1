"""``phalanx sim pipeline``: the shipped sweep replayed, with and without a quota."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from phalanx.cli.main import app
from phalanx.examples.pipelines import DIRECTORY

runner = CliRunner()
SWEEP = str(DIRECTORY / "sweep.yaml")
DURATIONS = str(DIRECTORY / "durations" / "sweep.yaml")
#: The sweep's steps by those durations: prep 2m; train[0] and [1] 20m, two at a time;
#: then train[2] 20m beside train[3] 25m; best 1m.
ALONE = 120 + 1200 + 1500 + 60


def _queue(path: Path, name: str = "examples", **capability: int) -> Path:
    spec = {"capability": capability} if capability else {}
    document = {"apiVersion": "phalanx/v1", "kind": "Queue", "metadata": {"name": name}}
    path.write_text(json.dumps({**document, "spec": spec}))
    return path


def _replay(*args: str) -> dict[str, object]:
    options = ["--durations", DURATIONS, "--cluster", "pollux", "--json"]
    result = runner.invoke(app, ["sim", "pipeline", SWEEP, *options, *args])
    assert result.exit_code == 0, result.output
    summary: dict[str, object] = json.loads(result.stdout)
    return summary


def test_the_sweep_alone_takes_its_critical_path_and_writes_its_files(tmp_path: Path) -> None:
    summary = _replay("--out", str(tmp_path))
    assert summary["avg_makespan_s"] == ALONE and summary["finished_runs"] == 1
    steps = summary["steps"]
    assert isinstance(steps, dict)
    assert steps["train"]["phases"] == {"Succeeded": 4} and steps["train"]["avg_span_s"] == 2700
    assert json.loads((tmp_path / "summary.json").read_text()) == summary
    events = (tmp_path / "events.jsonl").read_text().splitlines()
    assert sum('"ev":"Submitted"' in line for line in events) == 6
    assert (tmp_path / "jobs.csv").read_text().count("sweep-0-train-") == 4


def test_a_cpu_quota_serialises_the_fan_out_and_concurrent_runs_queue(tmp_path: Path) -> None:
    quota = _queue(tmp_path / "q.yaml", cpu=1)
    summary = _replay("--queues", str(quota))
    assert summary["avg_makespan_s"] == 120 + 3 * 1200 + 1500 + 60  # one training at a time
    three = _replay("--queues", str(quota), "--runs", "3", "--interval", "10m")
    assert three["finished_runs"] == 3
    assert three["max_makespan_s"] > three["avg_makespan_s"] > summary["avg_makespan_s"]
    steps = three["steps"]
    assert isinstance(steps, dict) and steps["train"]["avg_queue_delay_s"] > 0


def test_the_table_shows_each_step_and_the_makespan() -> None:
    result = runner.invoke(
        app, ["sim", "pipeline", SWEEP, "--durations", DURATIONS, "--cluster", "pollux"]
    )
    assert result.exit_code == 0, result.output
    for text in ("pipeline sweep: runs", "train[3]", "best", str(ALONE), "avg_makespan_s"):
        assert text in result.stdout


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--queues", "QUEUE"], "step prep runs in queue 'examples', which is not among"),
        (["-p", "nope=1"], "--param nope=1: "),
        (["--runs", "0"], "Invalid value for '--runs'"),
        (["--interval", "soon"], "--interval soon: 'soon' is not a duration"),
    ],
)
def test_bad_input_is_one_clear_line(tmp_path: Path, args: list[str], message: str) -> None:
    args = [str(_queue(tmp_path / "q.yaml", name="other")) if a == "QUEUE" else a for a in args]
    result = runner.invoke(
        app, ["sim", "pipeline", SWEEP, "--durations", DURATIONS, "--cluster", "pollux", *args]
    )
    assert result.exit_code == 2, result.output
    assert message in result.output and "Traceback" not in result.output


def test_a_sub_pipeline_step_is_refused_naming_the_step(tmp_path: Path) -> None:
    parent = tmp_path / "parent.yaml"
    parent.write_text(
        "apiVersion: phalanx/v1\nkind: Pipeline\nmetadata: {name: parent}\nspec:\n"
        "  defaults: {queue: wf, resources: {cpu: 1, memory: 1Gi}}\n"
        "  steps:\n    prep: {command: 'true'}\n"
        "    child: {dependsOn: [prep], pipeline: {name: sweep}}\n"
    )
    durations = tmp_path / "d.yaml"
    durations.write_text("prep: 1m\nchild: 1h\n")
    result = runner.invoke(
        app,
        ["sim", "pipeline", str(parent), "--durations", str(durations), "--cluster", "pollux"],
    )
    assert result.exit_code == 2, result.output
    assert "steps.child.pipeline: step child runs the pipeline 'sweep' as a child run" in (
        result.output
    )
    assert "fix: replay sweep on its own" in result.output
