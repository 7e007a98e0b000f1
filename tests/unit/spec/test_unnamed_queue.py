"""A Job that names no queue is told apart from one that names a queue, ``default``
included: each form (phalanx, Volcano, Kubeflow, OpenPAI) leaves ``spec.queue`` unset
when its source names none, so the server can send the job to its user's default queue
(``phalanx.control.submit.resolve_queues``)."""

from __future__ import annotations

import pytest
import yaml

from phalanx.spec import JobDocument, load_documents
from tests.unit.spec.examples import MINIMAL_JOB, VOLCANO_JOB
from tests.unit.spec.kubeflow_examples import PYTORCH_JOB, TF_JOB
from tests.unit.spec.openpai_examples import SMALL


def with_queue(text: str, queue: str) -> str:
    """The phalanx or OpenPAI ``text`` naming ``queue`` in its own place."""
    raw = yaml.safe_load(text)
    if "protocolVersion" in raw:
        raw.setdefault("defaults", {})["virtualCluster"] = queue
    else:
        raw["spec"]["queue"] = queue
    return yaml.safe_dump(raw)


def one_job(text: str) -> JobDocument:
    (document,) = load_documents(text)
    assert isinstance(document, JobDocument)
    return document


@pytest.mark.parametrize(
    "text",
    [
        pytest.param(MINIMAL_JOB, id="phalanx"),
        pytest.param(VOLCANO_JOB.replace("  queue: nlp\n", ""), id="volcano"),
        pytest.param(TF_JOB, id="kubeflow"),
        pytest.param(SMALL, id="openpai"),
    ],
)
def test_a_job_naming_no_queue_leaves_its_queue_unset(text: str) -> None:
    document = one_job(text)
    assert "queue" not in document.spec.model_fields_set
    # a server without default queues sends it where it always went
    assert document.spec.queue == "default"


@pytest.mark.parametrize(
    ("text", "queue"),
    [
        pytest.param(with_queue(MINIMAL_JOB, "default"), "default", id="phalanx"),
        pytest.param(VOLCANO_JOB, "nlp", id="volcano"),
        pytest.param(PYTORCH_JOB, "nlp", id="kubeflow"),
        pytest.param(with_queue(SMALL, "team-a"), "team-a", id="openpai"),
    ],
)
def test_a_job_naming_its_queue_keeps_it(text: str, queue: str) -> None:
    document = one_job(text)
    assert "queue" in document.spec.model_fields_set
    assert document.spec.queue == queue
