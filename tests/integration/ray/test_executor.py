"""The Ray executor end to end: a server process on a real three-node Ray cluster
(``conftest``), jobs submitted through the API, processes on the nodes they were bound to.

The tests share one cluster and run in file order; the last one kills a worker node.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from phalanx.benchmarks.raycluster import DEADLINE, LoopbackCluster
from tests.integration.control.serving import Api, role, wait_for
from tests.integration.control.test_inference import inference, predictor
from tests.integration.control.test_models import TRAIN, events
from tests.integration.ray.served import LARGE, SMALL, Served, log_of, tasks_of
from tests.integration.s3 import S3


@pytest.fixture(scope="module")
def served(
    ray_cluster: LoopbackCluster, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Served]:
    server = Served(tmp_path_factory.mktemp("server"), ray_cluster.address)
    server.start().queue("team")
    yield server
    server.stop()


@pytest.fixture
def api(served: Served) -> Api:
    return Api(served.url, (served.data / "admin.token").read_text().strip())


def processes_with(marker: str) -> list[int]:
    """Pids of this machine's processes whose command line holds ``marker``."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            if marker.encode() in (entry / "cmdline").read_bytes():
                found.append(int(entry.name))
        except OSError:
            continue
    return found


def test_every_ray_node_is_a_node_of_the_server(api: Api) -> None:
    nodes = {node["name"]: node for node in api.get("/api/v1/nodes")}
    assert set(nodes) == {"ray-127-0-0-4", SMALL, LARGE}


def test_a_gang_spans_two_nodes_with_their_gpu_ids_ranks_and_master(api: Api) -> None:
    show = 'echo "rank=$RANK of $WORLD_SIZE master=$MASTER_ADDR:$MASTER_PORT gpus=$CUDA_VISIBLE_DEVICES local=$LOCAL_RANK"'
    api.submit("gang", "team", role(replicas=3, command=show, cpu="100m", gpu=2, memory="64Mi"))
    job = api.wait_phase("gang", "Succeeded", "Failed", timeout=DEADLINE)
    tasks = tasks_of(api, "gang")
    assert job["phase"] == "Succeeded", tasks
    nodes = {name: task["node"] for name, task in tasks.items()}
    assert sorted(nodes.values()) == sorted([SMALL, LARGE, LARGE])  # 6 GPUs: both nodes full
    lines = {name: log_of(api, "gang", name).strip() for name in tasks}
    master = {line.split("master=")[1].split()[0] for line in lines.values()}
    assert len(master) == 1  # every rank agrees
    address, port = master.pop().split(":")
    rank0 = next(name for name, line in lines.items() if line.startswith("rank=0 "))
    assert address == "127.0.0." + nodes[rank0].rsplit("-", 1)[1] and int(port) > 0
    assert sorted(line.split()[0] for line in lines.values()) == ["rank=0", "rank=1", "rank=2"]
    assert all(" of 3 " in line for line in lines.values())
    on_large = sorted(
        lines[name].split("gpus=")[1].split()[0] for name in tasks if nodes[name] == LARGE
    )
    assert on_large == ["0,1", "2,3"]  # the engine's ids on that node, never shared
    small = next(name for name in tasks if nodes[name] == SMALL)
    assert "gpus=0,1 local=0" in lines[small]


@pytest.mark.skipif(
    importlib.util.find_spec("torch") is None,
    reason="PyTorch is not installed (make test and make demo install its CPU build)",
)
def test_the_ddp_example_trains_across_two_nodes(api: Api) -> None:
    command = [sys.executable, "-m", "phalanx.examples.ddp_train", "--steps", "30"]
    api.submit("ddp", "team", role(replicas=3, command=command, cpu="100m", gpu=2, memory="1Gi"))
    job = api.wait_phase("ddp", "Succeeded", "Failed", timeout=120)
    tasks = tasks_of(api, "ddp")
    assert job["phase"] == "Succeeded", {name: log_of(api, "ddp", name) for name in tasks}
    assert len({task["node"] for task in tasks.values()}) == 2  # 6 GPUs: both nodes
    log = log_of(api, "ddp", "ddp-worker-0")
    assert "ranks agree on the weights: True" in log
    assert "(mean of 3 ranks)" in log


