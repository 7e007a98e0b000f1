"""A server killed with SIGKILL at random moments of its gangs' lives, on two Ray nodes:
the tasks of a node whose agent lives outlive it, and the restarted server neither loses
one nor starts one twice.

The moments are drawn from a seed printed with the test (``PHALANX_KILL_SEED`` replays
one); each round submits a gang, waits a random while and kills the server, so that the
kills land on gangs pending, being bound, starting, running and ending. First, as where
a kill once lost a task, a node leaves and rejoins and every agent is replaced.
"""

from __future__ import annotations

import os
import random
import time
from pathlib import Path

from phalanx.benchmarks.raycluster import DEADLINE, LoopbackCluster
from phalanx.control.server import ray_namespace
from phalanx.executors.ray.agent import agent_name
from tests.integration.control.serving import Api, role, wait_for
from tests.integration.ray.served import LARGE, SMALL, Served, tasks_of

#: Kills of the server, one per submitted gang.
ROUNDS = 20


def test_kills_of_the_server_at_random_moments_lose_no_task_and_rerun_none(
    ray_cluster: LoopbackCluster, tmp_path: Path
) -> None:
    seed = int(os.environ.get("PHALANX_KILL_SEED") or random.randrange(2**32))
    print(f"\nPHALANX_KILL_SEED={seed}")
    draw = random.Random(seed)
    marks = tmp_path / "marks"  # one line per start of each task, written by the task
    marks.mkdir()
    served = Served(tmp_path, ray_cluster.address)
    api = served.start()
    api.queue("team")
    try:
        rejoin_and_replace_agents(api, ray_cluster, served, tmp_path)
        for n in range(ROUNDS):
            script = (
                f'echo "$PHALANX_NODE" >> {marks}/"$PHALANX_TASK"; '
                f"sleep {draw.uniform(0.2, 2.5):.2f}"
            )
            api.submit(
                f"gang-{n}", "team",
                role(replicas=3, command=script, cpu="100m", gpu=2, memory="64Mi"),
            )  # fmt: skip
            time.sleep(draw.uniform(0.0, 2.5))
            served.kill()
            api = served.start()
        nodes: set[str] = set()
        for n in range(ROUNDS):
            job = api.wait_phase(f"gang-{n}", "Succeeded", "Failed", timeout=2 * DEADLINE)
            assert (job["phase"], job["attempts"]) == ("Succeeded", 0), (seed, job)
            for name, task in tasks_of(api, f"gang-{n}").items():
                starts = (marks / name).read_text().split()
                assert starts == [task["node"]], (seed, name, starts)  # started once, there
                nodes.add(task["node"])
        assert nodes == {SMALL, LARGE}, nodes  # each gang spans both GPU nodes
    finally:
        served.stop()


def rejoin_and_replace_agents(
    api: Api, ray_cluster: LoopbackCluster, served: Served, scratch: Path
) -> None:
    """SMALL's node leaves and joins again (a new raylet), then every GPU node's agent
    is killed: the server makes new ones, as after a node's restart."""
    import ray

    def ready() -> dict[str, bool]:
        return {node["name"]: node["ready"] for node in api.get("/api/v1/nodes")}

    ray_cluster.kill("127.0.0.2")
    wait_for(lambda: not ready()[SMALL], "the node gone", timeout=DEADLINE)
    ray_cluster.join("127.0.0.2", 2, scratch)
    wait_for(lambda: ready()[SMALL], "the node back", timeout=DEADLINE)
    namespace = ray_namespace(served.data)
    killed = {}
    for node in (SMALL, LARGE):
        actor = ray.get_actor(agent_name(node), namespace=namespace)
        killed[node] = actor._actor_id
        ray.kill(actor)

    def replaced() -> bool:
        try:
            agents = {n: ray.get_actor(agent_name(n), namespace=namespace) for n in killed}
        except ValueError:  # one not made yet
            return False
        return all(agents[n]._actor_id != killed[n] for n in killed)

    wait_for(replaced, "new agents", timeout=DEADLINE)
    wait_for(lambda: ready()[SMALL] and ready()[LARGE], "both nodes ready", timeout=DEADLINE)
