"""What the engine binds reaches the task: NICs as NCCL_IB_HCA and PHALANX_NICS, and the
nodes' declared addresses in the API (the local executor keeps its rendezvous on this
host whatever they say)."""

from __future__ import annotations

from pathlib import Path

from phalanx.client import Client
from tests.integration.control.serving import Api, role, running_server
from tests.integration.control.test_cli import ok, phalanx

#: Two nodes of 4 GPUs with a NIC per GPU pair; their addresses are not this machine's.
RDMA_CLUSTER = """\
apiVersion: phalanx/v1
kind: Cluster
metadata: {name: rdma}
spec:
  nodeGroups:
  - name: node
    count: 2
    address: "10.255.0.{index + 10}"
    resources: {cpu: 8, memory: 32Gi}
    gpus:
      count: 4
      model: virtual
      memory: 16Gi
      topology:
        matrix: ['X NV1 SYS SYS', 'NV1 X SYS SYS', 'SYS SYS X NV4', 'SYS SYS NV4 X']
        numa: [0, 0, 1, 1]
        nics: {mlx5_0: PIX PIX SYS SYS, mlx5_1: SYS SYS PIX PIX}
"""

#: The NIC nearest each GPU pair of RDMA_CLUSTER's nodes.
NIC_OF_PAIR = {(0, 1): "mlx5_0", (2, 3): "mlx5_1"}


def test_a_multi_node_task_sees_its_bound_nics_and_the_nodes_show_their_address(
    tmp_path: Path,
) -> None:
    with running_server(tmp_path, cluster=RDMA_CLUSTER) as server:
        api = Api(server.url, server.admin_token or "")
        api.queue("team-a")
        command = 'echo "nics=$PHALANX_NICS hca=$NCCL_IB_HCA master=$MASTER_ADDR"'
        worker = role(replicas=2, command=command, gpu=2)
        worker["env"] = {"NCCL_IB_HCA": "mlx5"}  # the user's guess; the scheduler's wins
        api.submit("ddp", "team-a", worker)
        job = api.wait_phase("ddp", "Succeeded", "Failed")
        assert job["phase"] == "Succeeded", job
        with Client(server.url, server.admin_token) as client:
            for task in job["tasks"]:
                nic = NIC_OF_PAIR[tuple(task["gpus"])]
                # the local executor runs every task here: the declared 10.255.0.x is not used
                expected = f"nics={nic} hca=={nic} master=127.0.0.1\n"
                assert "".join(client.logs("ddp", task["name"])) == expected
            nodes = client.nodes()
            assert [(n.name, n.address) for n in nodes] == [
                ("node-0", "10.255.0.10"),
                ("node-1", "10.255.0.11"),
            ]
            assert client.node("node-1").address == "10.255.0.11"
        wide = ok(phalanx(server, "get", "nodes", "-o", "wide"))
        assert "ADDRESS" in wide and "10.255.0.10" in wide and "10.255.0.11" in wide
        described = ok(phalanx(server, "describe", "node", "node-1"))
        assert "Address:" in described and "10.255.0.11" in described
