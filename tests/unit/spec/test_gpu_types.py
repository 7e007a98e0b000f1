"""``spec.allowMixedGpuTypes`` and ``roles[].gpuTypes`` of a Job: conversion and every
refusal, naming the field and the fix."""

from __future__ import annotations

import textwrap

import pytest

from phalanx.domain.errors import DocumentError
from phalanx.spec import JobDocument, load_documents

JOB = """\
apiVersion: phalanx/v1
kind: Job
metadata: {name: llm}
spec:
  %s
  roles:
  - name: worker
    replicas: 2
    resources: {cpu: 8, gpu: 8}
    %s
"""


def load(job: str = "", role: str = "") -> JobDocument:
    (document,) = load_documents(textwrap.dedent(JOB % (job, role)))
    assert isinstance(document, JobDocument)
    return document


def test_by_default_one_type_and_any_type() -> None:
    job = load().to_domain()
    assert job.allow_mixed_gpu_types is False
    assert job.roles[0].gpu_types == ()


def test_the_settings_convert_to_the_domain_values() -> None:
    job = load("allowMixedGpuTypes: true", "gpuTypes: [A100-SXM4-80GB, H100]").to_domain()
    assert job.allow_mixed_gpu_types is True
    assert job.roles[0].gpu_types == ("A100-SXM4-80GB", "H100")


@pytest.mark.parametrize(
    ("job", "role", "message"),
    [
        (
            "",
            "gpuTypes: []",
            "spec.roles[0].gpuTypes: the list of GPU types is empty; fix: name the types",
        ),
        (
            "",
            "gpuTypes: [A100, '']",
            "spec.roles[0].gpuTypes[1]: a GPU type is empty; fix: give a model as the nodes' "
            "label phalanx.io/gpu-model names it",
        ),
        (
            "",
            "gpuTypes: [T4, T4]",
            "spec.roles[0].gpuTypes[1]: GPU type 'T4' is named twice; fix: name each type once",
        ),
        ("", "gpuTypes: [A 100]", "spec.roles[0].gpuTypes[0]: 'A 100' is not a valid label value"),
        ("", "gpuTypes: A100", "spec.roles[0].gpuTypes: expected"),
        ("allowMixedGpuTypes: maybe", "", "spec.allowMixedGpuTypes:"),
        ("gpuTypes: [A100]", "", "spec.gpuTypes: unknown field"),
    ],
)
def test_bad_settings_are_refused_with_the_field_and_the_fix(
    job: str, role: str, message: str
) -> None:
    with pytest.raises(DocumentError) as caught:
        load(job, role)
    assert message in str(caught.value)
