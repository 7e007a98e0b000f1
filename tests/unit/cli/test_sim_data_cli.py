"""``phalanx sim run|compare --datasets``: jobs read datasets through node caches, and the
summaries, the table and the report say what the data cost."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from phalanx.cli.main import app

runner = CliRunner()
NO_LOCALITY = Path(__file__).resolve().parents[3] / "bench" / "phalanx-no-locality.yaml"
CLUSTER = (
    "apiVersion: phalanx/v1\nkind: Cluster\nmetadata: {name: lab}\n"
    "spec:\n  nodeGroups:\n  - {name: gpu, count: 4, resources: {cpu: 32, memory: 128Gi}, "
    "gpus: {count: 4}}\n"
)
DATA = ["--datasets", "3", "--dataset-size", "100G", "--node-cache", "250G"]


def _inputs(tmp_path: Path) -> list[str]:
    """A 4 x 4-GPU cluster and 24 one-GPU jobs of 300 s, one a minute."""
    cluster = tmp_path / "cluster.yaml"
    cluster.write_text(CLUSTER)
    role = {"name": "w", "replicas": 1, "resources": {"cpu": 1, "memory": "1Gi", "gpu": 1}}
    rows = [
        {"name": f"j{i}", "submitTime": 60 * i, "duration": 300, "roles": [role]} for i in range(24)
    ]
    workload = tmp_path / "jobs.jsonl"
    workload.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return ["--cluster", str(cluster), "--workload", str(workload)]


def test_compare_with_and_without_locality_reports_what_the_data_cost(tmp_path: Path) -> None:
    out = tmp_path / "out"
    schedulers = ["--scheduler", "phalanx-default", "--scheduler", str(NO_LOCALITY)]
    args = ["sim", "compare", *_inputs(tmp_path), *schedulers, *DATA, "--out", str(out)]
    result = runner.invoke(app, [*args, "--node-bandwidth", "1GB/s", "--json"])
    assert result.exit_code == 0, result.output
    local, anywhere = json.loads(result.stdout.strip().splitlines()[-1])
    assert [local["policy"], anywhere["policy"]] == ["phalanx-default", "phalanx-no-locality"]
    for summary in (local, anywhere):
        assert summary["finished"] == summary["data_reads"] == 24
        assert summary["data_cold_bytes"] >= 3 * 100 * 10**9 - 1  # each dataset once at least
    assert local["data_hit_rate"] > anywhere["data_hit_rate"]
    assert local["data_cold_bytes"] < anywhere["data_cold_bytes"]
    assert local["avg_jct_s"] < anywhere["avg_jct_s"]  # reading data is part of a job's time
    assert "start delay for data" in (out / "report.html").read_text()


def test_the_table_shows_the_data_figures_only_when_jobs_read_data(tmp_path: Path) -> None:
    args = ["sim", "run", *_inputs(tmp_path), "--out", str(tmp_path / "out")]
    with_data = runner.invoke(app, [*args, *DATA])
    assert with_data.exit_code == 0, with_data.output
    assert "data_hit_rate" in with_data.stdout and "data_cold_bytes" in with_data.stdout
    without = runner.invoke(app, args)
    assert without.exit_code == 0, without.output
    assert "data_" not in without.stdout


@pytest.mark.parametrize(
    ("flags", "expected"),
    [
        (["--node-cache", "lots"], "--node-cache: 'lots' is not an amount of bytes"),
        (["--node-bandwidth", "0"], "--node-bandwidth: '0' is no bandwidth"),
        (["--dataset-size", "-5Gi"], "--dataset-size"),
    ],
)
def test_a_bad_data_option_is_one_line_naming_it(
    tmp_path: Path, flags: list[str], expected: str
) -> None:
    args = ["sim", "run", *_inputs(tmp_path), "--out", str(tmp_path / "out"), *DATA, *flags]
    result = runner.invoke(app, args)
    assert result.exit_code == 2
    assert expected in result.stderr and "fix:" in result.stderr
