"""The bounds of ``phalanx.spec.limits``: what is past them is refused naming the field and
the fix, in phalanx, Volcano and OpenPAI documents alike; what is at them is accepted."""

from __future__ import annotations

import copy
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from phalanx.domain.errors import DocumentError
from phalanx.spec import limits
from phalanx.spec.loader import build_document
from tests.unit.spec.examples import VOLCANO_JOB, VOLCANO_QUEUE
from tests.unit.spec.openpai_examples import SMALL

KIB = 2**10

JOB: dict[str, Any] = {
    "apiVersion": "phalanx/v1",
    "kind": "Job",
    "metadata": {"name": "bert"},
    "spec": {
        "roles": [
            {"name": "worker", "replicas": 1, "resources": {"cpu": 1}, "command": ["true"]},
        ]
    },
}
QUEUE: dict[str, Any] = {
    "apiVersion": "phalanx/v1",
    "kind": "Queue",
    "metadata": {"name": "nlp"},
    "spec": {"weight": 2},
}


def changed(document: dict[str, Any], change: Callable[[dict[str, Any]], None]) -> dict[str, Any]:
    copied = copy.deepcopy(document)
    change(copied)
    return copied


def job_spec(**fields: Any) -> dict[str, Any]:
    return changed(JOB, lambda d: d["spec"].update(fields))


def role(**fields: Any) -> dict[str, Any]:
    return changed(JOB, lambda d: d["spec"]["roles"][0].update(fields))


def queue_spec(**fields: Any) -> dict[str, Any]:
    return changed(QUEUE, lambda d: d["spec"].update(fields))


def roles(count: int, replicas: int = 1, *, first: int = 0) -> list[dict[str, Any]]:
    return [
        {"name": f"r{i}", "replicas": replicas, "resources": {"cpu": 1}, "command": ["true"]}
        for i in range(first, first + count)
    ]


def volcano(text: str, change: Callable[[dict[str, Any]], None]) -> dict[str, Any]:
    return changed(yaml.safe_load(text), change)


