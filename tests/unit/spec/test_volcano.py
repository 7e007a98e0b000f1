"""Volcano vcjob and Queue documents import into the same phalanx documents."""

from __future__ import annotations

import pytest
import yaml
from pydantic import ValidationError

from phalanx.domain.errors import DocumentError
from phalanx.domain.node import TaintEffect, Toleration
from phalanx.domain.resources import Resources
from phalanx.spec import JobDocument, QueueDocument, import_volcano_job, load_documents
from tests.unit.spec.examples import VOLCANO_JOB, VOLCANO_QUEUE

GiB = 2**30


def test_vcjob_imports_as_a_job() -> None:
    (document,) = load_documents(VOLCANO_JOB, source="vcjob.yaml")
    assert isinstance(document, JobDocument)
    assert document.metadata.annotations == {"phalanx.io/priority-class": "prio-1000"}
    job = document.to_domain()
    assert (job.name, job.queue, job.priority, job.min_available, job.max_retry) == (
        "tf-dist",
        "nlp",
        1000,
        3,
        5,
    )
    ps, worker = job.roles
    # requests win over limits per resource; the sidecar only has limits
    assert ps.resources == Resources.of({"cpu": 750, "memory": 1.5 * GiB})
    assert ps.command == ("sh", "-c", "python ps.py")
    assert dict(ps.node_selector) == {"zone": "a"}
    assert ps.tolerations == (
        Toleration(key="dedicated", value="gpu", effect=TaintEffect.NO_SCHEDULE),
    )
    assert worker.resources == Resources.of({"gpu": 1, "cpu": 4000})
    assert (worker.replicas, worker.command, worker.depends_on) == (2, (), ("ps",))
    # the first container's image; the sidecar's is not run
    assert (ps.image, worker.image) == ("tf:2", "tf:2")


def test_volcano_queue_imports_as_a_queue() -> None:
    (document,) = load_documents(VOLCANO_QUEUE)
    assert isinstance(document, QueueDocument)
    queue = document.to_domain()
    assert (queue.name, queue.parent, queue.weight, queue.reclaimable) == (
        "nlp",
        "research",
        4.0,
        False,
    )
    assert queue.guarantee == Resources.of({"gpu": 4})
    assert queue.deserved == Resources.of({"gpu": 8})
    assert queue.capability == Resources.of({"cpu": 100_000, "memory": 200 * GiB, "gpu": 16})


@pytest.mark.parametrize(
    ("class_name", "mapping", "priority"),
    [
        ("high", {"high": 1000}, 1000),
        ("system-node-critical", None, 2_000_001_000),
        ("batch-50", None, 50),
        ("best-effort", None, 0),
    ],
)
def test_priority_class_names_map_to_integers(
    class_name: str, mapping: dict[str, int] | None, priority: int
) -> None:
    raw = yaml.safe_load(VOLCANO_JOB)
    raw["spec"]["priorityClassName"] = class_name
    document = (
        import_volcano_job(raw)
        if mapping is None
        else import_volcano_job(raw, priority_classes=mapping)
    )
    assert document.spec.priority == priority
    assert document.metadata.annotations["phalanx.io/priority-class"] == class_name


def test_min_available_zero_means_no_gang() -> None:
    raw = yaml.safe_load(VOLCANO_JOB)
    raw["spec"]["minAvailable"] = 0
    assert import_volcano_job(raw).spec.min_available == 1


def test_structural_errors_raise_validation_errors_from_the_importer() -> None:
    raw = yaml.safe_load(VOLCANO_JOB)
    raw["spec"]["tasks"] = {"ps": 1}
    with pytest.raises(ValidationError):
        import_volcano_job(raw)


@pytest.mark.parametrize(
    ("edit", "path"),
    [
        (lambda t: t.replace("tasks:\n", "tasks: {}\nx:\n"), "spec.tasks: expected a list"),
        (
            lambda t: t.replace("replicas: 2", "replicas: -1"),
            "spec.tasks[1].replicas: must be >= 1",
        ),
        (lambda t: t.replace("name: worker", "name: Worker"), "spec.tasks[1].name"),
        (
            lambda t: t.replace("nvidia.com/gpu: 1", "nvidia.com/gpu: one"),
            "spec.tasks[1].template.spec",
        ),
        (lambda t: t.replace("queue: nlp", "queue: [nlp]"), "spec.queue: expected a string"),
        (lambda t: t.replace("minAvailable: 3", "minAvailable: 9"), "spec.minAvailable: 9 is more"),
        (
            lambda t: t.replace("image: tf:2", "image: TF 2", 1),
            "spec.tasks[0].template.spec.containers[0].image: 'TF 2' is not a valid image",
        ),
    ],
)
def test_bad_volcano_fields_name_their_path(edit: object, path: str) -> None:
    assert callable(edit)
    with pytest.raises(DocumentError) as caught:
        load_documents(edit(VOLCANO_JOB), source="vcjob.yaml")
    assert "vcjob.yaml document 1 (Job tf-dist): " + path in str(caught.value)
