"""A job whose role names an image runs in a podman container through the control plane;
on a cluster without a container runtime it waits, saying why."""

from __future__ import annotations

from pathlib import Path

from phalanx.client import Client
from tests.integration.control.serving import CLUSTER, running_server, wait_for
from tests.integration.images import containers_of

#: SQLite only: container images and their stop: podman's and the executor's.
BACKENDS = ("sqlite",)

#: The tests' cluster, its nodes declaring podman (the local executor runs every node's
#: tasks on this host, which has it).
PODMAN_CLUSTER = CLUSTER + "    labels: {phalanx.io/container-runtime: podman}\n"

QUEUE = {"apiVersion": "phalanx/v1", "kind": "Queue", "metadata": {"name": "q"}, "spec": {}}


def image_job(name: str, image: str, command: str) -> dict[str, object]:
    role = {"name": "worker", "replicas": 1, "resources": {"cpu": 1, "memory": "256Mi"}}
    role |= {"image": image, "command": command}
    return {
        "apiVersion": "phalanx/v1",
        "kind": "Job",
        "metadata": {"name": name},
        "spec": {"queue": "q", "roles": [role]},
    }


def ended(client: Client, name: str) -> str:
    return str(
        wait_for(
            lambda: (p := client.job(name).phase) in ("Succeeded", "Failed", "Cancelled") and p,
            f"job {name} to end",
        )
    )


def test_an_image_job_runs_fails_and_cancels_through_the_server(
    busybox_image: str, tmp_path: Path
) -> None:
    with (
        running_server(tmp_path, cluster=PODMAN_CLUSTER) as server,
        Client(server.url, server.admin_token) as client,
    ):
        client.apply(QUEUE)
        client.apply(image_job("ok", busybox_image, 'echo "rank $RANK in $PWD"'))
        client.apply(image_job("bad", busybox_image, "exit 3"))
        client.apply(image_job("long", busybox_image, "sleep 600"))
        assert ended(client, "ok") == "Succeeded"
        workdir = Path(server.tasks_dir) / "ok" / "ok-worker-0"
        assert "".join(client.logs("ok")) == f"rank 0 in {workdir}\n"
        assert ended(client, "bad") == "Failed"
        wait_for(lambda: client.job("long").phase == "Running", "the long job to run")
        client.cancel("long")
        assert ended(client, "long") == "Cancelled"
        wait_for(lambda: containers_of(tmp_path / "data") == [], "no container to be left")


def test_an_image_job_waits_on_a_cluster_without_a_runtime(tmp_path: Path) -> None:
    with running_server(tmp_path) as server, Client(server.url, server.admin_token) as client:
        client.apply(QUEUE)
        client.apply(image_job("img", "localhost/anything:1", "true"))
        why = wait_for(lambda: (w := client.why("img")).message and w, "the job's pending reason")
        assert why.phase in ("Pending", "Queued")
        assert "none has a container runtime (label phalanx.io/container-runtime)" in why.message
        assert "fix: install podman" in why.message