# (what, document, the field named, a fragment of the message); each was accepted before
# the limits existed.
PAST: list[tuple[str, dict[str, Any], str, str]] = [
    ("100,000 replicas", role(replicas=100_000), "spec.roles[0].replicas", "<= 10000"),
    (
        "10,001 replicas in all",
        job_spec(roles=roles(2, replicas=5_001)),
        "spec.roles",
        "10002 replicas in all is more than the limit of 10000 per job",
    ),
    ("10,000 roles", job_spec(roles=roles(10_000)), "spec.roles", "more than the limit of 64"),
    ("65 roles", job_spec(roles=roles(65)), "spec.roles", "65 items is more than the limit of 64"),
    ("priority 2**70", job_spec(priority=2**70), "spec.priority", "<= 2147483647"),
    ("priority -2**40", job_spec(priority=-(2**40)), "spec.priority", ">= -2147483648"),
    ("maxRetry 2**64", job_spec(maxRetry=2**64), "spec.maxRetry", "<= 1000"),
    (
        "walltime 99999999999999h",
        job_spec(walltime="99999999999999h"),
        "spec.walltime",
        "more than the limit of 365d",
    ),
    ("walltime 366d", job_spec(walltime="366d"), "spec.walltime", "limit of 365d"),
    ("runtimeEstimate 10**12 s", job_spec(runtimeEstimate=10**12), "spec.runtimeEstimate", "365d"),
    (
        "starvationThreshold 400d",
        job_spec(starvationThreshold="400d"),
        "spec.starvationThreshold",
        "365d",
    ),
    ("cpu 1e300", role(resources={"cpu": "1e300"}), "spec.roles[0].resources.cpu", "2^63"),
    ("memory 16Ei", role(resources={"memory": "16Ei"}), "spec.roles[0].resources.memory", "2^63"),
    (
        "one env value of 64 KiB",
        role(env={"BIG": "x" * (64 * KIB)}),
        "spec.roles[0].env.BIG",
        f"BIG=... is {64 * KIB + 4} bytes, more than the limit of 64 KiB",
    ),
    (
        "env of 9 x 60 KiB",
        role(env={f"V{i}": "x" * (60 * KIB) for i in range(9)}),
        "spec.roles[0].env",
        "more than the limit of 512 KiB",
    ),
    (
        "4,097 env variables",
        role(env={f"V{i}": "" for i in range(4_097)}),
        "spec.roles[0].env",
        "4097 variables is more than the limit of 4096",
    ),
    (
        "one argument of 64 KiB and a byte",
        role(command=["echo", "x" * (64 * KIB + 1)]),
        "spec.roles[0].command[1]",
        "limit of 64 KiB for one argument",
    ),
    (
        "a shell string of 100 KiB",
        role(command="echo " + "x" * (100 * KIB)),
        "spec.roles[0].command[2]",
        "limit of 64 KiB",
    ),
    (
        "a command of 9 x 60 KiB",
        role(command=["x" * (60 * KIB)] * 9),
        "spec.roles[0].command",
        "in all is more than the limit of 512 KiB",
    ),
    (
        "4,097 arguments",
        role(command=["a"] * 4_097),
        "spec.roles[0].command",
        "4097 arguments is more than the limit of 4096",
    ),
    (
        "annotations of 300 KiB",
        changed(JOB, lambda d: d["metadata"].update(annotations={"a": "x" * (300 * KIB)})),
        "metadata.annotations",
        "more than the limit of 256 KiB",
    ),
    ("queue weight 1e308", queue_spec(weight=1e308), "spec.weight", "<= 1000000"),
    ("queue weight 1e-300", queue_spec(weight=1e-300), "spec.weight", ">= 0.001"),
    ("queue priority 2**40", queue_spec(priority=2**40), "spec.priority", "<= 2147483647"),
    (
        "queue starvationThreshold 99999999999999h",
        queue_spec(starvationThreshold="99999999999999h"),
        "spec.starvationThreshold",
        "365d",
    ),
    (
        "queue capability 1e308 GPUs",
        queue_spec(capability={"gpu": 1e308}),
        "spec.capability.gpu",
        "2^63",
    ),
    (
        "Volcano task of 100,000 replicas",
        volcano(VOLCANO_JOB, lambda d: d["spec"]["tasks"][1].update(replicas=100_000)),
        "spec.tasks[1].replicas",
        "<= 10000",
    ),
    (
        "Volcano maxRetry 2**64",
        volcano(VOLCANO_JOB, lambda d: d["spec"].update(maxRetry=2**64)),
        "spec.maxRetry",
        "<= 1000",
    ),
    (
        "Volcano job of 65 tasks",
        volcano(
            VOLCANO_JOB,
            lambda d: d["spec"].update(
                tasks=[{**d["spec"]["tasks"][1], "name": f"t{i}"} for i in range(65)]
            ),
        ),
        "spec.tasks",
        "limit of 64",
    ),
    (
        "Volcano queue weight 1e308",
        volcano(VOLCANO_QUEUE, lambda d: d["spec"].update(weight=1e308)),
        "spec.weight",
        "<= 1000000",
    ),
    (
        "Volcano queue priority 2**70",
        volcano(VOLCANO_QUEUE, lambda d: d["spec"].update(priority=2**70)),
        "spec.priority",
        "<= 2147483647",
    ),
    (
        "OpenPAI 100,000 instances",
        volcano(SMALL, lambda d: d["taskRoles"]["worker"].update(instances=100_000)),
        "taskRoles.worker.instances",
        "<= 10000",
    ),
    (
        "OpenPAI jobRetryCount 2**64",
        volcano(SMALL, lambda d: d.update(jobRetryCount=2**64)),
        "jobRetryCount",
        "<= 1000",
    ),
    (
        "OpenPAI 65 task roles",
        volcano(
            SMALL,
            lambda d: d.update(taskRoles={f"w{i}": d["taskRoles"]["worker"] for i in range(65)}),
        ),
        "taskRoles",
        "limit of 64",
    ),
]


