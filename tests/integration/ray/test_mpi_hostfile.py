"""An MPIJob on the real three-node Ray cluster (``conftest``): its launcher, started
once its workers run, reads on its own node a hostfile naming the workers' nodes."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from phalanx.benchmarks.raycluster import DEADLINE, LoopbackCluster
from tests.integration.control.serving import Api
from tests.integration.ray.served import Served, log_of, tasks_of


@pytest.fixture(scope="module")
def api(ray_cluster: LoopbackCluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Api]:
    server = Served(tmp_path_factory.mktemp("server"), ray_cluster.address)
    started = server.start()
    started.queue("team")
    yield started
    server.stop()


def replica(command: str, replicas: int = 1, **limits: Any) -> dict[str, Any]:
    resources = {"requests": {"cpu": "100m", "memory": "64Mi", **limits}}
    container = {"name": "main", "command": ["sh", "-c", command], "resources": resources}
    return {"replicas": replicas, "template": {"spec": {"containers": [container]}}}


def test_the_launcher_reads_the_workers_nodes_in_its_hostfile(api: Api) -> None:
    document = {
        "apiVersion": "kubeflow.org/v1",
        "kind": "MPIJob",
        "metadata": {"name": "mpi"},
        "spec": {
            "slotsPerWorker": 2,
            "runPolicy": {"schedulingPolicy": {"queue": "team"}},
            "mpiReplicaSpecs": {
                "Launcher": replica('cat "$PHALANX_HOSTFILE"'),
                "Worker": replica("sleep 4", replicas=2, **{"nvidia.com/gpu": 2}),
            },
        },
    }
    api.post("/api/v1/jobs", document)
    job = api.wait_phase("mpi", "Succeeded", "Failed", timeout=DEADLINE)
    tasks = tasks_of(api, "mpi")
    assert job["phase"] == "Succeeded", {name: log_of(api, "mpi", name) for name in tasks}
    # the workers' nodes, by index: ray-127-0-0-3 is reached at 127.0.0.3
    workers = [tasks[f"mpi-worker-{i}"]["node"] for i in range(2)]
    expected = [f"127.0.0.{node.rsplit('-', 1)[1]} slots=2" for node in workers]
    assert log_of(api, "mpi", "mpi-launcher-0").splitlines() == expected
