"""Train (torch): fit a small neural network to the train split and save it as TorchScript.

The network: one hidden layer of ``--hidden`` ReLU units (0: none, a logistic
regression), fitted to the prep step's train split (``--data``) by full-batch Adam on
the log loss, on the CPU. Writes ``model.pt`` into the directory ``--model``: TorchScript
that takes rows of the features (float32, ``[N, features]``) and returns each row's
probability of class 1 (``[N]``), declaring that instance shape in its extra file
``phalanx.json``: what ``python -m phalanx.runtimes.torchscript`` serves, and checks
requests against. Writes the metrics JSON (``--metrics``): the settings, the training
loss at the first and the last epoch, the accuracy on the train and validation splits.
The same data and ``--seed`` give the same model. Fails (exit 1), writing nothing, when
the loss is not finite or the data cannot be read.

    python -m phalanx.examples.pipelines.train_torch --data DIR --model DIR --metrics PATH \
        [--lr 0.05] [--epochs 200] [--seed 0] [--hidden 16]
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import warnings
from pathlib import Path
from typing import Any

import numpy as np

from phalanx.examples.pipelines.model import TRAIN_FILE, VAL_FILE, load_split, write_json
from phalanx.runtimes.torchscript import METADATA_FILE, MODEL_FILE

#: TorchScript works but is deprecated in torch 2.x: the warning is no news in a step's log.
_DEPRECATED = r"`torch\.jit\.\w+` is deprecated"


def main(argv: list[str] | None = None) -> int:
    """Train and write the model and its metrics; 0 on success."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--data", type=Path, required=True, help="The prep step's directory.")
    parser.add_argument("--model", type=Path, required=True, help="The directory to write.")
    parser.add_argument("--metrics", type=Path, required=True, help="Where to write metrics.")
    parser.add_argument("--lr", type=float, default=0.05)
    parser.add_argument("--epochs", type=int, default=200)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--hidden", type=int, default=16, help="Hidden units (0: none).")
    args = parser.parse_args(argv)
    if not args.lr > 0 or args.epochs < 1 or args.hidden < 0:
        parser.error("need --lr > 0, --epochs >= 1 and --hidden >= 0")
    try:
        (x, y), (val_x, val_y) = (
            load_split(args.data / TRAIN_FILE),
            load_split(args.data / VAL_FILE),
        )
    except (OSError, KeyError, ValueError) as error:
        print(f"cannot read the prep step's data in {args.data}: {error}", file=sys.stderr)
        return 1
    import torch  # noqa: PLC0415  # heavy and optional: only this step needs it

    torch.manual_seed(args.seed)
    net = _network(torch, x.shape[1], args.hidden)
    losses = _fit(torch, net, x, y, lr=args.lr, epochs=args.epochs)
    if not math.isfinite(losses[-1]):
        print(f"training diverged at lr={args.lr}: loss {losses[-1]}", file=sys.stderr)
        return 1
    model = torch.nn.Sequential(net, torch.nn.Sigmoid(), torch.nn.Flatten(0)).eval()
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=_DEPRECATED, category=DeprecationWarning)
        scripted = torch.jit.script(model)
        args.model.mkdir(parents=True, exist_ok=True)
        metadata = json.dumps({"instance_shape": [x.shape[1]]})
        torch.jit.save(
            scripted, str(args.model / MODEL_FILE), _extra_files={METADATA_FILE: metadata}
        )
    metrics: dict[str, Any] = {
        "lr": args.lr,
        "epochs": args.epochs,
        "hidden": args.hidden,
        "seed": args.seed,
        "first_loss": losses[0],
        "final_loss": losses[-1],
        "train_accuracy": _accuracy(torch, model, x, y),
        "val_accuracy": _accuracy(torch, model, val_x, val_y),
    }
    write_json(args.metrics, metrics)
    print(
        f"lr={args.lr} hidden={args.hidden}: loss {losses[0]:.4f} -> {losses[-1]:.4f}, "
        f"accuracy {metrics['train_accuracy']:.3f} (train), {metrics['val_accuracy']:.3f} (val)"
    )
    return 0


def _network(torch: Any, features: int, hidden: int) -> Any:
    """Logits of class 1, ``[N, 1]``, from rows of ``features``."""
    if hidden == 0:
        return torch.nn.Sequential(torch.nn.Linear(features, 1))
    return torch.nn.Sequential(
        torch.nn.Linear(features, hidden), torch.nn.ReLU(), torch.nn.Linear(hidden, 1)
    )


def _fit(
    torch: Any, net: Any, x: np.ndarray, y: np.ndarray, *, lr: float, epochs: int
) -> list[float]:
    """The training loss before each of ``epochs`` steps of Adam, then after the last one;
    a loss that is not finite ends the list."""
    inputs = torch.tensor(x, dtype=torch.float32)
    targets = torch.tensor(y, dtype=torch.float32)
    optimizer = torch.optim.Adam(net.parameters(), lr=lr)
    loss_of = torch.nn.BCEWithLogitsLoss()
    losses: list[float] = []
    for _ in range(epochs):
        loss = loss_of(net(inputs).squeeze(1), targets)
        losses.append(float(loss.detach()))
        if not math.isfinite(losses[-1]):
            return losses
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    with torch.no_grad():
        losses.append(float(loss_of(net(inputs).squeeze(1), targets)))
    return losses


def _accuracy(torch: Any, model: Any, x: np.ndarray, y: np.ndarray) -> float:
    """The share of rows whose probability of class 1 is on the side of their label."""
    with torch.no_grad():
        probability = model(torch.tensor(x, dtype=torch.float32)).numpy()
    return float(np.mean((probability >= 0.5) == (y >= 0.5)))


if __name__ == "__main__":
    raise SystemExit(main())
