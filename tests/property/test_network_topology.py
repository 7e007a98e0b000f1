"""Hard network placement: every gang bound in a cycle lies under one switch of its tier
(and, with a group size, every group does), over random clusters, queues and jobs."""

from __future__ import annotations

import dataclasses
from collections import defaultdict

from hypothesis import event, given
from hypothesis import strategies as st

from phalanx.domain.job import Job, JobPhase, NetworkPlacement, TaskPhase
from phalanx.engine import SchedulerConfig, run_cycle
from phalanx.engine.framework.config import ActionConfig, PluginConfig

from .strategies import worlds
from .world import World, suite_settings

#: Preempt and reclaim make room by eviction and do not consult confinements (yet).
ACTIONS = ("enqueue", "allocate", "backfill")


def _confined(config: SchedulerConfig) -> SchedulerConfig:
    """``config`` with the network-topology plugin last and no eviction actions."""
    last = (*config.tiers[-1], PluginConfig(name="network-topology"))
    return dataclasses.replace(
        config,
        actions=tuple(a for a in config.actions if a.name in ACTIONS)
        or (ActionConfig(name="allocate"),),
        tiers=(*config.tiers[:-1], last),
    )


@st.composite
def networked(draw: st.DrawFn) -> World:
    """A world whose nodes sit under ToRs (two per spine) and whose waiting multi-task
    jobs ask for a hard tier, some in groups."""
    world = draw(worlds(configs=("default", "spread")))
    tors = draw(st.integers(1, 3))
    nodes = []
    for node in world.nodes:
        tor = draw(st.integers(0, tors - 1))
        network = {"tor": f"tor-{tor}", "spine": f"spine-{tor // 2}"}
        nodes.append(dataclasses.replace(node, network=network))
    jobs: list[Job] = []
    for job in world.jobs:
        waiting = all(t.phase is TaskPhase.PENDING for t in job.all_tasks())
        if waiting and job.replicas > 1 and draw(st.sampled_from([True, True, False])):
            tier = draw(st.sampled_from(["tor", "spine"]))
            group = draw(st.sampled_from([None, None, 2]))
            placement = NetworkPlacement(tier=tier, group=group)
            jobs.append(dataclasses.replace(job, network=placement, phase=JobPhase.QUEUED))
        else:
            jobs.append(job)
    return dataclasses.replace(world, nodes=tuple(nodes), jobs=tuple(jobs))


def _violations(world: World, config: SchedulerConfig) -> list[str]:
    decisions = run_cycle(world.snapshot(), config, now=world.now)
    network = {node.name: node.network for node in world.nodes}
    placed: dict[str, list[tuple[int, int, str]]] = defaultdict(list)
    order = {
        task.name(job.name): (r, task.index)
        for job in world.jobs
        for r, role in enumerate(job.roles)
        for task in job.all_tasks()
        if task.role == role.name
    }
    for item in [*decisions.binds, *decisions.pipelined]:
        placed[item.job].append((*order[item.task], item.node))
    found = []
    for job in world.jobs:
        if job.network is None or job.name not in placed:
            continue
        event(f"confined gang placed ({job.network.tier}, group {job.network.group})")
        tasks = sorted(placed[job.name])
        size = job.network.group or len(tasks)
        for start in range(0, len(tasks), size):
            switches = {
                network[node][job.network.tier] for _, _, node in tasks[start : start + size]
            }
            if len(switches) > 1:
                found.append(f"{job.name} tasks {start}.. span {sorted(switches)}")
    return found


@suite_settings(50)
@given(world=networked())
def test_every_hard_gang_lies_under_one_switch_of_its_tier(world: World) -> None:
    found = _violations(world, _confined(world.config))
    assert not found, "\n".join([*found, "--- input", world.describe()])
