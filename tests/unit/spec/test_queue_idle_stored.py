"""A queue's idleGpus as the store keeps it: written in its canonical JSON form and read
back, as a restarted server reads every queue, it is the same policy."""

from __future__ import annotations

import pytest

from phalanx.spec.loader import build_document
from phalanx.spec.queue import QueueDocument


@pytest.mark.parametrize("threshold", ["5%", 0.05, "0%", "100%", "12.5%"])
def test_an_idle_policy_reads_back_as_written(threshold: str | float) -> None:
    raw = {
        "apiVersion": "phalanx/v1",
        "kind": "Queue",
        "metadata": {"name": "nlp"},
        "spec": {"idleGpus": {"threshold": threshold, "window": "30m", "action": "stop"}},
    }
    document = build_document(raw)
    assert isinstance(document, QueueDocument)
    stored = document.model_dump(mode="json", by_alias=True, exclude_none=True)
    again = QueueDocument.model_validate(stored)
    assert again.to_domain().idle_gpus == document.to_domain().idle_gpus
