"""Ray's view of a node, mapped to phalanx's (no Ray needed: ``ray.nodes()``'s shape)."""

from __future__ import annotations

from typing import Any

from phalanx.domain.node import GPU_MODEL_LABEL, Gpu, Node
from phalanx.domain.resources import GPU_MEMORY, Resources
from phalanx.executors.ray.nodes import node_name, ray_node


def info(address: str = "10.0.0.7", **resources: float) -> dict[str, Any]:
    return {
        "NodeID": "abc",
        "Alive": True,
        "NodeManagerAddress": address,
        "Resources": {"CPU": 8.0, "memory": 32 * 2**30, **resources},
        "Labels": {"ray.io/node-id": "abc", "zone": "a"},
    }


def test_a_ray_node_keeps_its_address_labels_and_offered_capacity() -> None:
    node = ray_node(info(), (), None)
    assert node.name == "ray-10-0-0-7" == node_name("10.0.0.7")
    assert node.address == "10.0.0.7"
    assert node.capacity == Resources.of({"cpu": 8000, "memory": 32 * 2**30})
    assert node.labels == {"ray.io/node-id": "abc", "zone": "a"}
    assert node.gpus == ()
    assert node_name("fe80::1") == "ray-fe80--1"


def test_probed_gpus_give_models_and_memory() -> None:
    probed = (Gpu(index=0, model="A100", memory=80e9), Gpu(index=1, model="A100", memory=80e9))
    node = ray_node(info(GPU=2.0), probed, None)
    assert node.gpus == probed
    assert node.capacity["gpu"] == 2 and node.capacity[GPU_MEMORY] == 160e9
    assert node.labels[GPU_MODEL_LABEL] == "A100"


def test_without_a_probe_the_declared_cards_are_used_and_else_cards_by_count() -> None:
    declared = Node(
        name="ray-10-0-0-7",
        capacity=Resources.of({"cpu": 8000, "gpu": 2}),
        gpus=(Gpu(index=0, model="T4", memory=16e9), Gpu(index=1, model="T4", memory=16e9)),
    )
    assert ray_node(info(GPU=2.0), (), declared).gpus == declared.gpus
    anonymous = ray_node(info(GPU=4.0), (), declared)  # declares 2, Ray offers 4
    assert anonymous.gpus == tuple(Gpu(index=i) for i in range(4))
    assert GPU_MEMORY not in anonymous.capacity and GPU_MODEL_LABEL not in anonymous.labels
