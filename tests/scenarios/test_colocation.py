"""Online/offline colocation: services spread apart, batch work fills in next to them."""

from __future__ import annotations

from dataclasses import replace

from phalanx.domain.job import Job, ServiceClass
from tests.builders import config, cycle, make_job, make_nodes

COLOCATION = config(["allocate"], ["gang", "predicates"], ["binpack", "colocation"])


def online(name: str, **kwargs: object) -> Job:
    return replace(make_job(name, **kwargs), service_class=ServiceClass.ONLINE)  # type: ignore[arg-type]


def offline(name: str, **kwargs: object) -> Job:
    return replace(make_job(name, **kwargs), service_class=ServiceClass.OFFLINE)  # type: ignore[arg-type]


def test_an_online_job_never_lands_next_to_another_while_another_node_is_free() -> None:
    nodes = make_nodes(3, gpus=8)
    running = online("svc-a", gpus=1, running_on=["n0"])
    filler = make_job("batch", gpus=4, running_on=["n1"])  # binpack alone would pick n0 or n1
    new = online("svc-b", gpus=1, created=1)
    decisions = cycle(nodes, [running, filler, new], COLOCATION)
    assert [b.node for b in decisions.binds if b.job == "svc-b"] == ["n1"]


def test_online_replicas_spread_over_nodes_without_online_work() -> None:
    decisions = cycle(make_nodes(3, gpus=8), [online("svc", gpus=1, replicas=3)], COLOCATION)
    assert sorted(b.node for b in decisions.binds) == ["n0", "n1", "n2"]


def test_an_online_job_shares_a_node_only_when_nothing_else_fits() -> None:
    nodes = make_nodes(2, gpus=2)
    jobs = [
        online("svc-a", gpus=1, running_on=["n0"]),
        make_job("full", gpus=2, running_on=["n1"]),
        online("svc-b", gpus=1, created=1),
    ]
    decisions = cycle(nodes, jobs, COLOCATION)
    assert [b.node for b in decisions.binds if b.job == "svc-b"] == ["n0"]


def test_offline_work_prefers_nodes_running_online_services() -> None:
    nodes = make_nodes(3, gpus=8)
    jobs = [
        online("svc", gpus=1, running_on=["n2"]),
        make_job("batch", gpus=4, running_on=["n0"]),  # binpack alone would pick n0
        offline("train", gpus=2, created=1),
    ]
    decisions = cycle(nodes, jobs, COLOCATION)
    assert [b.node for b in decisions.binds if b.job == "train"] == ["n2"]


def test_jobs_without_a_service_class_are_placed_as_without_the_plugin() -> None:
    nodes = make_nodes(3, gpus=8)
    jobs = [online("svc", gpus=1, running_on=["n2"]), make_job("plain", gpus=2, created=1)]
    plain = config(["allocate"], ["gang", "predicates"], ["binpack"])
    assert cycle(nodes, jobs, COLOCATION).binds == cycle(nodes, jobs, plain).binds
