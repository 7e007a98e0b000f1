"""A CPU-bound model to right-size: a multi-layer perceptron saved as TorchScript.

    python -m phalanx.examples.tuning_model --out DIR [--inputs 256] [--hidden 2048]
        [--layers 3] [--outputs 10] [--seed 0]

Writes ``DIR/model.pt`` (what ``python -m phalanx.runtimes.torchscript`` serves), with
``phalanx.json`` declaring its instance shape ``[inputs]``. Its weights are random
(seeded): what it computes does not matter, only what it costs. With the defaults one
instance is about 9 million multiply-adds, so a request of 32 instances takes about
10 ms of one core (2-core development machine, torch 2.13), and the CPU a replica is
given, and its threads, decide its latency under load: what ``bench/tuning_grid.py``
measures over a grid of specs.
"""

from __future__ import annotations

import argparse
import json
import warnings
from pathlib import Path

from phalanx.runtimes.torchscript import METADATA_FILE, MODEL_FILE

#: TorchScript works but is deprecated in torch 2.x: the warning is no news in a log.
_DEPRECATED = r"`torch\.jit\.\w+` is deprecated"


def main(argv: list[str] | None = None) -> int:
    """Write the model; 0 on success."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--out", type=Path, required=True, help="The directory to write.")
    parser.add_argument("--inputs", type=int, default=256)
    parser.add_argument("--hidden", type=int, default=2048)
    parser.add_argument("--layers", type=int, default=3, help="Hidden layers.")
    parser.add_argument("--outputs", type=int, default=10)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    if min(args.inputs, args.hidden, args.layers, args.outputs) < 1:
        parser.error("every size must be at least 1")
    import torch  # noqa: PLC0415  # an example's dependency, not phalanx's

    torch.manual_seed(args.seed)
    layers: list[torch.nn.Module] = []
    width = args.inputs
    for _ in range(args.layers):
        layers += [torch.nn.Linear(width, args.hidden), torch.nn.ReLU()]
        width = args.hidden
    layers.append(torch.nn.Linear(width, args.outputs))
    model = torch.nn.Sequential(*layers).eval()
    args.out.mkdir(parents=True, exist_ok=True)
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=_DEPRECATED)
        scripted = torch.jit.script(model)
        metadata = json.dumps({"instance_shape": [args.inputs]})
        torch.jit.save(scripted, str(args.out / MODEL_FILE), _extra_files={METADATA_FILE: metadata})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
