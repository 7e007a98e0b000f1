"""The example pipelines: every shipped document validates, every step names a program
that exists, and the programs train for real (in-process, on small data)."""

from __future__ import annotations

import importlib
import json
from pathlib import Path

import pytest

from phalanx.examples.pipelines import (
    DIRECTORY,
    PIPELINES,
    QUEUE,
    best,
    documents,
    prep,
    promote,
    train,
    validate,
)
from phalanx.spec import QueueDocument, load_file
from phalanx.spec.loader import load_pipelines
from phalanx.spec.pipeline import build_graph

PACKAGE = "phalanx.examples.pipelines"


def test_the_folder_holds_exactly_the_listed_documents() -> None:
    assert sorted(p.name for p in DIRECTORY.glob("*.yaml")) == sorted([QUEUE, *PIPELINES])
    assert [type(d) for d in load_file(DIRECTORY / QUEUE)] == [QueueDocument]


@pytest.mark.parametrize("name", PIPELINES)
def test_every_example_pipeline_validates_and_runs_shipped_programs(name: str) -> None:
    [document] = load_pipelines((DIRECTORY / name).read_text(), source=name)
    graph = build_graph(document.spec)
    queue = load_file(DIRECTORY / QUEUE)[0]
    for node in graph.steps.values():
        assert node.queue == queue.metadata.name
        assert node.command is not None
        python, flag, module = node.command[:3]
        assert (python, flag) == ("{{params.python}}", "-m")
        assert module.startswith(f"{PACKAGE}.")
        assert callable(importlib.import_module(module).main), module


def test_documents_lists_the_queue_first() -> None:
    assert [p.name for p in documents()] == [QUEUE, *PIPELINES]


def _prepared(tmp_path: Path) -> Path:
    data = tmp_path / "data"
    assert prep.main(["--out", str(data), "--rows", "600", "--stats", str(tmp_path / "s")]) == 0
    return data


def test_prep_train_validate_learn_from_the_generated_data(tmp_path: Path) -> None:
    data = _prepared(tmp_path)
    stats = json.loads((tmp_path / "s").read_text())
    assert (stats["train_rows"], stats["val_rows"], stats["features"]) == (450, 150, 8)
    assert json.loads((data / "stats.json").read_text()) == stats
    figures = {}
    for lr in (0.0001, 0.5):
        model, metrics = tmp_path / f"m{lr}.npz", tmp_path / f"m{lr}.json"
        args = ["--data", str(data), "--model", str(model), "--metrics", str(metrics)]
        assert train.main([*args, "--lr", str(lr), "--epochs", "80"]) == 0
        report = tmp_path / f"r{lr}.json"
        assert (
            validate.main(["--data", str(data), "--model", str(model), "--metrics", str(report)])
            == 0
        )
        figures[lr] = (json.loads(metrics.read_text()), json.loads(report.read_text()))
    slow, good = figures[0.0001], figures[0.5]
    assert good[0]["final_loss"] < good[0]["first_loss"] < 0.7  # the loss went down
    assert good[0]["final_loss"] < slow[0]["final_loss"]  # a fitting rate learns faster
    assert good[1]["accuracy"] > 0.7 and good[1]["rows"] == 150
    counts = [
        good[1][k] for k in ("true_positive", "false_positive", "true_negative", "false_negative")
    ]
    assert sum(counts) == 150


def test_train_validate_flag_scores_the_validation_split_as_validate_does(tmp_path: Path) -> None:
    data = _prepared(tmp_path)
    model, metrics, report = tmp_path / "m.npz", tmp_path / "m.json", tmp_path / "r.json"
    args = ["--data", str(data), "--model", str(model), "--metrics", str(metrics), "--validate"]
    assert train.main(args) == 0
    assert (
        validate.main(["--data", str(data), "--model", str(model), "--metrics", str(report)]) == 0
    )
    assert json.loads(metrics.read_text())["validation"] == json.loads(report.read_text())


def test_a_diverging_rate_fails_the_training(tmp_path: Path) -> None:
    data = _prepared(tmp_path)
    args = ["--data", str(data), "--model", str(tmp_path / "m"), "--metrics", str(tmp_path / "j")]
    assert train.main([*args, "--lr", "1e300", "--epochs", "5"]) == 1
    assert not (tmp_path / "m").exists()


def test_best_picks_the_highest_accuracy_and_the_earliest_of_equals(tmp_path: Path) -> None:
    models = []
    for i in range(3):
        models.append(str(tmp_path / f"{i}.npz"))
        Path(models[-1]).write_bytes(bytes([i]))
    out, choice = tmp_path / "best.npz", tmp_path / "choice.json"
    args = ["--lrs", "[0.1, 0.2, 0.3]", "--models", json.dumps(models)]
    paths = ["--model-out", str(out), "--choice", str(choice)]
    assert best.main([*args, "--accuracies", "[0.7, null, 0.9]", *paths]) == 0
    assert json.loads(choice.read_text())["lr"] == 0.3 and out.read_bytes() == bytes([2])
    assert best.main([*args, "--accuracies", "[0.8, 0.8, 0.6]", *paths]) == 0
    assert json.loads(choice.read_text())["index"] == 0
    assert best.main([*args, "--accuracies", "[null, null, null]", *paths]) == 1
    assert best.main([*args, "--accuracies", "[0.8]", *paths]) == 1


def test_promote_publishes_only_at_or_above_the_threshold(tmp_path: Path) -> None:
    model = tmp_path / "m.npz"
    model.write_bytes(b"weights")
    out = tmp_path / "release"
    assert (
        promote.main(
            ["--model", str(model), "--accuracy", "0.7", "--threshold", "0.8", "--out", str(out)]
        )
        == 1
    )
    assert not out.exists()
    assert (
        promote.main(
            ["--model", str(model), "--accuracy", "0.8", "--threshold", "0.8", "--out", str(out)]
        )
        == 0
    )
    assert (out / "model.npz").read_bytes() == b"weights"
    assert json.loads((out / "release.json").read_text())["accuracy"] == 0.8
