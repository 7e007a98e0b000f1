"""Train: fit a logistic regression to the train split by gradient descent.

Reads the prep step's directory (``--data``), writes the model (``--model``, an ``.npz``)
and a JSON metrics file (``--metrics``): the learning rate, epochs, the training loss at
the first and last epoch and the training accuracy; with ``--validate``, also the
model's figures on the validation split under ``validation`` (what a sweep compares).
Fails (exit 1) when the loss is not finite: a learning rate that diverges is an error.

    python -m phalanx.examples.pipelines.train --data DIR --model PATH --metrics PATH \
        [--lr 0.1] [--epochs 200] [--validate]
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path
from typing import Any

from phalanx.examples.pipelines.model import (
    TRAIN_FILE,
    VAL_FILE,
    evaluate,
    fit,
    load_split,
    write_json,
)


def main(argv: list[str] | None = None) -> int:
    """Train and write the model and its metrics; 0 on success."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, required=True, help="The prep step's directory.")
    parser.add_argument("--model", type=Path, required=True, help="Where to write the model.")
    parser.add_argument("--metrics", type=Path, required=True, help="Where to write metrics.")
    parser.add_argument("--lr", type=float, default=0.1)
    parser.add_argument("--epochs", type=int, default=200)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--validate", action="store_true", help="Also score the val split.")
    args = parser.parse_args(argv)
    if not args.lr > 0 or args.epochs < 1:
        parser.error("need --lr > 0 and --epochs >= 1")
    x, y = load_split(args.data / TRAIN_FILE)
    model, losses = fit(x, y, lr=args.lr, epochs=args.epochs, seed=args.seed)
    if not math.isfinite(losses[-1]):
        print(f"training diverged at lr={args.lr}: loss {losses[-1]}", file=sys.stderr)
        return 1
    model.save(args.model)
    metrics: dict[str, Any] = {
        "lr": args.lr,
        "epochs": args.epochs,
        "first_loss": losses[0],
        "final_loss": losses[-1],
        "train_accuracy": evaluate(model, x, y)["accuracy"],
    }
    if args.validate:
        metrics["validation"] = evaluate(model, *load_split(args.data / VAL_FILE))
    write_json(args.metrics, metrics)
    print(
        f"lr={args.lr}: loss {losses[0]:.4f} -> {losses[-1]:.4f}, "
        f"train accuracy {metrics['train_accuracy']:.3f}"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
