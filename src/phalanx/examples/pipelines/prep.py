"""Preprocess: generate a labelled data set, split it, standardise it, write it out.

The data: ``rows`` points of ``features`` Gaussian features on unequal scales; the label
is drawn from a logistic model of a hidden weight vector (so no model is perfect: some
labels contradict the features). The train split's mean and standard deviation
standardise both splits (the validation split never leaks into them). Writes, into the
directory ``--out``: ``train.npz``, ``val.npz`` and ``stats.json`` (row counts, feature
count, share of positives, the scaler); ``--stats PATH`` writes the same statistics there
too (a file a pipeline reads output params from).

    python -m phalanx.examples.pipelines.prep --out DIR [--stats PATH] [--rows 2000] \
        [--features 8] [--seed 0]
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np

from phalanx.examples.pipelines.model import (
    STATS_FILE,
    TRAIN_FILE,
    VAL_FILE,
    save_split,
    write_json,
)


def generate(rows: int, features: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Raw features and 0/1 labels; the same arguments give the same data."""
    rng = np.random.default_rng(seed)
    scales = np.geomspace(0.2, 5.0, features)
    x = rng.normal(0.0, 1.0, size=(rows, features)) * scales + rng.normal(0, 2, size=features)
    hidden = rng.normal(0.0, 1.0, size=features) / scales
    logits = 2.0 * (x - x.mean(axis=0)) @ hidden / np.sqrt(features)
    y = (rng.random(rows) < 1.0 / (1.0 + np.exp(-logits))).astype(float)
    return x, y


def main(argv: list[str] | None = None) -> int:
    """Write the splits and their statistics; 0 on success."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True, help="Directory to write into.")
    parser.add_argument("--stats", type=Path, help="Also write the statistics here.")
    parser.add_argument("--rows", type=int, default=2000)
    parser.add_argument("--features", type=int, default=8)
    parser.add_argument("--val-share", type=float, default=0.25)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    if args.rows < 8 or not 0.0 < args.val_share < 1.0 or args.features < 1:
        parser.error("need --rows >= 8, --features >= 1 and 0 < --val-share < 1")
    x, y = generate(args.rows, args.features, args.seed)
    val_rows = max(1, int(args.rows * args.val_share))
    order = np.random.default_rng(args.seed + 1).permutation(args.rows)
    val, train = order[:val_rows], order[val_rows:]
    mean, std = x[train].mean(axis=0), x[train].std(axis=0) + 1e-12
    args.out.mkdir(parents=True, exist_ok=True)
    save_split(args.out / TRAIN_FILE, (x[train] - mean) / std, y[train])
    save_split(args.out / VAL_FILE, (x[val] - mean) / std, y[val])
    stats = {
        "train_rows": len(train),
        "val_rows": len(val),
        "features": args.features,
        "positive_share": round(float(y.mean()), 6),
        "scaler": {"mean": mean.round(6).tolist(), "std": std.round(6).tolist()},
    }
    write_json(args.out / STATS_FILE, stats)
    if args.stats is not None:
        write_json(args.stats, stats)
    print(f"wrote {len(train)} training and {len(val)} validation rows to {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
