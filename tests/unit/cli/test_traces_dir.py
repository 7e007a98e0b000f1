"""A traces folder that is not there (a relative default run from elsewhere) is one
``error:`` line naming the option, the path tried and the fix, never a traceback."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from phalanx.cli.main import app

runner = CliRunner()

COMMANDS = {
    "sim compare": [
        "sim", "compare", "--cluster", "tiresias", "--workload", "tiresias:",
        "--scheduler", "fifo", "--out", "out",
    ],
    "sim run": ["sim", "run", "--cluster", "pollux", "--workload", "pollux:", "--out", "out"],
    "sim run (preset)": [
        "sim", "run", "--cluster", "openb", "--workload", "synthetic:", "--out", "out",
    ],
    "bench fgd": ["bench", "fgd", "--policies", "random", "--limit", "5"],
}  # fmt: skip


def _one_error_line(output: str) -> str:
    lines = [line for line in output.splitlines() if line.strip()]
    assert "Traceback" not in output
    assert len(lines) == 1 and lines[0].startswith("error: "), output
    return lines[0]


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_a_missing_default_traces_folder_is_one_error_naming_the_option_and_the_fix(
    command: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)  # ../shared/traces is not beside this folder
    monkeypatch.delenv("PHALANX_TRACES", raising=False)

    result = runner.invoke(app, COMMANDS[command])

    assert result.exit_code == 2
    line = _one_error_line(result.output)
    assert "the default --traces-dir ../shared/traces: no such folder" in line
    assert str((tmp_path / "../shared/traces").resolve()) in line  # the path tried
    assert "fix: pass --traces-dir" in line and "PHALANX_TRACES" in line


@pytest.mark.parametrize("command", ["sim compare", "bench fgd"])
def test_a_given_traces_folder_that_is_not_there_is_named_as_given(
    command: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)

    result = runner.invoke(app, [*COMMANDS[command], "--traces-dir", "nope/traces"])

    assert result.exit_code == 2
    line = _one_error_line(result.output)
    assert "--traces-dir nope/traces: no such folder" in line
    assert str(tmp_path / "nope" / "traces") in line


def test_a_traces_folder_without_the_openb_trace_says_what_it_lacks(tmp_path: Path) -> None:
    result = runner.invoke(app, [*COMMANDS["bench fgd"], "--traces-dir", str(tmp_path)])

    assert result.exit_code == 2
    line = _one_error_line(result.output)
    assert f"--traces-dir {tmp_path} has no alibaba-gpu-v2023-openb/" in line


def test_a_workload_file_that_is_not_there_names_the_workload_option(tmp_path: Path) -> None:
    args = ["sim", "run", "--cluster", "pollux", "--workload", str(tmp_path / "no.jsonl")]

    result = runner.invoke(app, [*args, "--out", str(tmp_path / "out")])

    assert result.exit_code == 2
    line = _one_error_line(result.output)
    assert line.startswith(f"error: --workload {tmp_path / 'no.jsonl'}: ") and "fix:" in line
