"""The shipped example pipelines (``phalanx.examples.pipelines``), applied with the CLI
to a real server and run by the local executor: real training on generated data."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import numpy as np

from phalanx.examples.pipelines import DIRECTORY
from tests.integration.control.serving import Api, running_server
from tests.integration.control.test_cli import ok, phalanx
from tests.integration.control.test_pipelines import ended, steps

#: The Python of this test: phalanx and numpy are installed in it.
PYTHON = f"python={sys.executable}"


def _apply(server: Any, *names: str) -> list[str]:
    files = [arg for name in names for arg in ("-f", str(DIRECTORY / name))]
    return ok(phalanx(server, "apply", *files)).splitlines()


def _run(server: Any, api: Api, pipeline: str, *params: str) -> dict[str, Any]:
    args = [arg for param in (PYTHON, *params) for arg in ("-p", param)]
    run_id = ok(phalanx(server, "pipeline", "run", pipeline, *args)).strip()
    view = ended(api, run_id, timeout=120.0)
    assert view["phase"] == "Succeeded", json.dumps(view, indent=1)
    return view


def test_train_validate_promotes_above_the_threshold_and_skips_below(tmp_path: Path) -> None:
    with running_server(tmp_path) as server:
        api = Api(server.url, server.admin_token or "")
        assert _apply(server, "queue.yaml", "train-validate.yaml") == [
            "queue/examples created",
            "pipeline/train-validate created",
        ]
        low_run = _run(server, api, "train-validate", "threshold=0.5")
        low = steps(low_run)
        assert [low[s]["phase"] for s in ("prep", "train", "validate", "promote")] == [
            "Succeeded"
        ] * 4
        data = Path(low["prep"]["outputs"]["data"])
        assert {p.name for p in data.iterdir()} == {"train.npz", "val.npz", "stats.json"}
        assert low["prep"]["outputs"]["rows"] == 1500  # 2000 rows, a quarter held out
        report = json.loads(Path(low["validate"]["outputs"]["report"]).read_text())
        accuracy = low["validate"]["outputs"]["accuracy"]
        assert accuracy == report["accuracy"] and report["rows"] == 500
        assert 0.7 < accuracy < 1.0  # learnt, on labels drawn with noise
        assert low["train"]["outputs"]["loss"] < 0.6  # from log(2) = 0.693 at the start
        release = Path(low["promote"]["outputs"]["release"])
        manifest = json.loads((release / "release.json").read_text())
        assert manifest["accuracy"] == accuracy and manifest["threshold"] == 0.5
        model = Path(low["train"]["outputs"]["model"])
        assert (release / "model.npz").read_bytes() == model.read_bytes()

        high_run = _run(server, api, "train-validate", "threshold=0.99")
        high = steps(high_run)
        assert high["validate"]["outputs"]["accuracy"] == accuracy  # same seed, same model
        assert high["promote"]["phase"] == "Skipped"
        assert "when is false" in high["promote"]["reason"]
        assert high["promote"]["job"] == ""
        assert not Path(str(release).replace(low_run["id"], high_run["id"])).parent.exists()


def test_the_sweep_trains_one_model_per_rate_and_picks_the_most_accurate(
    tmp_path: Path,
) -> None:
    with running_server(tmp_path) as server:
        api = Api(server.url, server.admin_token or "")
        _apply(server, "queue.yaml", "sweep.yaml")
        lrs = [0.001, 0.01, 0.1, 1.0]
        view = _run(server, api, "sweep", f"lrs={json.dumps(lrs)}")
        units = steps(view)
        trained = [units[f"train[{i}]"] for i in range(len(lrs))]
        accuracies = [unit["outputs"]["accuracy"] for unit in trained]
        for lr, unit in zip(lrs, trained, strict=True):  # each item trained at its own rate
            metrics = json.loads(Path(unit["outputs"]["metrics"]).read_text())
            assert metrics["lr"] == lr
            assert metrics["validation"]["accuracy"] == unit["outputs"]["accuracy"]
        assert len(set(accuracies)) > 1, accuracies  # the rate matters
        best = int(np.argmax(accuracies))  # the first of equals, as the step breaks ties
        assert units["best"]["outputs"]["lr"] == lrs[best]
        assert units["best"]["outputs"]["accuracy"] == max(accuracies)
        chosen = Path(units["best"]["outputs"]["model"])
        assert chosen.read_bytes() == Path(trained[best]["outputs"]["model"]).read_bytes()
        record = json.loads(Path(units["best"]["outputs"]["choice"]).read_text())
        assert [c["accuracy"] for c in record["candidates"]] == accuracies
        starts = sorted(unit["started_at"] for unit in trained)
        ends = sorted(unit["finished_at"] for unit in trained)
        assert starts[2] >= ends[0]  # maxParallel 2: the third waits for one to end
