"""A role with a container image goes only to nodes with a container runtime, and a job
that no node can run in its image waits with a reason that says so and how to fix it."""

from __future__ import annotations

from phalanx.domain.job import Job, Role
from phalanx.domain.node import CONTAINER_RUNTIME_LABEL
from phalanx.engine import ReasonCode
from tests.builders import config, cycle, make_job, make_node, res

PLACE = config(["allocate"], ["priority", "gang"], ["drf", "predicates", "capacity", "binpack"])
PODMAN = {CONTAINER_RUNTIME_LABEL: "podman"}


def image_job(name: str = "j", *, image: str | None = "localhost/app:1", gpus: float = 1) -> Job:
    role = Role(name="worker", replicas=1, resources=res(1, 1, gpus), image=image)
    return make_job(name, roles=[role])


def test_an_image_task_goes_to_the_node_with_a_runtime_even_when_another_fits_better() -> None:
    nodes = [make_node("bare", gpus=8), make_node("podman", gpus=8, labels=PODMAN)]
    running = make_job("r", gpus=4, running_on=["bare"])  # binpack would pick "bare"

    decisions = cycle(nodes, [running, image_job()], PLACE)

    assert [(b.task, b.node) for b in decisions.binds if b.job == "j"] == [("j-worker-0", "podman")]


def test_a_host_task_may_still_go_anywhere() -> None:
    nodes = [make_node("bare", gpus=8)]

    decisions = cycle(nodes, [image_job(image=None)], PLACE)

    assert [b.node for b in decisions.binds] == ["bare"]


def test_an_image_job_without_a_runtime_anywhere_waits_with_a_reason_and_the_fix() -> None:
    nodes = [make_node("bare-0", gpus=8), make_node("bare-1", gpus=8)]

    decisions = cycle(nodes, [image_job()], PLACE)

    assert not decisions.binds
    reason = decisions.reason_for("j")
    assert reason is not None and reason.code is ReasonCode.NO_MATCHING_NODE
    assert "0/2 nodes can run task worker" in reason.message
    assert "localhost/app:1" in reason.message
    assert f"none has a container runtime (label {CONTAINER_RUNTIME_LABEL})" in reason.message
    assert "fix: install podman" in reason.message
