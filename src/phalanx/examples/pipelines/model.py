"""Logistic regression by full-batch gradient descent, in numpy: what the example steps share.

A model is a weight vector and a bias; ``fit`` minimises the mean log loss (with a small
L2 penalty) and returns the loss after each epoch, so a caller can show that training
went down. Files: a split is an ``.npz`` with ``x`` (rows x features) and ``y`` (0/1); a
model is an ``.npz`` with ``w`` and ``b``. The same seed and data give the same model.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

#: Files of the data artifact (a directory) the prep step writes.
TRAIN_FILE = "train.npz"
VAL_FILE = "val.npz"
STATS_FILE = "stats.json"


@dataclass(frozen=True, slots=True)
class Model:
    """``sigmoid(x @ w + b)`` is the probability of class 1."""

    w: np.ndarray
    b: float

    def probability(self, x: np.ndarray) -> np.ndarray:
        """P(y = 1 | x) for each row of ``x``."""
        return _sigmoid(x @ self.w + self.b)

    def save(self, path: Path) -> None:
        """Write the model to ``path`` (an ``.npz``; the name is kept as given)."""
        path.parent.mkdir(parents=True, exist_ok=True)
        with path.open("wb") as stream:
            np.savez(stream, w=self.w, b=np.array(self.b))

    @classmethod
    def load(cls, path: Path) -> Model:
        """The model ``save`` wrote to ``path``."""
        with np.load(path) as data:
            return cls(w=np.array(data["w"], dtype=float), b=float(data["b"]))


def _sigmoid(z: np.ndarray) -> np.ndarray:
    result: np.ndarray = 1.0 / (1.0 + np.exp(-np.clip(z, -60.0, 60.0)))
    return result


def log_loss(model: Model, x: np.ndarray, y: np.ndarray) -> float:
    """Mean negative log likelihood of ``y`` under ``model``."""
    p = np.clip(model.probability(x), 1e-12, 1.0 - 1e-12)
    return float(-np.mean(y * np.log(p) + (1.0 - y) * np.log(1.0 - p)))


def fit(
    x: np.ndarray, y: np.ndarray, *, lr: float, epochs: int, l2: float = 1e-4, seed: int = 0
) -> tuple[Model, list[float]]:
    """The model after ``epochs`` steps of gradient descent of rate ``lr`` from small
    random weights, and the training loss after each step. A rate so large that the
    weights overflow stops the descent early, its last loss not finite."""
    rng = np.random.default_rng(seed)
    w = np.asarray(rng.normal(0.0, 0.01, size=(x.shape[1],)), dtype=float)
    b = 0.0
    losses: list[float] = []
    with np.errstate(over="ignore", invalid="ignore"):  # divergence shows in the loss
        for _ in range(epochs):
            error = _sigmoid(x @ w + b) - y
            w = w - lr * (x.T @ error / len(y) + l2 * w)
            b = b - lr * float(error.mean())
            losses.append(log_loss(Model(w=w, b=b), x, y) if np.isfinite(w).all() else math.inf)
            if not math.isfinite(losses[-1]):
                break
    return Model(w=w, b=b), losses


def evaluate(model: Model, x: np.ndarray, y: np.ndarray) -> dict[str, Any]:
    """Accuracy, log loss and the confusion counts of ``model`` on ``(x, y)``."""
    predicted = model.probability(x) >= 0.5
    truth = y >= 0.5
    return {
        "rows": len(y),
        "accuracy": float(np.mean(predicted == truth)),
        "log_loss": log_loss(model, x, y),
        "true_positive": int(np.sum(predicted & truth)),
        "false_positive": int(np.sum(predicted & ~truth)),
        "true_negative": int(np.sum(~predicted & ~truth)),
        "false_negative": int(np.sum(~predicted & truth)),
    }


def load_split(path: Path) -> tuple[np.ndarray, np.ndarray]:
    """``(x, y)`` of a split file."""
    with np.load(path) as data:
        return np.array(data["x"], dtype=float), np.array(data["y"], dtype=float)


def save_split(path: Path, x: np.ndarray, y: np.ndarray) -> None:
    """Write ``(x, y)`` to ``path``."""
    with path.open("wb") as stream:
        np.savez(stream, x=x, y=y)


def write_json(path: Path, value: Any) -> None:
    """``value`` as JSON at ``path`` (its directory made): how a step hands back an output
    param."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(value, indent=2) + "\n", encoding="utf-8")
