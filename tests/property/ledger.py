"""Independent accounting of a cycle: input jobs + Decisions -> loads per node and queue.

Nothing here reads the engine's arrays or counters; it recomputes from the domain
values the test fed in and the Decisions the engine returned, so a bookkeeping bug in
the engine cannot hide itself.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from phalanx.domain.job import Job, Role, Task, TaskPhase
from phalanx.domain.queue import ROOT_QUEUE
from phalanx.engine import Decisions

from .world import World

#: Absolute slack for float sums (amounts are whole cpu millicores, bytes and small GPUs).
TOLERANCE = 1e-6

Amounts = dict[str, float]


@dataclass(frozen=True, slots=True)
class TaskRow:
    """One input task with its job and role."""

    job: Job
    role: Role
    task: Task

    @property
    def request(self) -> Mapping[str, float]:
        return self.role.resources


def add(into: Amounts, amounts: Mapping[str, float], sign: float = 1.0) -> None:
    for name, value in amounts.items():
        into[name] = into.get(name, 0.0) + sign * value


def excess(load: Mapping[str, float], limit: Mapping[str, float]) -> dict[str, float]:
    """Entries of ``load`` above ``limit`` (names missing from ``limit`` are 0 there)."""
    return {
        name: value - limit.get(name, 0.0)
        for name, value in load.items()
        if value > limit.get(name, 0.0) + TOLERANCE
    }


@dataclass(frozen=True, slots=True)
class NodeLoad:
    """What a node holds now (with binds), and once releasing and evicted tasks are gone
    (with binds and pipelined tasks)."""

    now: Amounts
    tasks_now: int
    later: Amounts
    tasks_later: int


class Ledger:
    """The input state and what Decisions do to it, task by task."""

    def __init__(self, world: World, decisions: Decisions) -> None:
        self.world = world
        self.decisions = decisions
        self.tasks: dict[str, TaskRow] = {}
        for job in world.jobs:
            roles = {r.name: r for r in job.roles}
            for task in job.all_tasks():
                self.tasks[task.name(job.name)] = TaskRow(job, roles[task.role], task)
        self.binds = {b.task: b.node for b in decisions.binds}
        self.pipelined = {p.task: p.node for p in decisions.pipelined}
        self.evicted = {e.task: e for e in decisions.evictions}
        self._check_well_formed()

    def _check_well_formed(self) -> None:
        """Decisions name real tasks, each at most once, in a phase that allows the decision."""
        d = self.decisions
        for kind, names in (
            ("bind", [b.task for b in d.binds]),
            ("pipeline", [p.task for p in d.pipelined]),
            ("evict", [e.task for e in d.evictions]),
        ):
            twice = [n for n, c in Counter(names).items() if c > 1]
            assert not twice, f"{kind} decided twice for {twice}"
            unknown = [n for n in names if n not in self.tasks]
            assert not unknown, f"{kind} of unknown tasks {unknown}"
        both = set(self.binds) & set(self.pipelined)
        assert not both, f"tasks both bound and pipelined: {sorted(both)}"
        for name in [*self.binds, *self.pipelined]:
            phase = self.tasks[name].task.phase
            assert phase is TaskPhase.PENDING, f"{name} is {phase}, yet placed"
        for name, evict in self.evicted.items():
            task = self.tasks[name].task
            assert task.phase in (TaskPhase.BOUND, TaskPhase.RUNNING), (
                f"{name} evicted in {task.phase}"
            )
            assert task.node == evict.node, f"{name} evicted from {evict.node}, runs on {task.node}"
        for bind in d.binds:
            row = self.tasks[bind.task]
            assert (bind.job, bind.role, bind.index) == (
                row.job.name,
                row.task.role,
                row.task.index,
            )

    def rows(self, *phases: TaskPhase) -> Iterable[tuple[str, TaskRow]]:
        return ((n, r) for n, r in self.tasks.items() if r.task.phase in phases)

    # -- nodes ------------------------------------------------------------------------

    def node_loads(self) -> dict[str, NodeLoad]:
        """Per node. Now: every input task holding the node (bound, running, releasing) plus
        binds. Later: input bound/running tasks not evicted, plus binds and pipelined tasks.
        """
        now: dict[str, Amounts] = defaultdict(dict)
        later: dict[str, Amounts] = defaultdict(dict)
        now_n: Counter[str] = Counter()
        later_n: Counter[str] = Counter()
        for name, row in self.rows(TaskPhase.BOUND, TaskPhase.RUNNING, TaskPhase.RELEASING):
            assert row.task.node is not None
            add(now[row.task.node], row.request)
            now_n[row.task.node] += 1
            if row.task.phase is not TaskPhase.RELEASING and name not in self.evicted:
                add(later[row.task.node], row.request)
                later_n[row.task.node] += 1
        for name, node in self.binds.items():
            add(now[node], self.tasks[name].request)
            add(later[node], self.tasks[name].request)
            now_n[node] += 1
            later_n[node] += 1
        for name, node in self.pipelined.items():
            add(later[node], self.tasks[name].request)
            later_n[node] += 1
        return {
            n.name: NodeLoad(now[n.name], now_n[n.name], later[n.name], later_n[n.name])
            for n in self.world.nodes
        }

    # -- jobs -------------------------------------------------------------------------

    def job_counts(self, job: Job) -> tuple[int, int, int, int, int]:
        """(ready before, running before, binds, evictions, pipelined) of ``job``.

        Ready counts bound, running and succeeded tasks, as a gang does.
        """
        ready = running = binds = evictions = pipelined = 0
        for task in job.all_tasks():
            name = task.name(job.name)
            ready += task.phase in (TaskPhase.BOUND, TaskPhase.RUNNING, TaskPhase.SUCCEEDED)
            running += task.phase in (TaskPhase.BOUND, TaskPhase.RUNNING)
            binds += name in self.binds
            evictions += name in self.evicted
            pipelined += name in self.pipelined
        return ready, running, binds, evictions, pipelined

    # -- queues -----------------------------------------------------------------------

    def subtree(self, queue: str) -> set[str]:
        """``queue`` and every queue below it."""
        below = {queue}
        grew = True
        while grew:
            more = {q.name for q in self.world.queues if q.parent in below} - below
            below |= more
            grew = bool(more)
        return below

    def ancestors(self, queue: str) -> list[str]:
        """``queue`` and its ancestors up to (not including) the root."""
        parent = {q.name: q.parent for q in self.world.queues}
        chain = []
        while queue != ROOT_QUEUE:
            chain.append(queue)
            queue = parent[queue]
        return chain

    def queue_usage(self, *, evictions: str = "all") -> dict[str, tuple[Amounts, Amounts]]:
        """Per queue (roll-up of its subtree): (allocated before, allocated after).

        Allocated = bound + running (releasing tasks are already given back). After =
        before - evictions + binds + pipelined. ``evictions``: "all", or "reclaim-from-outside"
        (only reclaim evictions made for a job outside the queue's subtree).
        """
        before: dict[str, Amounts] = {q.name: {} for q in self.world.queues}
        after: dict[str, Amounts] = {q.name: {} for q in self.world.queues}
        jobs = {j.name: j for j in self.world.jobs}
        for name, row in self.tasks.items():
            chain = self.ancestors(row.job.queue)
            charged = row.task.phase in (TaskPhase.BOUND, TaskPhase.RUNNING)
            placed = name in self.binds or name in self.pipelined
            evict = self.evicted.get(name)
            for queue in chain:
                if charged:
                    add(before[queue], row.request)
                    add(after[queue], row.request)
                if placed:
                    add(after[queue], row.request)
                if evict is None:
                    continue
                outside = jobs[evict.by].queue not in self.subtree(queue)
                if evictions == "all" or (evict.action == "reclaim" and outside):
                    add(after[queue], row.request, -1.0)
        return {q: (before[q], after[q]) for q in before}
