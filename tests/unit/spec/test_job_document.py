"""Job documents: defaults, merging of placement constraints, durations, commands."""

from __future__ import annotations

import textwrap

import pytest

from phalanx.domain.errors import DocumentError
from phalanx.domain.job import Hostfile, NodeSelectorRequirement, SelectorOperator
from phalanx.domain.node import TaintEffect, Toleration
from phalanx.domain.resources import Resources
from phalanx.spec import JobDocument, load_documents
from tests.unit.spec.examples import MINIMAL_JOB


def load_job(text: str) -> JobDocument:
    (document,) = load_documents(textwrap.dedent(text))
    assert isinstance(document, JobDocument)
    return document


def test_defaults() -> None:
    job = load_job(MINIMAL_JOB).to_domain()
    assert (job.queue, job.user, job.priority, job.min_available) == ("default", "default", 0, None)
    assert (job.max_retry, job.preemptible, job.walltime, job.creation_time) == (3, True, None, 0.0)
    assert job.roles[0].command == ()
    assert job.gang_size == 1


def test_every_spec_field_converts() -> None:
    job = load_job(
        """\
        apiVersion: phalanx/v1
        kind: Job
        metadata: {name: tune, labels: {team: nlp}, annotations: {note: "anything goes"}}
        spec:
          queue: team-a.nlp
          user: alice@example.com
          priority: -5
          minAvailable: 2
          maxRetry: 0
          walltime: 1h30m
          runtimeEstimate: 90
          starvationThreshold: 2d
          preemptible: false
          roles:
          - {name: worker, replicas: 4, resources: {cpu: 500m, memory: 1.5Gi, gpu: 0.5}}
        """
    ).to_domain(creation_time=7.0)
    assert (job.queue, job.user, job.priority, job.min_available) == (
        "team-a.nlp",
        "alice@example.com",
        -5,
        2,
    )
    assert (job.max_retry, job.preemptible) == (0, False)
    assert (job.walltime, job.runtime_estimate, job.starvation_threshold) == (
        5400.0,
        90.0,
        172800.0,
    )
    assert job.roles[0].resources == Resources.of({"cpu": 500, "memory": 1.5 * 2**30, "gpu": 0.5})


def test_role_placement_is_merged_over_the_job_placement() -> None:
    job = load_job(
        """\
        apiVersion: phalanx/v1
        kind: Job
        metadata: {name: placed}
        spec:
          nodeSelector: {zone: a, pool: shared}
          tolerations: [{key: dedicated, value: ml, effect: NoSchedule}]
          affinity: [{key: gpu-gen, operator: Gt, values: ["7"]}]
          roles:
          - name: worker
            replicas: 1
            resources: {cpu: 1}
            nodeSelector: {pool: gpu}
            tolerations: [{operator: Exists}]
            affinity: [{key: rack, operator: NotIn, values: [r1, r2]}]
          - {name: plain, replicas: 1, resources: {cpu: 1}}
        """
    ).to_domain()
    worker, plain = job.roles
    assert dict(worker.node_selector) == {"zone": "a", "pool": "gpu"}
    assert worker.tolerations == (
        Toleration(key="dedicated", value="ml", effect=TaintEffect.NO_SCHEDULE),
        Toleration(operator="Exists"),
    )
    assert worker.affinity == (
        NodeSelectorRequirement(key="gpu-gen", operator=SelectorOperator.GT, values=("7",)),
        NodeSelectorRequirement(key="rack", operator=SelectorOperator.NOT_IN, values=("r1", "r2")),
    )
    assert dict(plain.node_selector) == {"zone": "a", "pool": "shared"}
    assert len(plain.tolerations) == 1 and len(plain.affinity) == 1


def test_dependencies_keep_role_names_once() -> None:
    job = load_job(
        """\
        apiVersion: phalanx/v1
        kind: Job
        metadata: {name: mpi}
        spec:
          roles:
          - {name: launcher, replicas: 1, resources: {cpu: 1}, dependsOn: [{role: worker}, {role: worker}]}
          - {name: worker, replicas: 8, resources: {cpu: 1}, dependsOn: [{role: ps}]}
          - {name: ps, replicas: 1, resources: {cpu: 1}}
        """
    ).to_domain()
    assert [r.depends_on for r in job.roles] == [("worker",), ("ps",), ()]


def test_document_renders_back_in_document_syntax() -> None:
    document = load_job(MINIMAL_JOB)
    dumped = document.model_dump(by_alias=True, exclude_defaults=True)
    assert dumped["spec"]["roles"][0]["resources"] == {"cpu": 8, "memory": "32Gi"}
    assert JobDocument.model_validate(dumped) == document


def test_a_hostfile_names_a_role_of_the_job() -> None:
    text = """\
        apiVersion: phalanx/v1
        kind: Job
        metadata: {name: mpi}
        spec:
          roles:
          - {name: launcher, replicas: 1, resources: {cpu: 1}, hostfile: {role: worker, slots: 4}}
          - {name: worker, replicas: 2, resources: {cpu: 1}}
        """
    launcher, worker = load_job(text).to_domain().roles
    assert (launcher.hostfile, worker.hostfile) == (Hostfile(role="worker", slots=4), None)
    for bad, message in [
        ("{role: workers}", "spec.roles[0].hostfile.role: 'workers' is not a role of this job"),
        ("{role: worker, slots: 0}", "spec.roles[0].hostfile.slots: must be >= 1"),
        ("{role: worker, slot: 2}", "spec.roles[0].hostfile.slot: unknown field"),
    ]:
        with pytest.raises(DocumentError) as caught:
            load_job(text.replace("{role: worker, slots: 4}", bad))
        assert message in str(caught.value)


def test_an_image_role_mounts_absolute_host_directories() -> None:
    text = """\
        apiVersion: phalanx/v1
        kind: Job
        metadata: {name: boxed}
        spec:
          roles:
          - {name: main, replicas: 1, resources: {cpu: 1}, image: "localhost/t:1", mounts: MOUNTS}
        """
    (role,) = (
        load_job(text.replace("MOUNTS", "[/data/sets/, /scratch, /scratch]")).to_domain().roles
    )
    assert role.mounts == ("/data/sets", "/scratch")
    for bad, message in [
        ("[data]", "spec.roles[0].mounts[0]: 'data' is not an absolute path"),
        ("[/a:b]", "spec.roles[0].mounts[0]: '/a:b' holds ':', ',' or '..'"),
        ("[/a/../etc]", "'/a/../etc' holds ':', ',' or '..'"),
        ("[/]", "spec.roles[0].mounts[0]: the root directory cannot be mounted"),
    ]:
        with pytest.raises(DocumentError) as caught:
            load_job(text.replace("MOUNTS", bad))
        assert message in str(caught.value)
    with pytest.raises(DocumentError) as caught:
        load_job(text.replace(', image: "localhost/t:1"', "").replace("MOUNTS", "[/data]"))
    assert "spec.roles[0].mounts: only a role with an image mounts directories" in str(caught.value)
    assert "fix: set image, or remove mounts" in str(caught.value)