def test_an_elastic_jobs_progress_report_is_read_from_its_ray_node(api: Api) -> None:
    reporter = (
        "import time; from phalanx.client import progress; "
        "progress.report(step=7, samples_per_second=64.0); time.sleep(600)"
    )
    spec = role(replicas=1, command=[sys.executable, "-c", reporter], cpu="100m", memory="256Mi")
    spec["elastic"] = {"minReplicas": 1, "maxReplicas": 2}
    api.submit("reports", "team", spec)
    job = wait_for(lambda: (j := api.job("reports"))["progress"] and j, "its report", timeout=60)
    assert (job["progress"]["step"], job["progress"]["samplesPerSecond"]) == (7, 64.0)
    api.post("/api/v1/jobs/reports/cancel", expect=200)


def test_logs_follow_streams_from_the_node_as_lines_are_written(api: Api, served: Served) -> None:
    go = served.tmp_path / "go-follow"
    script = f"echo first; while [ ! -e {go} ]; do sleep 0.1; done; echo second"
    api.submit("follow", "team", role(command=script, cpu="100m", gpu=1, memory="64Mi"))
    api.wait_phase("follow", "Running")
    seen: list[str] = []
    with api.http.stream(
        "GET", "/api/v1/jobs/follow/logs", params={"task": "follow-worker-0", "follow": "true"}
    ) as response:
        assert response.status_code == 200
        for line in response.iter_lines():
            seen.append(line)
            if line == "first":
                go.touch()  # written on the node only now: the stream must bring it later
    assert seen == ["first", "second"]
    assert api.wait_phase("follow", "Succeeded", "Failed")["phase"] == "Succeeded"


def test_cancel_leaves_no_process_on_any_node(api: Api) -> None:
    marker = "phalanx-ray-cancel-marker"
    script = f"sleep 300 # {marker}"
    api.submit(
        "cancelled",
        "team",
        role(replicas=3, command=["sh", "-c", script], cpu="100m", gpu=2, memory="64Mi"),
    )
    api.wait_phase("cancelled", "Running")
    wait_for(lambda: len(processes_with(marker)) >= 3, "the three tasks to run")
    api.post("/api/v1/jobs/cancelled/cancel", expect=200)
    api.wait_phase("cancelled", "Cancelled", "Failed", "Succeeded")
    wait_for(lambda: not processes_with(marker), "no task process left", timeout=10)


def test_a_restarted_server_reattaches_to_running_tasks(served: Served) -> None:
    api = Api(served.url, (served.data / "admin.token").read_text().strip())
    go = served.tmp_path / "go-restart"
    script = f"echo started; while [ ! -e {go} ]; do sleep 0.1; done; echo done"
    api.submit(
        "survivor", "team", role(replicas=2, command=script, cpu="100m", gpu=2, memory="64Mi")
    )
    wait_for(
        lambda: all(t["phase"] == "Running" for t in tasks_of(api, "survivor").values()),
        "both tasks started (a task killed with its server while Bound is restarted instead)",
    )
    served.kill()
    api = served.start()
    assert api.job("survivor")["phase"] == "Running"
    go.touch()
    assert api.wait_phase("survivor", "Succeeded", "Failed")["phase"] == "Succeeded"
    for name in tasks_of(api, "survivor"):
        assert log_of(api, "survivor", name).split() == ["started", "done"]  # never restarted


