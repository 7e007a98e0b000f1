"""Kubeflow PyTorchJob, TFJob and MPIJob documents run through the real server to
success: each task's command checks what the training operator would have given it
(ranks, TF_CONFIG, the MPI hostfile) and exits 0 only if it is right."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import yaml

from phalanx.control.server import Server
from tests.integration.control.serving import Api
from tests.integration.control.test_cli import ok, phalanx


def replica(command: list[str], replicas: int = 1, **extra: Any) -> dict[str, Any]:
    """A replica spec whose one container runs ``command`` with 1 CPU and 1Gi."""
    container = {
        "name": "main",
        "command": list(command),
        "resources": {"requests": {"cpu": 1, "memory": "1Gi"}},
    }
    return {"replicas": replicas, "template": {"spec": {"containers": [container]}}, **extra}


def kubeflow(kind: str, name: str, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "kubeflow.org/v1",
        "kind": kind,
        "metadata": {"name": name, "namespace": "kubeflow"},
        "spec": {"runPolicy": {"schedulingPolicy": {"queue": "kf"}}, **spec},
    }


#: Rank 0 is the master, the workers follow; all see the same world and master address.
TORCH_CHECK = """
test "$WORLD_SIZE" = 3 && test -n "$MASTER_ADDR" && test -n "$MASTER_PORT" || exit 1
case "$PHALANX_ROLE/$PHALANX_INDEX/$RANK" in
  master/0/0|worker/0/1|worker/1/2) exit 0 ;;
esac
exit 1
"""

#: TF_CONFIG names every task of the cluster, and this task as its role and index.
TF_CHECK = """
import json, os, sys
config = json.loads(os.environ["TF_CONFIG"])
cluster, task = config["cluster"], config["task"]
ok = (
    sorted(cluster) == ["ps", "worker"]
    and len(cluster["ps"]) == 1
    and len(cluster["worker"]) == 2
    and task == {"type": os.environ["PHALANX_ROLE"], "index": int(os.environ["PHALANX_INDEX"])}
)
sys.exit(0 if ok else 1)
"""

#: One "host slots=2" line per worker, the hosts those of PHALANX_HOSTS_WORKER.
HOSTFILE_CHECK = """
test -f "$PHALANX_HOSTFILE" || exit 1
expected=$(echo "$PHALANX_HOSTS_WORKER" | tr ',' '\\n' | sed 's/:[0-9]*$/ slots=2/')
test "$(cat "$PHALANX_HOSTFILE")" = "$expected" && test "$(wc -l < "$PHALANX_HOSTFILE")" = 2
"""


def test_a_pytorchjob_applied_from_a_file_runs_with_its_ranks(
    server: Server, tmp_path: Path
) -> None:
    api = Api(server.url, server.admin_token or "")
    api.queue("kf")
    check = ["sh", "-c", TORCH_CHECK]
    document = kubeflow(
        "PyTorchJob",
        "torch",
        pytorchReplicaSpecs={
            "Worker": replica(check, replicas=2, restartPolicy="OnFailure"),
            "Master": replica(check),
        },
    )
    path = tmp_path / "torch.yaml"
    path.write_text(yaml.safe_dump(document))
    result = phalanx(server, "apply", "-f", str(path))
    assert ok(result).splitlines() == ["job/torch created"]
    assert (
        f"warning: {path} document 1 (PyTorchJob torch): "
        "spec.pytorchReplicaSpecs.Worker.restartPolicy: not honoured" in result.stderr
    )
    assert "metadata.namespace: not honoured" in result.stderr
    job = api.wait_phase("torch", "Succeeded", "Failed")
    assert job["phase"] == "Succeeded", job


def test_a_tfjob_posted_to_the_api_gets_its_tf_config(server: Server) -> None:
    api = Api(server.url, server.admin_token or "")
    api.queue("kf")
    check = [sys.executable, "-c", TF_CHECK]
    document = kubeflow(
        "TFJob", "tf", tfReplicaSpecs={"Worker": replica(check, replicas=2), "PS": replica(check)}
    )
    api.post("/api/v1/jobs", document)
    job = api.wait_phase("tf", "Succeeded", "Failed")
    assert job["phase"] == "Succeeded", job


def test_an_mpijob_launcher_starts_after_its_workers_and_reads_their_hostfile(
    server: Server,
) -> None:
    api = Api(server.url, server.admin_token or "")
    api.queue("kf")
    document = kubeflow(
        "MPIJob",
        "mpi",
        slotsPerWorker=2,
        mpiReplicaSpecs={
            "Launcher": replica(["sh", "-c", HOSTFILE_CHECK]),
            # workers end by themselves, after the launcher has had its time
            "Worker": replica(["sh", "-c", "sleep 3"], replicas=2),
        },
    )
    answer = api.http.post("/api/v1/jobs", json=document)
    assert answer.status_code == 201, answer.text
    # what the importer does not honour comes back as Warning headers, as from Kubernetes
    assert answer.headers.get_list("Warning") == [
        '299 - "<request> document 1 (MPIJob mpi): metadata.namespace: not honoured: '
        'phalanx has no namespaces: job names are unique per server"',
        '299 - "<request> document 1 (MPIJob mpi): spec.mpiReplicaSpecs.Worker: a phalanx job '
        "succeeds when every task does, workers included (the MPI operator: when the launcher "
        'does): workers must end by themselves"',
    ]
    job = api.wait_phase("mpi", "Succeeded", "Failed")
    assert job["phase"] == "Succeeded", job
