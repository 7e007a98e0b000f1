"""Properties of whole simulated runs: random clusters, queue trees, workloads and policies.

Whatever the workload and the shipped policy, with node failures and slow evictions:
- no node holds more than its capacity at any instant of ``events.jsonl``;
- a task is started only when it is not running, and ended only while it runs;
- every submitted job is accounted for at the end, and a run with no clock limit ends
  with every job that fits somewhere finished, failed or killed;
- the summary's counts agree with the events.
"""

from __future__ import annotations

import io
import json
from collections import defaultdict
from dataclasses import replace

from hypothesis import given
from hypothesis import strategies as st

from phalanx.domain.job import Job, Role
from phalanx.domain.node import Node
from phalanx.policies import load_policy, policy_names
from phalanx.sim.runner import SimOptions, Simulation
from phalanx.sim.workload import Workload, WorkloadJob

from .strategies import MIXED, WHOLE_GPUS, leaves, nodes, queue_trees
from .world import res, suite_settings


@st.composite
def workload_jobs(draw: st.DrawFn, index: int, queues: list[str]) -> WorkloadJob:
    """A pending job of one or two roles, with its true run time and checkpoints."""
    roles = tuple(
        Role(
            name=name,
            replicas=draw(st.integers(1, 4)),
            resources=res(draw(st.sampled_from([1, 4, 8])), 4, draw(st.sampled_from(WHOLE_GPUS))),
        )
        for name in draw(st.sampled_from([("worker",), ("master", "worker")]))
    )
    replicas = sum(r.replicas for r in roles)
    job = Job(
        name=f"j{index:02d}",
        queue=draw(st.sampled_from(queues)),
        roles=roles,
        user=draw(st.sampled_from(["u0", "u1"])),
        priority=draw(st.integers(0, 3)),
        min_available=draw(st.one_of(st.none(), st.integers(1, replicas))),
        creation_time=float(draw(st.integers(0, 9000))),
        walltime=draw(st.sampled_from([None, None, 600.0, 20000.0])),
        max_retry=draw(st.integers(0, 2)),
    )
    return WorkloadJob(
        job=job,
        duration=float(draw(st.sampled_from([30, 300, 3000, 20000]))),
        checkpoint_interval=draw(st.sampled_from([None, 60.0, 1000.0])),
    )


@st.composite
def runs(draw: st.DrawFn) -> tuple[tuple[Node, ...], Workload, str, SimOptions]:
    cluster = draw(nodes(MIXED, max_nodes=6))
    total = {name: sum(n.capacity.get(name) for n in cluster) for name in ("cpu", "memory", "gpu")}
    queues = draw(queue_trees(total))
    names = leaves(queues)
    jobs = [draw(workload_jobs(index, names)) for index in range(draw(st.integers(1, 14)))]
    workload = Workload(
        jobs=tuple(sorted(jobs, key=lambda w: (w.submit_time, w.name))), queues=queues
    )
    options = SimOptions(
        period=draw(st.sampled_from([10.0, 60.0])),
        trigger_delay=draw(st.sampled_from([0.0, 1.0])),
        grace=draw(st.sampled_from([0.0, 30.0])),
        node_mtbf=draw(st.sampled_from([None, None, 20000.0])),
        node_mttr=600.0,
        seed=draw(st.integers(0, 3)),
        until=200_000.0,
    )
    return cluster, workload, draw(st.sampled_from(policy_names())), options


@suite_settings(40)
@given(runs())
def test_no_node_is_over_committed_and_every_job_is_accounted_for(
    run: tuple[tuple[Node, ...], Workload, str, SimOptions],
) -> None:
    cluster, workload, policy_name, options = run
    policy = load_policy(policy_name)
    out = io.StringIO()
    sim = Simulation(
        cluster,
        workload,
        policy.config,
        options=replace(options, oracle_runtime=policy.oracle_runtime),
        events_out=out,
    )
    summary = sim.run().summary(sim_wall_s=0.0)
    capacity = {n.name: n.capacity for n in cluster}
    used: dict[str, dict[str, float]] = defaultdict(lambda: defaultdict(float))
    held: dict[str, tuple[str, str, dict[str, float]]] = {}
    submitted: set[str] = set()
    ended: dict[str, str] = {}
    for line in out.getvalue().splitlines():
        row = json.loads(line)
        if row["ev"] == "Submitted":
            submitted.add(row["job"])
        elif row["ev"] == "Placed":
            assert row["job"] in submitted
            for task in row["tasks"]:
                assert task["task"] not in held, f"{task['task']} started twice: {row}"
                held[task["task"]] = (row["job"], task["node"], task["resources"])
                for name, amount in task["resources"].items():
                    used[task["node"]][name] += amount
                    limit = capacity[task["node"]].get(name)
                    assert used[task["node"]][name] <= limit + 1e-6, row
        else:
            if row["ev"] in ("Evicted", "TaskFailed"):  # each lists the tasks that leave
                leaving = row["tasks"]
            elif row["ev"] in ("Pending", "Succeeded", "Failed", "Cancelled"):  # none stays
                leaving = [name for name, (job, _, _) in held.items() if job == row["job"]]
            else:
                continue
            for task in leaving:
                assert task in held, f"{task} ended but was not running: {row}"
                _, node, resources = held.pop(task)
                for name, amount in resources.items():
                    used[node][name] -= amount
            if row["ev"] in ("Succeeded", "Failed", "Cancelled"):
                ended[row["job"]] = row["ev"]
    assert submitted == {w.name for w in workload.jobs}
    assert summary["jobs"] == len(workload.jobs)
    assert summary["finished"] + summary["failed"] + summary["unfinished"] == summary["jobs"]
    assert summary["finished"] == sum(ev == "Succeeded" for ev in ended.values())
