"""Pick the best model of a sweep: the highest validation accuracy wins.

Takes the sweep's items and what each produced, as the JSON lists a fan-out's outputs
render to (one entry per item, ``null`` for an item that produced none): the learning
rates (``--lrs``), the validation accuracies (``--accuracies``) and the model files
(``--models``). Copies the winning model to ``--model-out`` and writes the choice as
JSON to ``--choice``: its index, learning rate and accuracy, and every candidate. Ties
go to the earliest item. Fails (exit 1) when the lists differ in length or no item has an
accuracy.

    python -m phalanx.examples.pipelines.best --lrs '[0.01, 0.1]' \
        --accuracies '[0.71, 0.79]' --models '["a.npz", "b.npz"]' --model-out PATH --choice PATH
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
from pathlib import Path
from typing import Any

from phalanx.examples.pipelines.model import write_json


def choose(accuracies: list[Any]) -> int | None:
    """The index of the highest accuracy (the earliest of equals); None: there is none."""
    scored = [(a, i) for i, a in enumerate(accuracies) if isinstance(a, int | float)]
    if not scored:
        return None
    return min(scored, key=lambda pair: (-pair[0], pair[1]))[1]


def _json_list(parser: argparse.ArgumentParser, name: str, text: str) -> list[Any]:
    try:
        value = json.loads(text)
    except ValueError:
        parser.error(f"{name}: {text[:60]!r} is not JSON")
    if not isinstance(value, list):
        parser.error(f"{name}: expected a JSON list, got {text[:60]!r}")
    return value


def main(argv: list[str] | None = None) -> int:
    """Choose, copy the model and write the choice; 0 on success."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lrs", required=True, help="JSON list: each item's learning rate.")
    parser.add_argument("--accuracies", required=True, help="JSON list: each item's accuracy.")
    parser.add_argument("--models", required=True, help="JSON list: each item's model file.")
    parser.add_argument("--model-out", type=Path, required=True, help="The best model's copy.")
    parser.add_argument("--choice", type=Path, required=True, help="Where to write the choice.")
    args = parser.parse_args(argv)
    lrs = _json_list(parser, "--lrs", args.lrs)
    accuracies = _json_list(parser, "--accuracies", args.accuracies)
    models = _json_list(parser, "--models", args.models)
    if not len(lrs) == len(accuracies) == len(models):
        print(
            f"{len(lrs)} learning rates, {len(accuracies)} accuracies and {len(models)} "
            "models: expected one of each per item",
            file=sys.stderr,
        )
        return 1
    index = choose(accuracies)
    if index is None:
        print("no item of the sweep reported an accuracy", file=sys.stderr)
        return 1
    args.model_out.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(models[index], args.model_out)
    candidates = [
        {"index": i, "lr": lr, "accuracy": accuracy}
        for i, (lr, accuracy) in enumerate(zip(lrs, accuracies, strict=True))
    ]
    best = {"index": index, "lr": lrs[index], "accuracy": accuracies[index]}
    write_json(args.choice, {**best, "candidates": candidates})
    print(f"best: item {index}, lr={lrs[index]}, validation accuracy {accuracies[index]}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
