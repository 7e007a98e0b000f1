"""The command line runs the simulated story and the engine benchmark in-process."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from phalanx.cli.main import app
from phalanx.cli.version import cli_version

runner = CliRunner()


def test_sim_story_runs_to_the_end() -> None:
    result = runner.invoke(app, ["sim", "story"])
    assert result.exit_code == 0, result.output
    assert "reclaim" in result.output
    assert "preempt" in result.output
    assert "reserved" in result.output
    assert "moe-64gpu finished" in result.output
    assert "placed moe-64gpu: 4 task(s) on dgx-0, dgx-1, dgx-2, dgx-3" in result.output
    assert "backfill: notebook-0 runs on reserved room" in result.output
    assert "no node is big enough" in result.output


def test_bench_engine_prints_one_json_line_with_the_named_figures() -> None:
    result = runner.invoke(
        app,
        [
            "bench",
            "engine",
            "--nodes",
            "50",
            "--queues",
            "2",
            "--jobs-per-queue",
            "3",
            "--tasks-per-job",
            "10",
            "--json",
        ],
    )
    assert result.exit_code == 0, result.output
    figures = json.loads(result.output)
    assert {"nodes", "tasks", "tasks_bound", "seconds", "tasks_per_s"} <= set(figures)
    assert figures["tasks"] == 60 and figures["tasks_bound"] == 60


def test_bench_engine_runs_the_scheduler_named_or_a_file(tmp_path: Path) -> None:
    shape = ["bench", "engine", "--nodes", "20", "--jobs-per-queue", "1", "--tasks-per-job", "4"]
    shipped = runner.invoke(app, [*shape, "--scheduler", "fifo", "--json"])
    assert shipped.exit_code == 0, shipped.output
    assert json.loads(shipped.output)["scheduler"] == "fifo"
    assert json.loads(runner.invoke(app, [*shape, "--json"]).output)["scheduler"] == (
        "phalanx-default"
    )
    document = tmp_path / "mine.yaml"
    document.write_text(
        "apiVersion: phalanx/v1\nkind: SchedulerConfig\nmetadata: {name: mine}\n"
        "spec: {actions: [allocate], tiers: [{plugins: [{name: gang}, {name: binpack}]}]}\n"
    )
    mine = runner.invoke(app, [*shape, "--scheduler", str(document), "--json"])
    assert mine.exit_code == 0, mine.output
    assert json.loads(mine.output)["scheduler"] == "mine"
    assert json.loads(mine.output)["tasks_bound"] == 20
    wrong = runner.invoke(app, [*shape, "--scheduler", "nope[i].yaml"])
    assert wrong.exit_code == 2
    # said as written: brackets in a name are not taken for markup
    assert "'nope[i].yaml' is neither a shipped policy nor a file" in wrong.output


def test_bench_gpu_mix_and_busy_cluster() -> None:
    mix = runner.invoke(
        app,
        [
            "bench",
            "engine",
            "--nodes",
            "40",
            "--queues",
            "2",
            "--jobs-per-queue",
            "6",
            "--gpu-mix",
            "--json",
        ],
    )
    assert json.loads(mix.output)["tasks_bound"] > 0
    busy = runner.invoke(
        app,
        [
            "bench",
            "engine",
            "--nodes",
            "20",
            "--queues",
            "2",
            "--jobs-per-queue",
            "2",
            "--tasks-per-job",
            "5",
            "--running",
            "200",
            "--json",
        ],
    )
    figures = json.loads(busy.output)
    assert figures["running"] == 200 and figures["tasks_bound"] == 20


def test_version_is_printed_offline_and_with_the_servers() -> None:
    assert runner.invoke(app, ["--version"]).stdout == f"phalanx {cli_version()}\n"
    assert cli_version() != "unknown"  # make install installs it
    unreachable = runner.invoke(app, ["--server", "http://127.0.0.1:9", "version"])
    assert unreachable.exit_code == 0, unreachable.output
    client, server = unreachable.stdout.splitlines()
    assert client == f"client: phalanx {cli_version()}"
    assert server.startswith("server: not reached (cannot connect to the phalanx server at")


def test_help_names_every_kind_and_shows_no_type_for_a_flag() -> None:
    described = runner.invoke(app, ["describe", "--help"], env={"COLUMNS": "120"}).stdout
    assert "job, run, queue, node, model, inference service, secret, dataset or tuning" in described
    assert "Pipeline" in runner.invoke(app, ["apply", "--help"]).stdout
    for command in (["logs"], ["get", "jobs"], ["up"], []):
        shown = runner.invoke(app, [*command, "--help"], env={"COLUMNS": "120"}).stdout
        assert "--help" in shown and "<bool>" not in shown, shown
    assert "<int" in runner.invoke(app, ["logs", "--help"], env={"COLUMNS": "120"}).stdout


def test_bare_top_is_top_nodes_not_help() -> None:
    result = runner.invoke(app, ["--server", "http://127.0.0.1:9", "top"])
    assert result.exit_code == 1 and "Usage" not in result.output
    assert "cannot connect to the phalanx server at http://127.0.0.1:9" in result.stderr