@pytest.mark.skipif(os.geteuid() != 0, reason="per-user identities need a server run as root")
def test_a_server_restarted_with_other_settings_hands_them_to_its_agents(
    ray_cluster: LoopbackCluster,
) -> None:
    """Restarted without --shared-identity, the server's agents start new tasks as their
    users' own uids at once, while a task started before the restart runs on to its end."""
    world = Path(tempfile.mkdtemp(prefix="phalanx-ray-", dir="/tmp"))
    world.chmod(0o711)  # tasks of other uids pass through to their directories
    served = Served(world, ray_cluster.address)
    try:
        api = served.start()
        api.queue("team")
        go = world / "go"
        script = f"id -u; while [ ! -e {go} ]; do sleep 0.1; done; echo done"
        api.submit("before", "team", role(command=script, cpu="100m", memory="64Mi"))
        wait_for(lambda: log_of(api, "before", "before-worker-0").strip() == "0", "root's task")
        served.kill()
        served.identity = "per-user"
        api = served.start()
        api.submit("after", "team", role(command="id -u", cpu="100m", memory="64Mi"))
        job = api.wait_phase("after", "Succeeded", "Failed", timeout=DEADLINE)
        assert job["phase"] == "Succeeded", job["message"]
        assert int(log_of(api, "after", "after-worker-0")) >= 1000  # the admin's own uid
        assert api.job("before")["phase"] == "Running"
        go.touch()
        assert api.wait_phase("before", "Succeeded", "Failed")["phase"] == "Succeeded"
        assert log_of(api, "before", "before-worker-0").split() == ["0", "done"]
    finally:
        served.stop()
        shutil.rmtree(world, ignore_errors=True)


#: A step's part of the artifact: each replica writes one object through s3fs.
WRITE_PART = (
    "import fsspec, os, sys; "
    "fsspec.filesystem('s3').pipe("
    "sys.argv[1] + '/part-' + os.environ['RANK'], os.environ['PHALANX_NODE'].encode())"
)
#: The next step reads every part back and says on how many nodes they were written.
COUNT_NODES = (
    "import fsspec, json, sys; fs = fsspec.filesystem('s3'); "
    "nodes = {fs.cat(p).decode() for p in fs.ls(sys.argv[1])}; "
    "fs.pipe(sys.argv[2], json.dumps(sorted(nodes)).encode())"
)


def test_a_pipeline_hands_artifacts_on_through_s3_across_two_nodes(
    ray_cluster: LoopbackCluster, tmp_path: Path, s3_endpoint: S3
) -> None:
    """No shared disk: the workspace is an S3 URL (moto's server), a gang of three
    spread over both GPU nodes writes its parts there, and a step after it reads them."""
    s3_endpoint.make_bucket("phalanx-runs")
    served = Served(
        tmp_path, ray_cluster.address, workspace="s3://phalanx-runs/ws", env=s3_endpoint.env
    )
    api = served.start()
    try:
        api.queue("team")
        python = sys.executable
        pipeline = {
            "apiVersion": "phalanx/v1",
            "kind": "Pipeline",
            "metadata": {"name": "handoff"},
            "spec": {
                "defaults": {"queue": "team", "env": s3_endpoint.env},
                "steps": {
                    "write": {
                        "job": {
                            "roles": [
                                role(
                                    replicas=3,
                                    command=[python, "-c", WRITE_PART, "{{outputs.parts}}"],
                                    cpu="100m",
                                    memory="128Mi",
                                    gpu=2,  # three of them fill both GPU nodes
                                )
                            ]
                        },
                        "outputs": {"artifacts": ["parts"]},
                    },
                    "count": {
                        "command": [
                            python,
                            "-c",
                            COUNT_NODES,
                            "{{steps.write.outputs.parts}}",
                            "{{outputs.nodes}}",
                        ],
                        "resources": {"cpu": "100m", "memory": "128Mi"},
                        "outputs": {"params": {"nodes": {"type": "json"}}},
                    },
                },
            },
        }
        api.post("/api/v1/pipelines", pipeline)
        run_id = api.post("/api/v1/pipelines/handoff/runs", {})["id"]
        run = api.wait_run(run_id, timeout=2 * DEADLINE)
        assert run["phase"] == "Succeeded", json.dumps(run, indent=1)
        (count,) = [unit for unit in run["steps"] if unit["unit"] == "count"]
        assert count["outputs"]["nodes"] == sorted([SMALL, LARGE])
    finally:
        served.stop()


