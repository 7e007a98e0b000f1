"""datalocality: tasks go where their datasets are cached (as Fluid's dataset affinity).

A role that reads datasets (``Role.datasets``: each a name pinned to a listing digest)
wants nodes whose cache holds them whole (``Node.datasets``: listing digests); on any
other node the datasets are copied in before the task starts. ``Role.data_locality``
says how much the role wants them:

- ``preferred`` (the default) and ``required`` alike: a node score, the share of the
  role's datasets the node holds, 0..100 (every dataset counts alike: the engine knows
  no sizes), times the ``weight`` arg. The default weight, 10 (``colocation``'s),
  makes a node holding them all worth 1000, above what the placement scorers of
  ``phalanx-default`` give together (fgd 0..100, balanced x 0.3, reclaimable x 2: 330
  at most), so a warm node wins over a better-packed one, and holding one of two
  datasets is worth half; a PreferNoSchedule taint (``predicates``: x 1000) still
  outweighs it, and no score overrides a filter (room, selectors, taints, ``required``).
- Gangs: a cold node copies a dataset once and every task there reads that copy. So a
  node where another task of the same job is placed (allocated or pipelined in this
  session, or on the node when the session opened, not leaving it; followed through
  ``on_allocate`` and ``on_deallocate``) counts as holding the datasets that task
  reads: the second task of a gang scores the node the first one fills as warm, and a
  gang packs onto the nodes it fills instead of paying a cold fill on every node.
- ``required``: only nodes holding every dataset of the role take its tasks
  (``predicate``; a node a gang will fill does not count: no task starts on a cold
  node). While no schedulable node holds them, the gang is not tried and no eviction
  is made for it (``confinement``: an empty offer); it waits with a reason that names
  the datasets and the fix (``phalanx dataset warm NAME --nodes NODE``, or
  ``dataLocality: preferred``). A job another plugin confines first (the first answer
  of the point wins: ``compact``, ``network-topology``, ``hived`` in earlier tiers or
  earlier in the tier) keeps that plugin's offer; the predicate still holds it to the
  warm nodes, and its reason is placement's (nodes excluded by this plugin).

A digest not yet pinned (None) is held by no node and filled by no gang: cold
everywhere. ``Node.datasets`` changes between sessions (a fill landed, an entry was
evicted: the snapshot replaces its nodes): which nodes hold which digest is indexed
once per set of nodes, and which jobs read datasets once per job the snapshot tracks
(slots of the kept state that follow the snapshot). A session in which no waiting job
reads datasets skips every point (one without a ``required`` role skips the predicate
and the confinement): it decides exactly as without the plugin and pays nothing per
node. A task without datasets scores 0 on every node, so its placement is the same with
the plugin or without it (its scores are not kept per task class while the plugin
scores: a score depends on the job, through the gang's credit).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from functools import partial
from typing import Final

import numpy as np
from numpy.typing import NDArray

from phalanx.domain.job import DataLocality, Role
from phalanx.domain.node import Node
from phalanx.domain.resources import spoken_list
from phalanx.engine.decisions import Reason, ReasonCode
from phalanx.engine.framework.confinement import Confinement, ConfinementOffer, ConfinementQuery
from phalanx.engine.framework.kept import Lifetime
from phalanx.engine.framework.plugin import Plugin, ScorePromises
from phalanx.engine.framework.session import Session
from phalanx.engine.framework.wording import UNSCHEDULABLE
from phalanx.engine.snapshot import ON_NODE, JobInfo, RoleInfo, Snapshot, TaskInfo, TaskStatus

#: A node holding every dataset of a role scores 100 x this (see the module docstring).
DEFAULT_WEIGHT: Final = 10.0
#: Nodes named in a reason, at most.
_NAMED: Final = 3


def _reads(job: JobInfo) -> bool:
    return any(role.spec.datasets for role in job.roles)


def _required(role: RoleInfo) -> bool:
    return role.spec.data_locality is DataLocality.REQUIRED and bool(role.spec.datasets)


def _digests(role: RoleInfo) -> tuple[str, ...]:
    """The pinned digests a task of ``role`` reads (what its node will fill)."""
    return tuple(digest for _, digest in role.spec.datasets if digest is not None)


class _Readers:
    """The jobs a snapshot tracks whose roles read datasets, by name; follows the
    snapshot as it tracks and drops jobs (``Snapshot.watch_jobs``)."""

    def __init__(self, snapshot: Snapshot) -> None:
        self.jobs = {name: job for name, job in snapshot.jobs.items() if _reads(job)}
        snapshot.watch_jobs(self)

    def joined(self, snapshot: Snapshot, job: JobInfo) -> None:
        if _reads(job):
            self.jobs[job.name] = job

    def left(self, job: JobInfo) -> None:
        if self.jobs.get(job.name) is job:
            del self.jobs[job.name]


class _Holdings:
    """Per listing digest, the nodes whose cache holds it; indexed again when the
    snapshot's nodes are replaced (what the snapshot does when a node's cache changes)."""

    def __init__(self, snapshot: Snapshot) -> None:
        self._snapshot = snapshot
        self._nodes: tuple[Node, ...] | None = None
        self._held: dict[str, NDArray[np.bool_]] = {}

    def current(self) -> dict[str, NDArray[np.bool_]]:
        """Digest -> node mask (read-only), as the snapshot's nodes say now."""
        nodes = self._snapshot.nodes
        if nodes is not self._nodes:  # the old tuple is kept alive: its id is never reused
            held: dict[str, NDArray[np.bool_]] = {}
            for i, node in enumerate(nodes):
                for digest in node.datasets:
                    if digest not in held:
                        held[digest] = np.zeros(len(nodes), dtype=np.bool_)
                    held[digest][i] = True
            for mask in held.values():
                mask.flags.writeable = False
            self._held, self._nodes = held, nodes
        return self._held


