"""A role's ``modelVersion``: NAME, NAME:vN or NAME:vN@sha256:<digest>; the digest is the
domain role's, for the task's PHALANX_MODEL_PATH."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from phalanx.domain.errors import DocumentError
from phalanx.spec import JobDocument, load_documents
from phalanx.spec.model import ModelRef, model_reference

DIGEST = "sha256:" + "ab" * 32

JOB = """\
apiVersion: phalanx/v1
kind: Job
metadata: {name: serve}
spec:
  roles:
  - {name: server, replicas: 1, resources: {cpu: 1}, command: [serve], modelVersion: REF}
"""


def job(reference: str) -> JobDocument:
    (document,) = load_documents(JOB.replace("REF", reference))
    assert isinstance(document, JobDocument)
    return document


@pytest.mark.parametrize(
    ("written", "parsed"),
    [
        ("mnist", ModelRef("mnist")),
        ("mnist:v12", ModelRef("mnist", 12)),
        (f"mnist:v1@{DIGEST}", ModelRef("mnist", 1, DIGEST)),
    ],
)
def test_the_three_forms(written: str, parsed: ModelRef) -> None:
    assert model_reference(written) == parsed
    assert str(parsed) == written
    role = job(f"'{written}'").spec.roles[0]
    assert role.model_version == written
    assert role.to_domain(job(f"'{written}'").spec).model_digest == parsed.digest


@pytest.mark.parametrize(
    "written",
    ["Mnist", "mnist:1", "mnist:v0", "mnist:v1@sha256:ab", f"mnist@{DIGEST}", "mnist:v1:v2", "''"],
)
def test_anything_else_is_refused_naming_the_field_and_the_forms(written: str) -> None:
    with pytest.raises(DocumentError) as caught:
        job(written)
    assert "roles[0].modelVersion" in str(caught.value)
    assert "NAME:vN@sha256:<digest>" in str(caught.value)


@given(
    name=st.from_regex(r"[a-z]([-a-z0-9]{0,20}[a-z0-9])?", fullmatch=True),
    version=st.none() | st.integers(1, 10**8),
)
def test_a_reference_reads_back_as_written(name: str, version: int | None) -> None:
    ref = ModelRef(name, version)
    assert model_reference(str(ref)) == ref
