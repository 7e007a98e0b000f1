"""A role's (and a command step's) ``model: {name, path}``: a DNS label and a directory
strictly below the task's working directory; one role per model name in a job."""

from __future__ import annotations

import pytest

from phalanx.domain.errors import DocumentError
from phalanx.spec import JobDocument, load_documents
from phalanx.spec.pipeline.dag import build_graph
from phalanx.spec.pipeline.document import PipelineDocument

JOB = """\
apiVersion: phalanx/v1
kind: Job
metadata: {name: fit}
spec:
  roles:
  - {name: trainer, replicas: 2, resources: {cpu: 1}, model: MODEL}
  - {name: eval, replicas: 1, resources: {cpu: 1}, model: OTHER}
"""


def job(model: str, other: str = "null") -> JobDocument:
    (document,) = load_documents(JOB.replace("MODEL", model).replace("OTHER", other))
    assert isinstance(document, JobDocument)
    return document


def test_a_role_declares_the_model_its_first_task_writes() -> None:
    spec = job("{name: mnist, path: out/model/}").spec
    assert spec.roles[0].model is not None
    assert (spec.roles[0].model.name, spec.roles[0].model.path) == ("mnist", "out/model")
    assert spec.roles[1].model is None


@pytest.mark.parametrize(
    ("model", "message"),
    [
        ("{name: mnist, path: /etc}", "'/etc' is not a relative path"),
        ("{name: mnist, path: ../../phalanx.db}", "leaves or repeats its directory"),
        ("{name: mnist, path: a/../b}", "leaves or repeats its directory"),
        ("{name: mnist, path: a/./b}", "leaves or repeats its directory"),
        ("{name: mnist, path: ''}", "at least 1 character"),
        ("{name: MNIST, path: model}", "is not a valid name"),
        ("{name: mnist}", "path"),
        ("{name: mnist, path: model, extra: 1}", "extra"),
    ],
)
def test_a_bad_model_is_refused_naming_the_field(model: str, message: str) -> None:
    with pytest.raises(DocumentError) as caught:
        job(model)
    assert message in str(caught.value)
    assert "roles[0].model" in str(caught.value)


def test_two_roles_cannot_write_one_model() -> None:
    with pytest.raises(DocumentError) as caught:
        job("{name: mnist, path: a}", "{name: mnist, path: b}")
    assert "model 'mnist' is written by two roles" in str(caught.value)
    assert "roles[1].model.name" in str(caught.value)


PIPELINE = """\
apiVersion: phalanx/v1
kind: Pipeline
metadata: {name: p}
spec:
  defaults: {resources: {cpu: 1}}
  components:
    fitter: {command: "train", model: {name: tiny, path: model}}
  steps:
    fit: {command: "train {{params.lr}}", model: {name: small, path: out}}
    reuse: {uses: fitter}
    whole: {job: {roles: [{name: r, replicas: 1, resources: {cpu: 1}, model: {name: big, path: m}}]}}
  params: {lr: 0.1}
"""


def test_a_command_steps_model_is_the_steps_or_its_components() -> None:
    (document,) = load_documents(PIPELINE)
    assert isinstance(document, PipelineDocument)
    models = {name: node.model for name, node in build_graph(document.spec).steps.items()}
    assert models["fit"] is not None and models["fit"].name == "small"
    assert models["reuse"] is not None and models["reuse"].name == "tiny"
    assert models["whole"] is None  # a job step's roles declare theirs


def test_a_job_step_cannot_declare_a_model_beside_its_job() -> None:
    text = PIPELINE.replace("whole: {job:", "whole: {model: {name: x, path: m}, job:")
    with pytest.raises(DocumentError) as caught:
        load_documents(text)
    assert "steps.whole.model: is not allowed together with job" in str(caught.value)