@dataclass(frozen=True, slots=True)
class _Wanted:
    """What one role reads, against one session's nodes."""

    names: tuple[str, ...]  # the datasets' names, each once, in the role's order
    digests: tuple[str | None, ...]  # one per dataset entry of the role
    held: NDArray[np.float64]  # per node: how many of ``digests`` its cache holds
    whole: NDArray[np.bool_]  # per node: holds every one


def _wanted(role: Role, holdings: dict[str, NDArray[np.bool_]], size: int) -> _Wanted:
    digests = tuple(digest for _, digest in role.datasets)
    held = np.zeros(size)
    for digest in digests:
        mask = None if digest is None else holdings.get(digest)
        if mask is not None:
            held += mask
    whole = held >= len(digests)
    held.flags.writeable = whole.flags.writeable = False
    names = tuple(dict.fromkeys(name for name, _ in role.datasets))
    return _Wanted(names=names, digests=digests, held=held, whole=whole)


def _percent(held: NDArray[np.float64], total: int) -> NDArray[np.float64]:
    """0..100: the share of ``total`` datasets held (one expression for scores and their
    look-ahead, so both give the very same floats)."""
    result: NDArray[np.float64] = held * 100.0 / total
    return result


class _Open:
    """One session: the waiting jobs that read datasets, what each role reads, and what
    the tasks of those jobs on nodes will have filled there."""

    def __init__(self, session: Session) -> None:
        snapshot = self.snapshot = session.snapshot
        readers = session.kept.get(_Readers, Lifetime.FOLLOWS).jobs
        waiting = snapshot.waiting
        #: the waiting jobs that read datasets: the only ones this plugin follows
        followed = [job for name, job in readers.items() if waiting.get(name) is job]
        self.jobs = set(followed)
        #: per job with a required role: what its offers depend on (its confinement's key)
        self.required: dict[JobInfo, tuple[object, ...]] = {}
        self.rules: dict[tuple[object, ...], Confinement] = {}
        self.holdings: dict[str, NDArray[np.bool_]] = {}
        self._wanted: dict[tuple[str, str], _Wanted] = {}
        #: job -> node -> digests its tasks there read (counted per task)
        self.filling: dict[JobInfo, dict[int, Counter[str]]] = {}
        self._placed: dict[int, int] = {}  # id(task) -> the node it is counted on
        self.everywhere = np.ones(len(snapshot.nodes) if followed else 0, dtype=np.bool_)
        self.everywhere.flags.writeable = False
        if not followed:
            return
        self.holdings = session.kept.get(_Holdings, Lifetime.FOLLOWS).current()
        for job in followed:
            key = tuple((r.index, r.spec.datasets) for r in job.roles if _required(r))
            if key:
                self.required[job] = key
            for task in job.tasks:
                if task.status in ON_NODE and task.status is not TaskStatus.RELEASING:
                    self.fill(task)

    def wanted(self, role: RoleInfo) -> _Wanted:
        """What ``role`` reads and which nodes hold it (built once per session)."""
        found = self._wanted.get(role.key)
        if found is None:
            found = _wanted(role.spec, self.holdings, len(self.snapshot.nodes))
            self._wanted[role.key] = found
        return found

    def fill(self, task: TaskInfo) -> None:
        """Count ``task`` (of a followed job, on its node) as filling its datasets there."""
        if task.job not in self.jobs or task.node < 0:
            return
        digests = _digests(task.role)
        if digests:
            self._placed[id(task)] = task.node
            nodes = self.filling.setdefault(task.job, {})
            nodes.setdefault(task.node, Counter()).update(digests)

    def unfill(self, task: TaskInfo) -> None:
        """Undo ``fill`` for ``task`` (it left its node, or its allocation was undone)."""
        node = self._placed.pop(id(task), None)
        if node is None:
            return
        nodes = self.filling[task.job]
        counter = nodes[node]
        counter.subtract(_digests(task.role))
        if not +counter:
            del nodes[node]
            if not nodes:
                del self.filling[task.job]

    def scores(self, task: TaskInfo, nodes: NDArray[np.intp]) -> NDArray[np.float64]:
        """The share of the task's datasets each of ``nodes`` holds or its job fills."""
        wanted = self.wanted(task.role)
        held = wanted.held[nodes]  # a copy: fancy indexing
        filled = self.filling.get(task.job)
        if filled:
            marks = np.fromiter(filled, dtype=np.intp, count=len(filled))
            for at in np.flatnonzero(np.isin(nodes, marks)):
                node = int(nodes[at])
                cached = self.snapshot.nodes[node].datasets
                held[at] = sum(
                    1
                    for digest in wanted.digests
                    if digest is not None and (filled[node][digest] > 0 or digest in cached)
                )
        return _percent(held, len(wanted.digests))


