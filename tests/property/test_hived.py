"""hived over random clusters, virtual clusters and job streams, cycle after cycle.

No GPU is ever given to two tasks, no cycle raises, the same input gives the same
Decisions, and work guaranteed to a virtual cluster (its tasks claimed in its cells
when the cycle opens) is never evicted for another queue.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from hypothesis import given
from hypothesis import strategies as st

from phalanx.domain.cells import NodeCells, derive_levels
from phalanx.domain.job import Job, TaskPhase
from phalanx.domain.node import Gpu, Node
from phalanx.domain.queue import Queue
from phalanx.domain.topology import preset
from phalanx.engine import SchedulerConfig, Snapshot, run_cycle
from phalanx.engine.cycle import open_session
from phalanx.engine.plugins.hived.celltree import CellTree
from phalanx.engine.plugins.hived.plugin import _guarantees
from phalanx.engine.plugins.hived.virtual import VirtualClusters
from tests.builders import config, make_job, make_queue, res
from tests.scenarios.world import World

from .world import suite_settings

DGX1, BOX = preset("dgx1-v100"), preset("pcie-4gpu")
BIG = derive_levels(8, DGX1, "dgx1")
SMALL = derive_levels(4, BOX, "box")
TYPES = ("dgx1-node", "dgx1-nvlink", "dgx1-gpu", "box-node", "box-pcie", "rack")
CONFIGS = (
    config(["allocate", "reclaim", "preempt"], ["priority", "gang"], ["predicates", "hived"]),
    config(
        ["allocate", "backfill", "reclaim", "preempt"],
        ["priority", "gang"],
        ["predicates", "hived", "gpu-topology"],
        ["proportion"],
    ),
)


def _node(name: str, big: bool, rack: str | None) -> Node:
    count = 8 if big else 4
    above = (("rack", rack),) if rack else ()
    return Node(
        name=name,
        capacity=res(64, 512, count),
        gpus=tuple(Gpu(index=i) for i in range(count)),
        gpu_topology=DGX1 if big else BOX,
        cells=NodeCells(levels=BIG if big else SMALL, above=above),
    )


@dataclass(frozen=True)
class Case:
    nodes: tuple[Node, ...]
    queues: tuple[Queue, ...]
    config: SchedulerConfig
    steps: tuple[tuple[Job, ...], ...]


@st.composite
def cases(draw: st.DrawFn) -> Case:
    racks, loose, boxes = draw(st.integers(0, 2)), draw(st.integers(0, 2)), draw(st.integers(0, 2))
    nodes = [_node(f"r{r}-{i}", True, f"rack-{r}") for r in range(racks) for i in range(2)]
    nodes += [_node(f"d{i}", True, None) for i in range(loose)]
    nodes += [_node(f"b{i}", False, None) for i in range(boxes or (not nodes))]
    vcs = draw(
        st.lists(st.tuples(st.sampled_from(TYPES), st.integers(1, 2)), min_size=1, max_size=3)
    )
    queues = [make_queue(f"vc{k}", cells={t: n}) for k, (t, n) in enumerate(vcs)]
    queues.append(make_queue("b"))
    job = st.builds(
        lambda q, g, r, p, k: (q, g, r, p, k),
        st.sampled_from([q.name for q in queues]),
        st.sampled_from([1, 2, 4, 8]),
        st.sampled_from([1, 1, 2]),
        st.sampled_from([0, 0, 5]),
        st.booleans(),
    )
    steps = []
    for step, batch in enumerate(draw(st.lists(st.lists(job, max_size=6), min_size=2, max_size=6))):
        steps.append(
            tuple(
                make_job(
                    f"j{step}-{i}",
                    queue=q,
                    gpus=g,
                    replicas=r,
                    priority=p,
                    preemptible=k or q == "b",
                    created=step + i / 10,
                )
                for i, (q, g, r, p, k) in enumerate(batch)
            )
        )
    return Case(tuple(nodes), tuple(queues), draw(st.sampled_from(CONFIGS)), tuple(steps))


def _claimed(world: World) -> set[str]:
    """Names of the tasks hived counts as guaranteed when the next cycle opens."""
    snapshot = Snapshot.build(nodes=world.nodes, queues=world.queues, jobs=world.jobs.values())
    tree = CellTree(snapshot)
    guarantees, _ = _guarantees(snapshot, tree)
    vcs = VirtualClusters(open_session(snapshot, world.config, now=0.0), tree, guarantees)
    return {t.name for j in snapshot.jobs.values() for t in j.tasks if id(t) in vcs.claims}


@suite_settings(50)
@given(case=cases())
def test_hived_cycles_keep_gpus_single_guarantees_whole_and_decisions_stable(case: Case) -> None:
    world = World(nodes=case.nodes, queues=case.queues, config=case.config)
    for step, jobs in enumerate(case.steps):
        for job in jobs:
            world.submit(job, runtime=4.5)
        world.retire(float(step))  # what step does first: the cycle sees the same jobs
        claimed = _claimed(world)
        again = Snapshot.build(nodes=world.nodes, queues=world.queues, jobs=world.jobs.values())
        decisions = world.step(float(step))
        assert run_cycle(again, case.config, now=float(step)) == decisions
        queue_of = {name: job.queue for name, job in world.jobs.items()}
        for evict in decisions.evictions:
            if queue_of.get(evict.by) != queue_of.get(evict.job):
                assert evict.task not in claimed, f"guaranteed {evict.task} evicted for {evict.by}"
        held = Counter(
            (t.node, g)
            for job in world.jobs.values()
            for t in job.all_tasks()
            if t.phase in (TaskPhase.BOUND, TaskPhase.RUNNING)
            for g in t.gpus
        )
        assert all(n == 1 for n in held.values()), held
