"""Ray's nodes and their agents, without a server: every alive Ray node is a node with
its GPUs probed on it; its agent obeys its server's key alone; a new server's executor
kills what it did not adopt and refuses a stale start. In-process ``RayCluster``s and
executors on a real three-node loopback cluster (``conftest``); each "server" is one
``RayExecutor``. The last test kills a worker node."""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from phalanx.benchmarks.raycluster import DEADLINE, HEAD, WORKERS, LoopbackCluster
from phalanx.domain.node import Gpu, Node
from phalanx.domain.resources import Resources
from phalanx.engine.decisions import Bind
from phalanx.executors.base import TaskEvent, TaskEventKind
from phalanx.executors.launch import TaskLaunch
from phalanx.executors.ray.agent import STALE_RUN, AgentRefused, agent_name
from phalanx.executors.ray.cluster import RayCluster
from phalanx.executors.ray.executor import RayExecutor
from tests.integration.control.serving import wait_for

NODE = "ray-127-0-0-2"
#: A Cluster document's view of NODE: two T4 cards (the loopback nodes have no NVML).
DECLARED = Node(
    name=NODE,
    capacity=Resources.of({"cpu": 1000, "gpu": 2}),
    gpus=(Gpu(index=0, model="T4", memory=16e9), Gpu(index=1, model="T4", memory=16e9)),
)
NAMESPACE = f"phalanx-test-{os.getpid()}"
KEY = "k" * 64


def resolve(bind: Bind) -> TaskLaunch:
    return TaskLaunch(
        job=bind.job,
        task=bind.task,
        role=bind.role,
        index=bind.index,
        node=bind.node,
        command="echo $$ > pid; exec sleep 300",
        address="127.0.0.2",
    )


@pytest.fixture(scope="module")
def cluster(
    ray_cluster: LoopbackCluster, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[RayCluster]:
    made = RayCluster(
        namespace=NAMESPACE,
        key=KEY,
        agent_root=tmp_path_factory.mktemp("agents"),
        declared={NODE: DECLARED},
        refresh=0.2,
    )
    made.start()
    yield made
    made.close()


def test_each_alive_ray_node_is_a_node_with_its_address_and_gpus(cluster: RayCluster) -> None:
    nodes = {node.name: node for node in cluster.state.nodes}
    assert set(nodes) == set(cluster.state.alive) == {"ray-127-0-0-4", NODE, "ray-127-0-0-3"}
    for address, count in {HEAD: 0, **WORKERS}.items():
        node = nodes["ray-" + address.replace(".", "-")]
        assert node.address == address
        assert node.capacity["cpu"] == 1000 and node.capacity.get("gpu", 0) == count
        assert len(node.gpus) == count and "ray.io/node-id" in node.labels
    # No NVML on this machine: the declared cards where they agree with Ray, else by count.
    assert nodes[NODE].gpus == DECLARED.gpus
    assert nodes["ray-127-0-0-3"].gpus == tuple(Gpu(index=i) for i in range(4))


def test_each_node_without_nvml_says_so_once_through_its_agent(cluster: RayCluster) -> None:
    """Before any other executor polls: each agent's first report says why its node's
    GPUs are not read (no NVML here), and no report says it again."""
    executor = RayExecutor(cluster, resolve)
    said: dict[str, str | None] = {}

    def heard_from_every_node() -> bool:
        executor.poll(now=time.time())
        for sample in executor.gpu_samples():
            assert sample.node not in said, f"{sample.node} said it has no NVML twice"
            said[sample.node] = sample.absent
        return set(said) >= set(cluster.state.alive)

    wait_for(heard_from_every_node, "every agent's word on its GPUs")
    assert all(reason and "NVML" in reason for reason in said.values())
    time.sleep(1.0)
    executor.poll(now=time.time())
    assert executor.gpu_samples() == []


def test_an_agent_obeys_its_servers_key_alone(
    cluster: RayCluster, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A caller with Ray's token (this test process) finds the agent by its name, but
    each call without the server's key is refused before it does anything; a second
    server with another key on the same namespace takes no node and says why."""
    import ray

    actor = ray.get_actor(agent_name(NODE), namespace=NAMESPACE)
    calls: list[Any] = [
        actor.events.remote("not-the-key", 0.0),
        actor.adopt.remote([], time.time()),  # the key left out: its records taken for it
        actor.free_ports.remote(1),
    ]
    for call in calls:
        with pytest.raises(AgentRefused, match="obeys its server alone"):
            ray.get(call, timeout=DEADLINE)
    assert ray.get(cluster.agent(NODE).free_ports.remote(1), timeout=DEADLINE)  # with it
    other = RayCluster(namespace=NAMESPACE, key="o" * 64, agent_root=tmp_path / "other")
    with caplog.at_level(logging.ERROR):
        other.start()
    other.close()
    assert not other.state.nodes
    assert f"Ray node {NODE} is left out" in caplog.text


def bind(task: str) -> Bind:
    return Bind(job="job", task=task, role="w", index=int(task[-1]), node=NODE)


def events_of(executor: RayExecutor, want: int) -> list[TaskEvent]:
    seen: list[TaskEvent] = []

    def enough() -> bool:
        seen.extend(executor.poll(now=time.time()))
        return len(seen) >= want

    wait_for(enough, f"{want} event(s)")
    return seen


def pid_of(cluster: RayCluster, task: str) -> int:
    path = cluster.agent_root / NODE / "tasks" / "job" / task / "pid"
    wait_for(lambda: path.exists() and path.read_text().strip(), "the task's pid file")
    return int(path.read_text())


def test_a_new_server_kills_what_it_did_not_adopt_and_refuses_a_stale_start(
    cluster: RayCluster,
) -> None:
    old = RayExecutor(cluster, resolve)
    old.start([bind("t0"), bind("t1")], now=time.time())
    assert [e.kind for e in events_of(old, 2)] == [TaskEventKind.STARTED] * 2
    stray, kept = pid_of(cluster, "t0"), pid_of(cluster, "t1")

    new = RayExecutor(cluster, resolve)  # as after a restart: t1 adopted, t0 not
    kept_record = next(r for r in old.records() if r.task == "t1")
    new.adopt([kept_record], now=time.time())
    wait_for(lambda: new.poll(now=time.time()) or not Path(f"/proc/{stray}").exists(), "t0 killed")
    wait_for(lambda: not Path(f"/proc/{stray}").exists(), "the stray t0 gone")
    assert Path(f"/proc/{kept}").exists()  # the adopted one runs on

    newer = RayExecutor(cluster, resolve)  # a start of t1 while it still runs: refused
    newer.adopt([], now=time.time())
    newer.start([bind("t1")], now=time.time())
    refused = [e for e in events_of(newer, 1) if e.kind is TaskEventKind.FAILED_TO_START]
    assert refused and refused[0].message == STALE_RUN
    wait_for(lambda: not Path(f"/proc/{kept}").exists(), "the stale t1 killed")


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


def test_a_lost_node_leaves_within_seconds(
    ray_cluster: LoopbackCluster, cluster: RayCluster
) -> None:
    ray_cluster.kill("127.0.0.3")
    wait_for(lambda: "ray-127-0-0-3" not in cluster.state.alive, "the lost node gone")
    assert cluster.state.alive == {"ray-127-0-0-4", NODE}