class DataLocalityPlugin(Plugin[_Open]):
    """Nodes whose cache holds a role's datasets first; with ``required``, only those."""

    name = "datalocality"
    accepted_args = frozenset({"weight"})
    default_weight = DEFAULT_WEIGHT
    # a node's score depends on that node alone and only grows as the job's tasks fill it
    promises = ScorePromises(node_local=True, fills=True)

    def open(self, session: Session) -> _Open:
        return _Open(session)

    def skipped(self, state: _Open) -> tuple[str, ...]:
        """Every point without a waiting job that reads datasets; the predicate and the
        confinement without one that requires them."""
        if not state.jobs:
            return self.provides
        return () if state.required else ("predicate", "confinement")

    def node_score(
        self, state: _Open, task: TaskInfo, nodes: NDArray[np.intp]
    ) -> NDArray[np.float64]:
        if not task.role.spec.datasets:
            return np.zeros(len(nodes))
        return state.scores(task, nodes)

    def score_ahead(
        self, state: _Open, task: TaskInfo, node: int, count: int
    ) -> NDArray[np.float64]:
        """Once one more task of the class is on ``node``, the job fills every pinned
        dataset of the role there: the node counts as holding them all."""
        entries = task.role.spec.datasets
        if not entries:
            return np.zeros(count)
        return _percent(np.full(count, float(len(_digests(task.role)))), len(entries))

    def predicate(self, state: _Open, role: RoleInfo) -> NDArray[np.bool_]:
        return state.wanted(role).whole if _required(role) else state.everywhere

    def confinement(self, state: _Open, job: JobInfo) -> Confinement | None:
        key = state.required.get(job)
        if key is None:
            return None
        rule = state.rules.get(key)
        if rule is None:
            rule = state.rules[key] = Confinement(
                key=(self.name, key),
                offer=partial(_offer, state),
                evict_within=partial(_evict_within, state),
            )
        return rule

    def on_allocate(self, state: _Open, task: TaskInfo) -> None:
        state.fill(task)

    def on_deallocate(self, state: _Open, task: TaskInfo) -> None:
        state.unfill(task)


