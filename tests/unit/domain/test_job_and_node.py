"""Job helpers, selector requirements and tolerations."""

from __future__ import annotations

import pytest

from phalanx.domain.errors import InvalidInput
from phalanx.domain.job import Job, NodeSelectorRequirement, Role, SelectorOperator
from phalanx.domain.node import Node, Taint, TaintEffect, Toleration, check_address
from phalanx.domain.resources import Resources


def _job(**extra: object) -> Job:
    roles = (
        Role(name="master", replicas=1, resources=Resources.of({"cpu": 1000})),
        Role(name="worker", replicas=3, resources=Resources.of({"gpu": 8})),
    )
    return Job(name="j", queue="q", roles=roles, **extra)  # type: ignore[arg-type]


def test_gang_size_defaults_to_every_replica() -> None:
    assert _job().gang_size == 4
    assert _job(min_available=2).gang_size == 2


def test_all_tasks_lists_pending_replicas_in_role_order() -> None:
    names = [t.name("j") for t in _job().all_tasks()]
    assert names == ["j-master-0", "j-worker-0", "j-worker-1", "j-worker-2"]


@pytest.mark.parametrize(
    ("operator", "values", "labels", "expected"),
    [
        (SelectorOperator.IN, ("a100", "h100"), {"gpu": "a100"}, True),
        (SelectorOperator.IN, ("a100",), {}, False),
        (SelectorOperator.NOT_IN, ("v100",), {"gpu": "a100"}, True),
        (SelectorOperator.NOT_IN, ("v100",), {}, True),
        (SelectorOperator.EXISTS, (), {"gpu": "x"}, True),
        (SelectorOperator.DOES_NOT_EXIST, (), {"gpu": "x"}, False),
        (SelectorOperator.GT, ("4",), {"gpu": "8"}, True),
        (SelectorOperator.LT, ("4",), {"gpu": "8"}, False),
        (SelectorOperator.GT, ("4",), {"gpu": "many"}, False),
    ],
)
def test_selector_requirements(
    operator: SelectorOperator, values: tuple[str, ...], labels: dict[str, str], expected: bool
) -> None:
    requirement = NodeSelectorRequirement(key="gpu", operator=operator, values=values)
    assert requirement.matches(labels) is expected


def test_tolerations() -> None:
    taint = Taint(key="dedicated", value="infer", effect=TaintEffect.NO_SCHEDULE)
    assert Toleration(key="dedicated", value="infer").tolerates(taint)
    assert Toleration(key="dedicated", operator="Exists").tolerates(taint)
    assert Toleration(operator="Exists").tolerates(taint)
    assert not Toleration(key="dedicated", value="train").tolerates(taint)
    assert not Toleration(
        key="dedicated", operator="Exists", effect=TaintEffect.NO_EXECUTE
    ).tolerates(taint)


@pytest.mark.parametrize(
    "address", ["10.0.0.7", "fd00::7", "gpu-7", "gpu-7.lab.example.com", "gpu-7.lab."]
)
def test_a_node_address_is_an_ip_address_or_a_host_name(address: str) -> None:
    check_address(address)
    assert Node(name="n", capacity=Resources(), address=address).address == address
    assert Node(name="n", capacity=Resources()).address is None  # the executor knows it


@pytest.mark.parametrize(
    "address",
    ["", " 10.0.0.7", "10.0.0.256", "10.0.0.7:22", "gpu_7", "-gpu", "gpu..lab", "a" * 64, "x/y"],
)
def test_anything_else_is_refused_naming_the_node_and_the_fix(address: str) -> None:
    with pytest.raises(InvalidInput) as error:
        Node(name="gpu-7", capacity=Resources(), address=address)
    assert error.value.field == "address"
    assert str(error.value).startswith("address: node gpu-7: ")
    assert error.value.fix and "10.0.0.7" in error.value.fix
