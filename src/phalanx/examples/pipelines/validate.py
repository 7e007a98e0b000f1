"""Validate: score a trained model on the validation split.

Reads the model (``--model``) and the prep step's directory (``--data``); writes a JSON
report (``--metrics``): accuracy, log loss and the confusion counts on the validation
rows. The pipeline reads ``accuracy`` from it as an output param.

    python -m phalanx.examples.pipelines.validate --data DIR --model PATH --metrics PATH
"""

from __future__ import annotations

import argparse
from pathlib import Path

from phalanx.examples.pipelines.model import VAL_FILE, Model, evaluate, load_split, write_json


def main(argv: list[str] | None = None) -> int:
    """Score the model and write the report; 0 on success."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, required=True, help="The prep step's directory.")
    parser.add_argument("--model", type=Path, required=True, help="The trained model.")
    parser.add_argument("--metrics", type=Path, required=True, help="Where to write the report.")
    args = parser.parse_args(argv)
    report = evaluate(Model.load(args.model), *load_split(args.data / VAL_FILE))
    write_json(args.metrics, report)
    print(f"validation accuracy {report['accuracy']:.4f} on {report['rows']} rows")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
