"""bench/tuning_replay.py against a synthetic grid (made here, never ground truth)."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path
from types import ModuleType

import pytest

from phalanx.domain.errors import InvalidInput
from tests.unit.tuning.synthetic import write_grid

SCRIPT = Path(__file__).resolve().parents[3] / "bench" / "tuning_replay.py"


@pytest.fixture(scope="module")
def replay() -> ModuleType:
    spec = importlib.util.spec_from_file_location("tuning_replay", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["tuning_replay"] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def small_grid(path: Path, goal: str = "cheapest") -> None:
    write_grid(
        path, goal=goal, cpus=["500m", "1", "2", "4"], memories=["1Gi", "2Gi"], workers=2,
        batches=[1, 16],
    )  # fmt: skip


@pytest.mark.parametrize("goal", ["cheapest", "throughputPerCost"])
def test_the_replay_prints_each_samplers_trials_to_the_optimum(
    replay: ModuleType, tmp_path: Path, capsys: pytest.CaptureFixture[str], goal: str
) -> None:
    grid = tmp_path / "grid.json"
    small_grid(grid, goal)
    assert replay.main(["--grid", str(grid), "--samplers", "tpe,random", "--seeds", "3"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert set(out) == {"grid", "samplers"}
    assert out["grid"]["synthetic"] is True and out["grid"]["points"] == 32
    assert out["grid"]["budget"] == 7 and out["grid"]["good_points"] >= 1
    assert set(out["grid"]) >= {"optimum", "target", "direction", "random_expected_trials"}
    assert set(out["samplers"]) == {"tpe", "random"}
    for result in out["samplers"].values():
        assert set(result) == {"fixed_seed", "seeds", "summary"}
        assert [r["seed"] for r in result["seeds"]] == [0, 1, 2]
        assert result["fixed_seed"] == result["seeds"][0]
        for one in result["seeds"]:
            assert set(one) == {"seed", "trials", "proposals", "reached", "within_budget", "found"}
            assert one["reached"] and 1 <= one["trials"] <= 32  # a grid is always reached
            assert one["within_budget"] == (one["trials"] <= 7)
        assert result["summary"]["runs"] == 3 and result["summary"]["reached"] == 3


def test_the_same_seed_replays_the_same_run(replay: ModuleType, tmp_path: Path) -> None:
    grid = tmp_path / "grid.json"
    small_grid(grid)
    truth = replay.read_truth(grid)
    assert replay.replay(truth, "tpe", 4) == replay.replay(truth, "tpe", 4)


def test_a_grid_missing_a_point_is_refused(replay: ModuleType, tmp_path: Path) -> None:
    grid = tmp_path / "grid.json"
    small_grid(grid)
    data = json.loads(grid.read_text())
    data["points"].pop()
    grid.write_text(json.dumps(data))
    with pytest.raises(InvalidInput, match="1 grid points missing"):
        replay.read_truth(grid)


def test_without_a_grid_the_script_says_how_to_make_one(
    replay: ModuleType, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert replay.main(["--grid", str(tmp_path / "absent.json")]) == 2
    assert "measure a grid into it first" in capsys.readouterr().err
