"""The manifests of ``deploy/`` parse, are Kubernetes objects, and agree with each other:
the server's Ray address is the RayCluster's head Service and GCS port, its Service
selects its pods and targets its port, its data dir is the claimed volume, and its
flags are those ``phalanx up`` takes."""

from __future__ import annotations

import inspect
import shlex
from pathlib import Path
from typing import Any

import pytest
import yaml

DEPLOY = Path(__file__).resolve().parents[3] / "deploy"

#: The port of Ray's GCS on the head: what ``--ray-address`` names.
GCS_PORT = 6379


def documents(name: str) -> list[dict[str, Any]]:
    with (DEPLOY / name).open() as stream:
        return [doc for doc in yaml.safe_load_all(stream) if doc is not None]


def manifests() -> list[str]:
    return sorted(p.name for p in DEPLOY.glob("*.yaml") if p.name != "kustomizeconfig.yaml")


def objects() -> list[dict[str, Any]]:
    found = []
    for name in documents("kustomization.yaml")[0]["resources"]:
        found += documents(name)
    return found


def one(kind: str) -> dict[str, Any]:
    (found,) = [o for o in objects() if o["kind"] == kind]
    return found


def flags(args: list[str]) -> dict[str, str]:
    """``--name value`` pairs of ``phalanx up``'s arguments (after ``up``)."""
    assert args[0] == "up"
    pairs = args[1:]
    assert len(pairs) % 2 == 0 and all(p.startswith("--") for p in pairs[::2]), pairs
    return dict(zip(pairs[::2], pairs[1::2], strict=True))


def server_script() -> tuple[list[str], list[str]]:
    """The server container's ``ray start`` and ``phalanx ...`` argv: its shell script is
    ``ray start ... && exec phalanx ...``."""
    container = server_container()
    assert container["command"] == ["sh", "-c"]
    (script,) = container["args"]
    join, _, serve = script.partition(" && exec ")
    return shlex.split(join), shlex.split(serve)


def up_flags() -> dict[str, str]:
    """The flags the server container gives ``phalanx up``."""
    _, serve = server_script()
    assert serve[0] == "phalanx"
    return flags(serve[1:])


def server_container() -> dict[str, Any]:
    (container,) = one("Deployment")["spec"]["template"]["spec"]["containers"]
    assert isinstance(container, dict)
    return container


@pytest.mark.parametrize("name", manifests())
def test_every_manifest_parses_into_named_objects(name: str) -> None:
    docs = documents(name)
    assert docs, f"{name} holds no document"
    for doc in docs:
        assert isinstance(doc.get("apiVersion"), str) and isinstance(doc.get("kind"), str), name
        assert doc["metadata"]["name"], name


def test_the_kustomization_lists_every_manifest() -> None:
    listed = documents("kustomization.yaml")[0]["resources"]
    assert sorted(listed) == sorted(set(manifests()) - {"kustomization.yaml"})
    assert [o["kind"] for o in objects()].count("Deployment") == 1


def test_the_server_runs_phalanx_up_with_the_ray_executor_at_the_head_service() -> None:
    given = up_flags()
    assert set(given) == {
        "--executor",
        "--ray-address",
        "--host",
        "--port",
        "--data-dir",
        "--workspace",
    }
    assert given["--executor"] == "ray"
    assert given["--host"] == "0.0.0.0"
    ray = one("RayCluster")
    # KubeRay names the head's Service after the cluster; the GCS listens on 6379
    host, _, port = given["--ray-address"].partition(":")
    assert (host, int(port)) == (f"{ray['metadata']['name']}-head-svc", GCS_PORT)
    (head,) = ray["spec"]["headGroupSpec"]["template"]["spec"]["containers"]
    assert {"name": "gcs", "containerPort": GCS_PORT} in head["ports"]


def test_the_workspace_is_a_url_every_ray_node_reaches_with_the_servers_credentials() -> None:
    """Steps run on any Ray node: the workspace is an S3 URL from the ConfigMap (never
    a path on the server's volume, which phalanx up refuses on several nodes)."""
    assert up_flags()["--workspace"] == "$PHALANX_WORKSPACE"
    env = {item["name"]: item for item in server_container()["env"]}
    reference = env["PHALANX_WORKSPACE"]["valueFrom"]["configMapKeyRef"]
    config = one("ConfigMap")
    assert reference == {"name": config["metadata"]["name"], "key": "url"}
    assert config["data"]["url"].startswith("s3://")
    assert {"secretRef": {"name": "phalanx-workspace-s3", "optional": True}} in (
        server_container()["envFrom"]
    )
    assert '"/tmp/phalanx[ray,s3]"' in (DEPLOY / "Dockerfile").read_text()  # s3fs


def test_the_server_pod_joins_the_ray_cluster_it_drives_offering_nothing() -> None:
    join, _ = server_script()
    assert join[:2] == ["ray", "start"]
    options = dict(option.split("=", 1) for option in join[2:] if "=" in option)
    assert options["--address"] == up_flags()["--ray-address"]
    assert (options["--num-cpus"], options["--num-gpus"]) == ("0", "0")