def _offer(state: _Open, query: ConfinementQuery) -> ConfinementOffer:
    """Anywhere (the predicate keeps each role to its warm nodes), unless no schedulable
    node holds what a required role of the tasks reads: nowhere, with the reason."""
    schedulable = state.snapshot.schedulable
    seen: set[tuple[str, str]] = set()
    for task in query.tasks:
        role = task.role
        if role.key in seen or not _required(role):
            continue
        seen.add(role.key)
        wanted = state.wanted(role)
        if not (wanted.whole & schedulable).any():
            return ConfinementOffer(masks=(), reason=_cold(state, role, wanted))
    return ConfinementOffer(masks=(state.everywhere,))


def _evict_within(state: _Open, query: ConfinementQuery) -> NDArray[np.bool_] | None:
    """Evictions make room for a task of a required role only where its datasets are."""
    if not query.tasks or not _required(query.tasks[0].role):
        return None
    return state.wanted(query.tasks[0].role).whole


def _cold(state: _Open, role: RoleInfo, wanted: _Wanted) -> Reason:
    """Why a task of the required ``role`` waits: no schedulable node holds its datasets.
    The fix names the datasets to warm and, where a schedulable node holds some of them,
    that node (the first of those holding the most)."""
    snapshot = state.snapshot
    several = len(wanted.names) > 1
    it = "all of them" if several else "it"
    said = f"0/{len(snapshot.nodes)} nodes hold {it}"
    if several:
        said += f" ({', '.join(_held_by(state, name, digest) for name, digest in _pairs(role))})"
    fixes = []
    off = [snapshot.nodes[i].name for i in np.flatnonzero(wanted.whole & ~snapshot.schedulable)]
    if off:
        one = len(off) == 1
        said = (
            f"0/{len(snapshot.nodes)} schedulable nodes hold {it}; {_listed(off)} "
            f"{'does' if one else 'do'}, but {'is' if one else 'are'} {UNSCHEDULABLE}"
        )
        fixes.append(f"uncordon {_listed(off)}")
    best = _best_node(snapshot, wanted)
    node = "NODE" if best is None else snapshot.nodes[best].name
    cached = frozenset[str]() if best is None else snapshot.nodes[best].datasets
    missing = dict.fromkeys(name for name, digest in _pairs(role) if digest not in cached)
    fixes.append(" and ".join(f"phalanx dataset warm {name} --nodes {node}" for name in missing))
    fixes.append(f"set dataLocality: preferred on role {role.name}")
    datasets = f"dataset{'s' if several else ''} {spoken_list(wanted.names)}"
    return Reason(
        code=ReasonCode.NO_MATCHING_NODE,
        message=f"task {role.name} ({role.resources.spoken()}) waits for a node whose cache "
        f"holds {datasets} (dataLocality: required): {said}; fix: {', or '.join(fixes)}",
        node=None if best is None else node,
    )


def _listed(names: list[str]) -> str:
    """``a``, ``a and b``, ``a, b and c``, ``a, b, c and 2 more``."""
    if len(names) <= _NAMED:
        return spoken_list(names)
    return f"{', '.join(names[:_NAMED])} and {len(names) - _NAMED} more"


def _pairs(role: RoleInfo) -> tuple[tuple[str, str | None], ...]:
    """The role's (name, digest) entries, each once, in order."""
    return tuple(dict.fromkeys(role.spec.datasets))


def _held_by(state: _Open, name: str, digest: str | None) -> str:
    """``imagenet on 2 nodes``, ``coco on none``; an unpinned one says so."""
    if digest is None:
        return f"{name} not pinned to a listing yet"
    mask = state.holdings.get(digest)
    count = 0 if mask is None else int(np.count_nonzero(mask))
    return f"{name} on {count} node{'' if count == 1 else 's'}" if count else f"{name} on none"


def _best_node(snapshot: Snapshot, wanted: _Wanted) -> int | None:
    """The first schedulable node holding the most of the role's datasets; None when no
    schedulable node holds any."""
    held = np.where(snapshot.schedulable, wanted.held, 0.0)
    if not held.size or held.max() <= 0:
        return None
    return int(np.argmax(held))