def test_a_local_workspace_on_several_nodes_is_refused_at_start(
    ray_cluster: LoopbackCluster, tmp_path: Path
) -> None:
    served = Served(tmp_path, ray_cluster.address, workspace=str(tmp_path / "ws"))
    with pytest.raises(AssertionError, match=r"--workspace: the workspace .* is a path on"):
        served.start()


def test_an_image_job_runs_in_a_container_on_its_ray_node(api: Api, busybox_image: str) -> None:
    nodes = {node["name"]: node["labels"] for node in api.get("/api/v1/nodes")}
    assert nodes[SMALL].get("phalanx.io/container-runtime") == "podman"  # probed on the node
    script = (
        'if [ -e /usr/bin/python3 ]; then echo host; else echo "contained on $PHALANX_NODE"; fi'
    )
    boxed = {
        **role(command=["sh", "-c", script], cpu="100m", memory="64Mi"),  # no GPU: no CDI here
        "image": busybox_image,
    }
    api.submit("boxed", "team", boxed)
    job = api.wait_phase("boxed", "Succeeded", "Failed", timeout=DEADLINE)
    task = tasks_of(api, "boxed")["boxed-worker-0"]
    assert job["phase"] == "Succeeded", (job["message"], log_of(api, "boxed", "boxed-worker-0"))
    assert log_of(api, "boxed", "boxed-worker-0").strip() == f"contained on {task['node']}"


def test_a_mount_through_a_link_fails_to_start_on_its_ray_node(
    api: Api, served: Served, busybox_image: str
) -> None:
    """The node's agent checks a mount's source as the server does: a link on its path
    (here, to the server's database) is refused before the container is made."""
    link = served.tmp_path / "wal"
    link.symlink_to(served.data / "phalanx.db-wal")
    boxed = {
        **role(command=["sh", "-c", "cat /x"], cpu="100m", memory="64Mi"),
        "image": busybox_image,
        "mounts": [str(link)],
    }
    api.submit("linked", "team", boxed, maxRetry=0)
    job = api.wait_phase("linked", "Succeeded", "Failed", timeout=DEADLINE)
    assert job["phase"] == "Failed", job
    assert f"is a symbolic link to {served.data / 'phalanx.db-wal'}" in job["message"], job


def test_a_node_that_joins_is_scheduled_on(
    api: Api, ray_cluster: LoopbackCluster, tmp_path: Path
) -> None:
    ray_cluster.join("127.0.0.5", 8, tmp_path)
    wait_for(
        lambda: "ray-127-0-0-5" in {node["name"] for node in api.get("/api/v1/nodes")},
        "the new node in the server's nodes",
        timeout=DEADLINE,
    )
    api.submit("eight", "team", role(command="true", cpu="100m", gpu=8, memory="64Mi"))
    assert api.wait_phase("eight", "Succeeded", "Failed")["phase"] == "Succeeded"
    assert tasks_of(api, "eight")["eight-worker-0"]["node"] == "ray-127-0-0-5"
    ray_cluster.kill("127.0.0.5")


