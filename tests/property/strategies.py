"""Hypothesis strategies: small random clusters, two-level queue trees, gang jobs, configs.

A drawn ``World`` is immutable, so a test can build as many fresh snapshots of it as
it needs. Running tasks are placed consistently with node capacity and max-tasks, so
every input is a state a real cluster could be in. Sizes stay small (<= 12 nodes,
<= 15 jobs) so that the whole property suite runs in well under a minute.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from hypothesis import strategies as st

from phalanx.domain.job import Job, JobPhase, Role, Task, TaskPhase
from phalanx.domain.node import Node
from phalanx.domain.queue import ROOT_QUEUE, Queue
from phalanx.domain.resources import Resources

from .world import CONFIGS, NOW, World, res

#: Node shapes (cpu cores, memory GiB, gpus): CPU-only boxes and GPU servers.
NODE_SHAPES = ((8, 32, 0), (16, 64, 2), (16, 64, 4), (32, 128, 8), (32, 256, 8))
#: Role names of one job, after the usual distributed-training layouts.
ROLE_SETS = (("worker",), ("master", "worker"), ("ps", "worker"), ("launcher", "worker"))
WHOLE_GPUS = (0, 1, 1, 2, 4, 8)
#: Non-dyadic fractions: their float sums do not cancel exactly.
FRACTIONAL_GPUS = (0.1, 0.2, 0.3, 0.7, 1)
#: Initial job states, and the mix of a busy cluster.
STATES = ("pending", "queued", "running", "running", "releasing")
BUSY_STATES = ("pending", "queued", "queued", "running", "running", "running", "running")


# -- knobs -----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class Mix:
    """How often things happen in a drawn world.

    Each tuple is sampled uniformly, so repeating a value makes it more likely.
    """

    capability: tuple[bool, ...] = (True, False)  # a queue has a capability
    deserved: tuple[bool, ...] = (True, False, False, False)  # written, not from weights
    guarantee: tuple[bool, ...] = (True, False, False)
    children: tuple[int, ...] = (0, 0, 1, 2, 3)  # leaves under a top queue (0: it is a leaf)
    reclaimable: tuple[bool, ...] = (True, True, True, False)
    overcommit: tuple[bool, ...] = (False, False, False, True)
    preemptible: tuple[bool, ...] = (True, True, True, True, True, False)
    busy: tuple[bool, ...] = (True, False)  # most jobs run, mostly in one "hog" queue
    max_tasks: tuple[int | None, ...] = (None, None, None, None, None, None, 1, 2, 3, 4)
    releasing: tuple[bool, ...] = (False,) * 8 + (True,)  # a running task is being released
    max_replicas: int = 4  # per role
    gpus: tuple[float, ...] = WHOLE_GPUS  # a role's GPUs per task
    role_sets: tuple[tuple[str, ...], ...] = ROLE_SETS
    #: minAvailable: "all" replicas, "any" number of them, or "one" (an elastic job)
    gang: tuple[str, ...] = ("all", "any")
    zero_gpu_caps: bool = False  # capabilities that name gpu name 0 of it
    fill: bool = False  # the hog queue first fills every GPU with elastic 1-GPU jobs


#: The default mix, and one where queues borrow and reclaim a lot (for the guarantee).
MIXED = Mix()
CONTENTION = Mix(
    capability=(True, False, False, False),
    deserved=(False,),
    guarantee=(True, False),
    children=(0, 0, 2),
    reclaimable=(True,),
    preemptible=(True,),
    busy=(True,),
    max_replicas=2,
    gpus=(0, 1, 1, 2),
    role_sets=(("worker",), ("worker",), ("master", "worker")),
    gang=("all", "any", "one", "one"),
    fill=True,
)


# -- nodes ------------------------------------------------------------------------------


@st.composite
def nodes(draw: st.DrawFn, mix: Mix = MIXED, *, max_nodes: int = 12) -> tuple[Node, ...]:
    """1..max_nodes nodes of a few shapes; some labelled, capped in tasks or cordoned."""
    count = draw(st.integers(1, max_nodes))
    found = []
    for i in range(count):
        cpu, memory, gpus = draw(st.sampled_from(NODE_SHAPES))
        found.append(
            Node(
                name=f"n{i:02d}",
                capacity=res(cpu, memory, gpus),
                labels={"zone": draw(st.sampled_from(["a", "b"]))},
                max_tasks=draw(st.sampled_from(mix.max_tasks)),
                schedulable=draw(st.sampled_from([True] * 9 + [False])),
            )
        )
    return tuple(found)


# -- queues -----------------------------------------------------------------------------


@st.composite
def _amounts(
    draw: st.DrawFn, upper: Mapping[str, float], *, zero_gpu: bool = False
) -> dict[str, float]:
    """A quota over gpu and/or cpu (canonical units), each entry within ``upper``'s.

    With ``zero_gpu``, a quota that names gpu names 0 of it (a queue for CPU work only).
    """
    names = draw(st.sampled_from([("gpu",), ("gpu",), ("cpu",), ("cpu", "gpu")]))
    amounts: dict[str, float] = {}
    for name in names:
        unit = 1000.0 if name == "cpu" else 1.0  # cpu quotas are whole cores
        top = int(upper.get(name, 0.0) / unit)
        zero = zero_gpu and name == "gpu"
        amounts[name] = 0.0 if zero else draw(st.integers(min(1, top), max(1, top))) * unit
    return amounts


def _maybe(
    draw: st.DrawFn, odds: Sequence[bool], values: st.SearchStrategy[dict[str, float]]
) -> dict[str, float] | None:
    return draw(values) if draw(st.sampled_from(odds)) else None


@st.composite
def _queue(draw: st.DrawFn, name: str, parent: str, mix: Mix, total: Mapping[str, float]) -> Queue:
    """A queue whose guarantee <= deserved <= capability <= the cluster's ``total``,
    where they name the same resource."""
    capability = _maybe(draw, mix.capability, _amounts(total, zero_gpu=mix.zero_gpu_caps))
    bound = {**total, **(capability or {})}
    deserved = _maybe(draw, mix.deserved, _amounts(bound))
    bound.update({k: min(v, bound[k]) for k, v in (deserved or {}).items()})
    guarantee = _maybe(draw, mix.guarantee, _amounts(bound))
    return Queue(
        name=name,
        parent=parent,
        weight=float(draw(st.integers(1, 4))),
        guarantee=Resources.of(guarantee or {}),
        deserved=None if deserved is None else Resources.of(deserved),
        capability=None if capability is None else Resources.of(capability),
        reclaimable=draw(st.sampled_from(mix.reclaimable)),
        overcommit=draw(st.sampled_from(mix.overcommit)),
        starvation_threshold=draw(st.one_of(st.none(), st.none(), st.sampled_from([0.0, 600.0]))),
    )


@st.composite
def queue_trees(draw: st.DrawFn, total: Mapping[str, float], mix: Mix = MIXED) -> tuple[Queue, ...]:
    """1..3 top queues, each a leaf or the parent of leaves; quotas in scale with ``total``."""
    queues: list[Queue] = []
    for i in range(draw(st.integers(1, 3))):
        top = f"q{i}"
        children = draw(st.sampled_from(mix.children))
        for name, parent in [(top, ROOT_QUEUE)] + [(f"{top}-{c}", top) for c in range(children)]:
            queues.append(draw(_queue(name, parent, mix, total)))
    return tuple(queues)


def leaves(queues: Iterable[Queue]) -> list[str]:
    """Names of the queues no other queue names as parent."""
    queues = list(queues)
    parents = {q.parent for q in queues}
    return [q.name for q in queues if q.name not in parents]


# -- jobs -------------------------------------------------------------------------------


@st.composite
def _role(draw: st.DrawFn, name: str, gpus: Sequence[float], replicas: int) -> Role:
    return Role(
        name=name,
        replicas=draw(st.integers(1, replicas)),
        resources=res(
            cpu=draw(st.sampled_from([0.5, 1, 2, 4, 8])),
            memory_gib=draw(st.sampled_from([1, 4, 16, 32])),
            gpu=draw(st.sampled_from(gpus)),
        ),
        node_selector=draw(st.sampled_from([{}] * 6 + [{"zone": "a"}])),
    )


class _Free:
    """What is left on each node while running tasks are laid out."""

    def __init__(self, cluster: Sequence[Node]) -> None:
        self.nodes = tuple(cluster)
        self.left = [dict(n.capacity.items()) for n in cluster]
        self.slots = [n.max_tasks if n.max_tasks is not None else 10**6 for n in cluster]

    def fits(self, i: int, request: Resources) -> bool:
        return self.slots[i] >= 1 and all(
            v <= self.left[i].get(k, 0.0) + 1e-9 for k, v in request.items()
        )

    def take(self, i: int, request: Resources) -> None:
        self.slots[i] -= 1
        for k, v in request.items():
            self.left[i][k] = self.left[i].get(k, 0.0) - v

    def copy(self) -> _Free:
        other = _Free(self.nodes)
        other.left = [dict(d) for d in self.left]
        other.slots = list(self.slots)
        return other


@st.composite
def _job(
    draw: st.DrawFn, index: int, queues: Sequence[str], free: _Free, mix: Mix, hog: str | None
) -> tuple[Job, _Free]:
    """One job; when it runs, its tasks are laid out on ``free`` (returned updated)."""
    roles = tuple(
        draw(_role(r, mix.gpus, mix.max_replicas)) for r in draw(st.sampled_from(mix.role_sets))
    )
    replicas = sum(r.replicas for r in roles)
    min_available = {
        "all": None,
        "any": draw(st.integers(1, replicas)),
        "one": 1,
    }[draw(st.sampled_from(mix.gang))]
    gang = replicas if min_available is None else min_available
    state = draw(st.sampled_from(STATES if hog is None else BUSY_STATES))
    tasks: tuple[Task, ...] = ()
    phase = JobPhase.PENDING if state == "pending" else JobPhase.QUEUED
    if state in ("running", "releasing"):
        laid = draw(_lay_out(roles, gang, free, mix, releasing=state == "releasing"))
        if laid is not None:
            tasks, free = laid
            phase = JobPhase.RUNNING
    if hog is not None:  # the hog runs most work; the others mostly wait
        others = [q for q in queues if q != hog] or [hog]
        queues = [hog, hog, hog, *queues] if phase is JobPhase.RUNNING else others
    job = Job(
        name=f"j{index:02d}",
        queue=draw(st.sampled_from(queues)),
        roles=roles,
        user=draw(st.sampled_from(["u0", "u1"])),
        priority=draw(st.integers(0, 3)),
        min_available=min_available,
        phase=phase,
        creation_time=float(draw(st.integers(0, 9000))),
        preemptible=draw(st.sampled_from(mix.preemptible)),
        walltime=draw(st.one_of(st.none(), st.sampled_from([600.0, 3600.0, 20000.0]))),
        runtime_estimate=draw(st.one_of(st.none(), st.sampled_from([300.0, 7200.0]))),
        starvation_threshold=draw(
            st.one_of(st.none(), st.none(), st.sampled_from([0.0, 300.0, 5000.0]))
        ),
        tasks=tasks,
    )
    return job, free


@st.composite
def _lay_out(
    draw: st.DrawFn, roles: Sequence[Role], gang: int, free: _Free, mix: Mix, *, releasing: bool
) -> tuple[tuple[Task, ...], _Free] | None:
    """Put at least ``gang`` tasks on nodes with room (first fit from a drawn node); None if full."""
    every = [Task(role=r.name, index=i) for r in roles for i in range(r.replicas)]
    request = {r.name: r.resources for r in roles}
    order = draw(st.permutations(range(len(every))))
    placed = set(order[: draw(st.integers(gang, len(every)))])
    free = free.copy()
    n = len(free.nodes)
    tasks = []
    for k, task in enumerate(every):
        if k not in placed:
            done = draw(st.sampled_from([TaskPhase.PENDING] * 9 + [TaskPhase.SUCCEEDED]))
            tasks.append(dataclasses.replace(task, phase=done))
            continue
        start = draw(st.integers(0, n - 1))
        spot = next(
            (i for i in (start + d for d in range(n)) if free.fits(i % n, request[task.role])),
            None,
        )
        if spot is None:
            return None
        free.take(spot % n, request[task.role])
        if releasing or draw(st.sampled_from(mix.releasing)):
            phase = TaskPhase.RELEASING
        else:
            phase = draw(st.sampled_from([TaskPhase.RUNNING] * 3 + [TaskPhase.BOUND]))
        tasks.append(
            dataclasses.replace(
                task,
                phase=phase,
                node=free.nodes[spot % n].name,
                start_time=NOW - draw(st.integers(0, 5000)),
            )
        )
    return tuple(tasks), free


@st.composite
def _fillers(draw: st.DrawFn, hog: str, free: _Free) -> list[Job]:
    """One running job of 1-GPU tasks per GPU node, in the hog queue: the cluster is lent out."""
    jobs = []
    for i, node in enumerate(free.nodes):
        request = res(cpu=1, memory_gib=1, gpu=1)
        count = 0
        while count < int(node.capacity.get("gpu")) and free.fits(i, request):
            free.take(i, request)
            count += 1
        if not count:
            continue
        tasks = tuple(
            Task(role="worker", index=k, phase=TaskPhase.RUNNING, node=node.name, start_time=NOW)
            for k in range(count)
        )
        jobs.append(
            Job(
                name=f"h{i:02d}",
                queue=hog,
                roles=(Role(name="worker", replicas=count, resources=request),),
                min_available=draw(st.integers(1, count)),
                priority=draw(st.integers(0, 3)),
                phase=JobPhase.RUNNING,
                tasks=tasks,
            )
        )
    return jobs


# -- worlds -----------------------------------------------------------------------------


@st.composite
def worlds(
    draw: st.DrawFn,
    *,
    configs: Sequence[str] = tuple(CONFIGS),
    mix: Mix = MIXED,
    max_nodes: int = 12,
    max_jobs: int = 15,
) -> World:
    """A cluster, a queue tree, jobs (some running, some releasing) and a config name."""
    cluster = draw(nodes(mix, max_nodes=max_nodes))
    total = {"cpu": sum(n.capacity.get("cpu") for n in cluster)}
    total["gpu"] = sum(n.capacity.get("gpu") for n in cluster)
    queues = draw(queue_trees(total, mix))
    targets = leaves(queues)
    hog = draw(st.sampled_from(targets)) if draw(st.sampled_from(mix.busy)) else None
    free = _Free(cluster)
    jobs = draw(_fillers(hog, free)) if mix.fill and hog is not None else []
    for i in range(draw(st.integers(1, max_jobs))):
        job, free = draw(_job(i, targets, free, mix, hog))
        jobs.append(job)
    return World(
        nodes=cluster,
        queues=queues,
        jobs=tuple(jobs),
        config_name=draw(st.sampled_from(list(configs))),
    )