@pytest.mark.parametrize(("what", "document", "field", "fragment"), PAST, ids=[p[0] for p in PAST])
def test_past_a_limit_is_refused_naming_the_field_and_the_fix(
    what: str, document: dict[str, Any], field: str, fragment: str
) -> None:
    with pytest.raises(DocumentError) as caught:
        build_document(document)
    assert caught.value.field == field, (what, str(caught.value))
    assert fragment in str(caught.value), (what, str(caught.value))
    assert caught.value.fix, what


AT: list[tuple[str, dict[str, Any]]] = [
    ("10,000 replicas in 64 roles", job_spec(roles=[*roles(63), *roles(1, 9_937, first=63)])),
    ("the highest priority", job_spec(priority=limits.MAX_PRIORITY)),
    ("lowest priority", job_spec(priority=limits.MIN_PRIORITY)),
    ("maxRetry 1000, walltime 365d", job_spec(maxRetry=1_000, walltime="365d")),
    ("a 64 KiB env entry", role(env={"BIG": "x" * (64 * KIB - 4)})),
    ("8 x 64 KiB of env", role(env={f"V{i}": "x" * (64 * KIB - 3) for i in range(8)})),
    ("8 x 64 KiB of command", role(command=["x" * (64 * KIB)] * 8)),
    ("8Ei of memory", role(resources={"memory": "8Ei"})),
    ("a 253-character job name", changed(JOB, lambda d: d["metadata"].update(name="j" * 253))),
    ("a 63-character role name", role(name="r" * 63)),
    ("the greatest weight", queue_spec(weight=limits.MAX_WEIGHT)),
    ("the least weight", queue_spec(weight=limits.MIN_WEIGHT)),
    (
        "Kubernetes' system priority class",
        volcano(VOLCANO_JOB, lambda d: d["spec"].update(priorityClassName="system-node-critical")),
    ),
]


@pytest.mark.parametrize(("what", "document"), AT, ids=[a[0] for a in AT])
def test_at_a_limit_is_accepted(what: str, document: dict[str, Any]) -> None:
    build_document(document)


def test_byte_limits_are_shown_in_binary_units() -> None:
    assert [limits.size(n) for n in (10 * 2**20, 64 * KIB, 100, 3 * KIB + 1)] == [
        "10 MiB",
        "64 KiB",
        "100 bytes",
        "3073 bytes",
    ]


def test_the_limits_page_states_the_limits_as_they_are() -> None:
    section = (Path(__file__).parents[3] / "docs" / "reference" / "limits.md").read_text()
    assert "src/phalanx/spec/limits.py" in section
    for shown in (
        limits.size(limits.MAX_INPUT_SIZE),
        f"{limits.MAX_REPLICAS:,}",
        f"| {limits.MAX_ROLES} |",
        f"{limits.MAX_RETRY:,}",
        f"{limits.MAX_DURATION / 86_400:g} days",
        f"{limits.MIN_WEIGHT:g} to {limits.MAX_WEIGHT:,.0f}",
        f"{limits.MAX_ENV_VARS:,} variables",
        f"one `NAME=value` {limits.size(limits.MAX_ENV_ENTRY)}",
        f"{limits.size(limits.MAX_ENV_BYTES)} in all",
        f"{limits.MAX_COMMAND_ARGS:,} arguments",
        f"one {limits.size(limits.MAX_COMMAND_ARG)}",
        f"{limits.size(limits.MAX_COMMAND_BYTES)} in all",
        f"{limits.MAX_NAME} characters",
        f"{limits.MAX_LABEL} (DNS-1123 label)",
        limits.size(limits.MAX_ANNOTATIONS_BYTES),
    ):
        assert shown in section, shown
    assert limits.MAX_QUANTITY == 2**63 and limits.MAX_PRIORITY == 2**31 - 1