def test_a_model_trained_on_a_node_is_served_from_the_nodes_behind_the_gateway(
    api: Api, served: Served
) -> None:
    # the version is read on the node the training ran on, by its agent
    trainer = role("trainer", command=["sh", "-c", TRAIN, "one"], cpu="100m", memory="64Mi")
    trainer["model"] = {"name": "ray-mnist", "path": "model"}
    api.submit("ray-train", "team", trainer)
    assert api.wait_phase("ray-train", "Succeeded", "Failed")["phase"] == "Succeeded"
    (registered,) = events(api, "ray-train", "ModelRegistered")
    assert "2 files, 10 bytes" in registered, registered
    two = predictor("main", "ray-mnist:v1", minReplicas=2, maxReplicas=2)
    api.post("/api/v1/inferences", inference("ray-mnist", two, queue="team"))

    def all_ready() -> Any:
        view = api.get("/api/v1/inferences/ray-mnist")
        replicas = [r for p in view["predictors"] for r in p["replicas"]]
        return len(replicas) == 2 and all(r["ready"] for r in replicas) and replicas

    replicas = wait_for(all_ready, "both replicas Ready on the Ray nodes", timeout=120)
    nodes = {tasks_of(api, r["job"])[f"{r['job']}-server-0"]["node"] for r in replicas}
    addresses = {node.removeprefix("ray-").replace("-", ".") for node in nodes}
    # each replica serves on its node's address, on the port reserved for it there
    assert {r["endpoint"].rpartition(":")[0] for r in replicas} == addresses
    # each node's agent copied the version out of the store just before the start
    digest = api.get("/api/v1/models/ray-mnist/versions/1")["digest"].removeprefix("sha256:")
    for node in nodes:
        assert (served.data / "tasks-ray" / node / "models" / digest / "sub" / "c").is_file()
    answers = {api.http.get("/serve/ray-mnist/hello").text.split()[0] for _ in range(4)}
    assert answers == {"one"}
    api.http.delete("/api/v1/inferences/ray-mnist").raise_for_status()
    for replica in replicas:  # stopped, then deleted
        path = f"/api/v1/jobs/{replica['job']}"
        wait_for(lambda p=path: api.http.get(p).status_code == 404, "the replica gone")


def test_a_lost_node_fails_its_tasks_and_the_gang_restarts_on_the_rest(
    api: Api, ray_cluster: LoopbackCluster, served: Served
) -> None:
    api.submit(
        "resilient", "team",
        role(replicas=2, command="echo $$ > pid; exec sleep 120", cpu="100m", gpu=1, memory="64Mi"),
        maxRetry=2,
    )  # fmt: skip
    wait_for(
        lambda: all(t["phase"] == "Running" for t in tasks_of(api, "resilient").values()),
        "both tasks started",
    )
    first = {name: task["node"] for name, task in tasks_of(api, "resilient").items()}
    victim = sorted(first.values())[0]
    # Each node's agent keeps its tasks under TASKS_DIR-ray/<node>/tasks (here all on one disk).
    agent_tasks = served.data / "tasks-ray" / victim / "tasks" / "resilient"
    files = [agent_tasks / n / "pid" for n, node in first.items() if node == victim]
    # Running means started: each shell writes its pid a moment later.
    wait_for(lambda: all(f.exists() and f.read_text().strip() for f in files), "the pid files")
    pids = [int(f.read_text()) for f in files]
    ray_cluster.kill(victim.removeprefix("ray-").replace("-", "."))
    killed_at = time.monotonic()
    # The tasks die with their node's Ray (as Ray's own workers do): none runs on unseen.
    wait_for(lambda: not any(Path(f"/proc/{pid}").exists() for pid in pids), "the lost tasks gone")

    def restarted_elsewhere() -> bool:
        tasks = tasks_of(api, "resilient").values()
        return all(t["phase"] == "Running" and t["node"] != victim for t in tasks)

    wait_for(restarted_elsewhere, "the gang running again on the surviving node", timeout=60)
    took = time.monotonic() - killed_at
    status = {node["name"]: node["ready"] for node in api.get("/api/v1/nodes")}
    assert status[victim] is False and status["ray-127-0-0-4"] is True
    job = api.job("resilient")
    assert job["attempts"] >= 1, job
    events = " ".join(event["message"] for event in api.get("/api/v1/jobs/resilient/events"))
    assert f"its Ray node {victim} is gone" in events, events
    print(f"\nnode lost -> gang running elsewhere: {took:.1f} s")
    api.post("/api/v1/jobs/resilient/cancel", expect=200)
    api.wait_phase("resilient", "Cancelled", "Failed")