def test_the_service_selects_the_server_pods_and_targets_its_port() -> None:
    deployment, service = one("Deployment"), one("Service")
    pod_labels = deployment["spec"]["template"]["metadata"]["labels"]
    selector = service["spec"]["selector"]
    assert selector.items() <= pod_labels.items()
    assert deployment["spec"]["selector"]["matchLabels"].items() <= pod_labels.items()
    container = server_container()
    port = int(up_flags()["--port"])
    (exposed,) = container["ports"]
    assert exposed["containerPort"] == port
    (target,) = service["spec"]["ports"]
    assert target["targetPort"] in (exposed["name"], port)
    probe = container["readinessProbe"]["httpGet"]
    assert probe["path"] == "/healthz" and probe["port"] in (exposed["name"], port)


def test_the_data_dir_is_the_claimed_volume() -> None:
    spec = one("Deployment")["spec"]
    assert spec["replicas"] == 1 and spec["strategy"]["type"] == "Recreate"
    container = server_container()
    data_dir = up_flags()["--data-dir"]
    (mount,) = [m for m in container["volumeMounts"] if m["mountPath"] == data_dir]
    volumes = {v["name"]: v for v in spec["template"]["spec"]["volumes"]}
    claim = volumes[mount["name"]]["persistentVolumeClaim"]["claimName"]
    assert claim == one("PersistentVolumeClaim")["metadata"]["name"]


def test_every_ray_node_runs_the_phalanx_image_and_a_group_has_gpus() -> None:
    ray = one("RayCluster")["spec"]
    groups = [ray["headGroupSpec"], *ray["workerGroupSpecs"]]
    images = {c["image"] for group in groups for c in group["template"]["spec"]["containers"]} | {
        server_container()["image"]
    }
    assert images == {"phalanx"}  # one image, set by the kustomization
    (image,) = documents("kustomization.yaml")[0]["images"]
    assert image["name"] == "phalanx"
    gpus = [
        c["resources"]["limits"].get("nvidia.com/gpu")
        for group in ray["workerGroupSpecs"]
        for c in group["template"]["spec"]["containers"]
    ]
    assert any(gpus)
    version = ray["rayVersion"]
    assert f"rayproject/ray:{version}-" in (DEPLOY / "Dockerfile").read_text()


def test_up_takes_the_flags_the_deployment_gives_it() -> None:
    """``phalanx up``'s own options, and ``--executor`` one of its executors."""
    from phalanx.cli.up import EXECUTORS, up

    options = {
        flag
        for parameter in inspect.signature(up).parameters.values()
        for flag in getattr(parameter.default, "param_decls", ())
    }
    given = up_flags()
    assert set(given) <= options, set(given) - options
    assert given["--executor"] in EXECUTORS


def ray_containers() -> list[dict[str, Any]]:
    """Every container of the RayCluster (head and workers) and the server's (a node too)."""
    spec = one("RayCluster")["spec"]
    pods = [spec["headGroupSpec"]] + spec["workerGroupSpecs"]
    found = [c for pod in pods for c in pod["template"]["spec"]["containers"]]
    return [*found, server_container()]


def test_every_ray_process_presents_the_clusters_token() -> None:
    """Ray's token authentication, on every process of the cluster, from one Secret."""
    for container in ray_containers():
        env = {item["name"]: item for item in container["env"]}
        assert env["RAY_AUTH_MODE"]["value"] == "token", container["name"]
        secret = env["RAY_AUTH_TOKEN"]["valueFrom"]["secretKeyRef"]
        assert secret == {"name": "phalanx-ray-auth", "key": "token"}, container["name"]


def test_the_dashboard_is_not_on_the_network_and_node_loss_is_seen_fast() -> None:
    head = one("RayCluster")["spec"]["headGroupSpec"]
    assert head["rayStartParams"]["dashboard-host"] == "127.0.0.1"
    (container,) = head["template"]["spec"]["containers"]
    env = {item["name"]: item.get("value") for item in container["env"]}
    period, threshold = (
        int(env["RAY_health_check_period_ms"]),
        int(env["RAY_health_check_failure_threshold"]),
    )
    assert period * threshold <= 5000  # a lost node is dead within seconds, not 30 s


def test_only_ray_pods_and_the_server_reach_the_ray_pods() -> None:
    policy = one("NetworkPolicy")["spec"]
    ray_pods = one("RayCluster")["spec"]["headGroupSpec"]["template"]["metadata"]["labels"]
    selected = policy["podSelector"]["matchLabels"]
    assert selected.items() <= ray_pods.items()
    (rule,) = policy["ingress"]
    allowed = [peer["podSelector"]["matchLabels"] for peer in rule["from"]]
    server_pod = one("Deployment")["spec"]["template"]["metadata"]["labels"]
    assert any(labels.items() <= server_pod.items() for labels in allowed)
    assert all(
        labels.items() <= server_pod.items() or labels.items() <= ray_pods.items()
        for labels in allowed
    )
    assert "ports" not in rule  # every Ray port, to those peers only


def test_workers_run_as_root_for_per_user_identities() -> None:
    """Switching a task to its user's uid takes root in the worker (said in the file)."""
    (workers,) = one("RayCluster")["spec"]["workerGroupSpecs"]
    assert workers["template"]["spec"]["securityContext"]["runAsUser"] == 0
    assert "--shared-identity" in (DEPLOY / "raycluster.yaml").read_text()
