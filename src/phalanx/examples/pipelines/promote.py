"""Promote: publish a validated model as a release.

Copies the model (``--model``) into the directory ``--out`` with a ``release.json``
manifest: where the model came from, its validation accuracy and the threshold it
passed. The pipeline runs this step only when the accuracy reaches the threshold (its
``when``); the step checks it again, so a promotion run by hand cannot publish a model
below it (exit 1).

    python -m phalanx.examples.pipelines.promote --model PATH --accuracy 0.8 \
        --threshold 0.75 --out DIR
"""

from __future__ import annotations

import argparse
import shutil
import sys
from pathlib import Path

from phalanx.examples.pipelines.model import write_json

RELEASE_FILE = "release.json"
MODEL_FILE = "model.npz"


def main(argv: list[str] | None = None) -> int:
    """Copy the model and write its manifest; 0 on success."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", type=Path, required=True, help="The validated model.")
    parser.add_argument("--accuracy", type=float, required=True)
    parser.add_argument("--threshold", type=float, required=True)
    parser.add_argument("--out", type=Path, required=True, help="The release directory.")
    args = parser.parse_args(argv)
    if args.accuracy < args.threshold:
        print(
            f"accuracy {args.accuracy} is below the threshold {args.threshold}: not promoted",
            file=sys.stderr,
        )
        return 1
    args.out.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(args.model, args.out / MODEL_FILE)
    manifest = {
        "model": MODEL_FILE,
        "source": str(args.model),
        "accuracy": args.accuracy,
        "threshold": args.threshold,
    }
    write_json(args.out / RELEASE_FILE, manifest)
    print(f"promoted {args.model} (accuracy {args.accuracy} >= {args.threshold})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
