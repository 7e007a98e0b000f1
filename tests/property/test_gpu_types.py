"""GPU types: over random clusters whose nodes carry two or three GPU types (some without
the label: a type of their own), random queues and jobs (some allowed to mix types, some
selecting types), no cycle ever puts the GPU tasks of a job that may not mix on two types,
and no task lands on a type its role's ``gpuTypes`` leaves out."""

from __future__ import annotations

import dataclasses
from collections import defaultdict

from hypothesis import event, given
from hypothesis import strategies as st

from phalanx.domain.job import Job, TaskPhase
from phalanx.domain.node import GPU_MODEL_LABEL
from phalanx.engine import run_cycle

from .strategies import worlds
from .world import World, suite_settings

_TYPES = ("A100", "T4", None)
_ON_NODE = (TaskPhase.BOUND, TaskPhase.RUNNING)


@st.composite
def typed(draw: st.DrawFn) -> World:
    """A world whose nodes have random GPU types and whose jobs some mix, some select."""
    world = draw(worlds())
    kinds = draw(st.sampled_from([_TYPES[:2], _TYPES]))
    nodes = []
    for node in world.nodes:
        kind = draw(st.sampled_from(kinds))
        labels = dict(node.labels)
        if kind is not None:
            labels[GPU_MODEL_LABEL] = kind
        nodes.append(dataclasses.replace(node, labels=labels))
    jobs: list[Job] = []
    for job in world.jobs:
        mixed = draw(st.sampled_from([False, False, False, True]))
        roles = tuple(
            dataclasses.replace(role, gpu_types=draw(st.sampled_from([(), (), ("T4",)])))
            for role in job.roles
        )
        jobs.append(dataclasses.replace(job, allow_mixed_gpu_types=mixed, roles=roles))
    return dataclasses.replace(world, nodes=tuple(nodes), jobs=tuple(jobs))


def _gpu_roles(job: Job) -> set[str]:
    return {r.name for r in job.roles if r.resources.get("gpu") or r.resources.get("gpu-memory")}


def _violations(world: World) -> list[str]:
    decisions = run_cycle(world.snapshot(), world.config, now=world.now)
    kind = {node.name: node.labels.get(GPU_MODEL_LABEL, "") for node in world.nodes}
    types: dict[str, set[str]] = defaultdict(set)
    before: dict[str, set[str]] = defaultdict(set)
    jobs = {job.name: job for job in world.jobs}
    role_of = {task.name(job.name): task.role for job in world.jobs for task in job.all_tasks()}
    for job in world.jobs:
        for task in job.all_tasks():
            if task.role in _gpu_roles(job) and task.phase in _ON_NODE and task.node:
                before[job.name].add(kind[task.node])
                types[job.name].add(kind[task.node])
    found = []
    for item in [*decisions.binds, *decisions.pipelined]:
        job = jobs[item.job]
        role = next(r for r in job.roles if r.name == role_of[item.task])
        if role.gpu_types and kind[item.node] not in role.gpu_types:
            found.append(
                f"{item.task} on {item.node} ({kind[item.node]!r}): not in {role.gpu_types}"
            )
        if role.name in _gpu_roles(job):
            types[item.job].add(kind[item.node])
    for name, seen in types.items():
        if jobs[name].allow_mixed_gpu_types:
            if len(seen) > 1:
                event("a job allowed to mix spans types")
            continue
        if len(seen) > 1 and len(before[name]) <= 1:
            found.append(f"{name} spans {sorted(seen)} (before the cycle {sorted(before[name])})")
        elif seen:
            event("a typed job placed")
    return found


@suite_settings(60)
@given(world=typed())
def test_no_job_that_may_not_mix_ever_spans_two_gpu_types(world: World) -> None:
    found = _violations(world)
    assert not found, "\n".join([*found, "--- input", world.describe()])
