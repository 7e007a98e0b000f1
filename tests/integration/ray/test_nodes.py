"""Every alive Ray node is a phalanx node, its GPUs probed on the node itself."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

from phalanx.benchmarks.raycluster import DEADLINE, HEAD, WORKERS, LoopbackCluster
from phalanx.domain.node import Gpu, Node
from phalanx.domain.resources import Resources
from phalanx.executors.ray.nodes import discover


def test_each_alive_ray_node_is_a_node_with_its_address_and_gpus(
    ray_cluster: LoopbackCluster,
) -> None:
    declared = Node(
        name="ray-127-0-0-2",
        capacity=Resources.of({"cpu": 1000, "gpu": 2}),
        gpus=(Gpu(index=0, model="T4", memory=16e9), Gpu(index=1, model="T4", memory=16e9)),
    )
    nodes = {node.name: node for node in discover({declared.name: declared})}
    assert set(nodes) == {"ray-127-0-0-4", "ray-127-0-0-2", "ray-127-0-0-3"}
    for address, count in {HEAD: 0, **WORKERS}.items():
        node = nodes["ray-" + address.replace(".", "-")]
        assert node.address == address
        assert node.capacity["cpu"] == 1000 and node.capacity.get("gpu", 0) == count
        assert len(node.gpus) == count and "ray.io/node-id" in node.labels
    # No NVML on this machine: the declared cards where they agree with Ray, else by count.
    assert nodes["ray-127-0-0-2"].gpus == declared.gpus
    assert nodes["ray-127-0-0-3"].gpus == tuple(Gpu(index=i) for i in range(4))


#: A driver that connects to the cluster and lists its nodes.
CONNECT = "import ray, sys; ray.init(address=sys.argv[1]); print(len(ray.nodes()))"


@pytest.mark.parametrize(
    "auth",
    [
        {"RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN": "0" * 64},  # a wrong token
        {"RAY_AUTH_MODE": "disabled"},  # none at all
    ],
    ids=["wrong-token", "no-token"],
)
def test_a_driver_without_the_clusters_token_is_refused(
    ray_cluster: LoopbackCluster, auth: dict[str, str]
) -> None:
    """The cluster is locked with Ray's token authentication: only a caller with its
    token reaches the GCS (and so the agents, which are its actors)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAY_AUTH")}
    refused = subprocess.run(
        [sys.executable, "-c", CONNECT, ray_cluster.address],
        env={**env, **auth},
        capture_output=True,
        text=True,
        timeout=DEADLINE,
        check=False,
    )
    assert refused.returncode != 0, refused.stdout
    assert "auth" in refused.stderr.lower() or "token" in refused.stderr.lower(), refused.stderr
    allowed = subprocess.run(
        [sys.executable, "-c", CONNECT, ray_cluster.address],
        env={**env, "RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN": ray_cluster.token},
        capture_output=True,
        text=True,
        timeout=DEADLINE,
        check=False,
    )
    assert allowed.returncode == 0 and allowed.stdout.strip() == "3", allowed.stderr


def test_a_lost_node_leaves_within_seconds(ray_cluster: LoopbackCluster) -> None:
    ray_cluster.kill("127.0.0.3")
    lost_at = time.monotonic()
    while "ray-127-0-0-3" in {node.name for node in discover()}:
        assert time.monotonic() - lost_at < DEADLINE, "the lost node never left"
        time.sleep(0.1)
    assert {node.name for node in discover()} == {"ray-127-0-0-4", "ray-127-0-0-2"}
