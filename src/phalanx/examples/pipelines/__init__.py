"""Example pipelines: real programs (numpy, torch and the standard library) and the documents
that run them.

- ``train-validate.yaml``: preprocess -> train -> validate -> promote, the promotion
  only when the validation accuracy reaches the ``threshold`` param (else Skipped, and
  the run still Succeeds).
- ``sweep.yaml``: a learning-rate sweep fanned out with ``foreach`` (``maxItems``,
  ``maxParallel``), then a step choosing the best model by validation accuracy.
- ``serve-model.yaml``: preprocess -> train a small torch model, registered as the
  next version of the model ``example`` (TorchScript, served by the built-in runtime
  ``phalanx.runtimes.torchscript``); needs torch.
- ``queue.yaml``: the queue ``examples`` they run in.

The steps run ``python -m phalanx.examples.pipelines.STEP`` (``prep``, ``train``,
``train_torch``, ``validate``, ``best``, ``promote``) with the Python named by the
``python`` param.
``python -m phalanx.examples.pipelines`` prints the folder holding the documents.
"""

from __future__ import annotations

from pathlib import Path
from typing import Final

#: The folder of the example documents.
DIRECTORY: Final = Path(__file__).resolve().parent
#: The example Pipeline documents, by file name.
PIPELINES: Final = ("train-validate.yaml", "sweep.yaml", "serve-model.yaml")
#: The Queue document they run in.
QUEUE: Final = "queue.yaml"


def documents() -> list[Path]:
    """Every example document: the queue, then the pipelines."""
    return [DIRECTORY / QUEUE, *(DIRECTORY / name for name in PIPELINES)]
