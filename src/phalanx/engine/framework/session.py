"""One scheduling session: a snapshot, the plugins' callbacks and the result so far."""

from __future__ import annotations

import operator
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from phalanx.domain.errors import EngineInvariantError, PluginError
from phalanx.domain.job import JobPhase
from phalanx.domain.node import GPU_MODEL_LABEL
from phalanx.engine.decisions import Reason, ReasonCode, Resize
from phalanx.engine.framework.config import SchedulerConfig
from phalanx.engine.framework.extension import Points
from phalanx.engine.framework.kept import KeptState
from phalanx.engine.framework.scores import ClassScores
from phalanx.engine.framework.shares import QueueShares
from phalanx.engine.framework.statement import Operation, Statement
from phalanx.engine.snapshot import (
    JobInfo,
    QueueInfo,
    RoleInfo,
    Snapshot,
    TaskInfo,
    TaskStatus,
    Vector,
)

_BY_ARRIVAL = operator.attrgetter("creation_time", "name")
#: A task's sort key in victim order: the plugins' key, minus its start time, its name.
VictimRank = tuple[tuple[Any, ...], float, str]


@dataclass(slots=True)
class Hold:
    """Resources withheld for a starving job until ``start_time`` (set by backfill)."""

    job: str
    start_time: float
    nodes: tuple[int, ...]
    amounts: Vector  # N x R: what is withheld from others right now


class Session:
    """The state of one cycle. Actions read it and change it through Statements."""

    def __init__(
        self,
        snapshot: Snapshot,
        config: SchedulerConfig,
        *,
        now: float,
        kept: KeptState,
        class_scores: ClassScores,
    ) -> None:
        self.snapshot = snapshot
        self.config = config
        self.now = now
        #: what earlier cycles of this snapshot kept, and this one keeps for later ones
        self.kept = kept
        self.points = Points()
        #: node scores per task class, kept through the session (placement reads them) and
        #: from earlier sessions of this config (``kept``)
        self.class_scores = class_scores
        if self.class_scores.snapshot is not snapshot:
            raise EngineInvariantError("class scores kept for another snapshot")
        self.class_scores.open(self.points.node_score)
        self.admitted: list[str] = []
        self.log: list[tuple[Operation, bool]] = []  # committed/kept operations, dispatch flag
        self.reasons: dict[str, Reason] = {}
        #: what a plugin adds to the reason of a job left waiting (``note``)
        self.notes: dict[str, str] = {}
        self.holds: list[Hold] = []
        self.explanations: list[str] = []
        self.resizes: list[Resize] = []  # elastic roles' new sizes (the elastic action)
        self._failures: dict[object, tuple[int, Reason]] = {}
        self._eviction_failures: set[object] = set()
        self._described: dict[bytes, str] = {}  # engine-unit rows as text (describe)
        self._evictions = 0  # bumped by every eviction: freed room invalidates known failures
        self._static_masks: dict[tuple[str, str], tuple[np.ndarray, dict[str, int]]] = {}
        #: job name -> (the state it was computed at, its job-order key): see ``job_key``
        self._job_keys: dict[str, tuple[tuple[int, int], tuple[object, ...]]] = {}
        #: id(task) -> (its job's version, its victim-order sort key)
        self._victim_keys: dict[int, tuple[int, VictimRank]] = {}
        self.has_enqueue = any(a.name == "enqueue" for a in config.actions)
        #: the queues' shares, once a queue-share plugin published them (``publish_shares``)
        self.shares: QueueShares | None = None
        #: jobs with a pending task when the session opened, oldest first: all it must consider
        self.waiting = sorted(snapshot.waiting.values(), key=_BY_ARRIVAL)
        for queue in snapshot.queues.values():
            queue.inqueue[:] = 0.0  # admission marks belong to one session

    def publish_shares(self, shares: QueueShares) -> None:
        """Make ``shares`` this session's queue shares; a second plugin's are refused
        (``PluginError``): two plugins cannot both say what a queue deserves."""
        if self.shares is not None and self.shares.plugin != shares.plugin:
            raise PluginError(
                f"plugins {self.shares.plugin!r} and {shares.plugin!r} both give queues their "
                "shares; fix: configure one queue-share plugin (capacity or proportion)"
            )
        self.shares = shares

    # -- statements -------------------------------------------------------------------

    def statement(self) -> Statement:
        """A new statement; use it as a context manager for all-or-nothing."""
        return Statement(self)

    def record(self, operations: Sequence[Operation], *, dispatch: bool = True) -> None:
        """Called by Statement.commit / keep."""
        self.log.extend((op, dispatch) for op in operations)

    def apply_allocate(self, task: TaskInfo, node: int, status: TaskStatus) -> None:
        """Charge ``task`` to ``node`` (allocated or pipelined) and tell the plugins.

        An allocated task that needs GPUs gets the cards the ``gpu_select`` point picks
        (none answering: the lowest-index cards that serve it); a pipelined one gets its
        cards when it is allocated.
        """
        gpus: tuple[int, ...] | None = None
        if (
            status is TaskStatus.ALLOCATED
            and task.role.cards is not None
            and self.points.gpu_select
        ):
            gpus = self.points.gpu_select(task, node)
            if gpus is not None and not self.snapshot.cards.serves(task.role.cards, node, gpus):
                raise EngineInvariantError(
                    f"gpu_select chose cards {gpus} of {self.snapshot.nodes[node].name} for "
                    f"{task.name}, which cannot serve {task.role.cards.describe()}"
                )
        self.snapshot.move(task, status, node, gpus or ())
        self.points.on_allocate(task)

    def undo_allocate(self, task: TaskInfo) -> None:
        """Exactly reverse apply_allocate."""
        self.snapshot.move(task, TaskStatus.PENDING)
        self.points.on_deallocate(task)

    def apply_evict(self, task: TaskInfo) -> None:
        """Mark ``task`` releasing: its node keeps it until it stops; its queue does not."""
        self._evictions += 1
        self.snapshot.move(task, TaskStatus.RELEASING)
        self.points.on_deallocate(task)

    def undo_evict(self, task: TaskInfo, previous: TaskStatus) -> None:
        """Exactly reverse apply_evict."""
        self.snapshot.move(task, previous)
        self.points.on_allocate(task)

    def known_failure(self, shape: object | None) -> Reason | None:
        """The reason a gang of this shape failed earlier in this session, if nothing was freed since.

        Sound because within a session placements only consume room; only an eviction
        frees any (a discarded statement restores the state it started from).
        """
        if shape is None:
            return None
        known = self._failures.get(shape)
        return known[1] if known is not None and known[0] == self._evictions else None

    def eviction_failed(self, shape: object) -> bool:
        """Whether making room by eviction failed earlier in this session for this shape.

        ``shape`` names the action, the gang's shape (``gang_shape``), its priority and
        what the shipped plugins judge a preemptor by: its job-order key, or the victims
        they accept for each of its tasks (``eviction.gangs``). Sound because within
        a session the victim pool and free room only shrink (evictions pipeline their
        preemptors onto what they free), and queues only fill.
        """
        return shape in self._eviction_failures

    def remember_eviction_failure(self, shape: object) -> None:
        """Record that no eviction can make room for a gang of this shape now."""
        self._eviction_failures.add(shape)

    def remember_failure(self, shape: object | None, reason: Reason) -> None:
        """Record that a gang of this shape cannot be placed now."""
        if shape is not None:
            self._failures[shape] = (self._evictions, reason)

    # -- questions actions ask -------------------------------------------------------------

    def job_ready(self, job: JobInfo) -> bool:
        """Every plugin agrees the job's allocations may start."""
        return self.points.job_ready(job)

    def job_key(self, job: JobInfo) -> tuple[object, ...]:
        """``job``'s job-order key (``points.job_order.key``), kept until a task moves or
        enqueue admits a job.

        Sound because what the plugins order jobs by changes only so: the session's time
        is fixed, and each plugin's view of jobs, queues and users follows the tasks'
        moves (its ``on_allocate``/``on_deallocate``) and the admissions. What a deep
        backlog needs: its jobs are put in line by allocate, reclaim, preempt and
        backfill in turn, with nothing moving in between.
        """
        state = (self.snapshot.changes, len(self.admitted))
        found = self._job_keys.get(job.name)
        if found is not None and found[0] == state:
            return found[1]
        key = self.points.job_order.key(job)
        self._job_keys[job.name] = (state, key)
        return key

    def user_rank(self, user: tuple[str, str], best_job: JobInfo) -> tuple[object, ...]:
        """A user's place in its queue's line, given its first job.

        Job order from plugins in tiers before the user-order plugin's tier decides first
        (so priority outranks fairness between users), then user order.
        """
        points = self.points
        tier = points.user_order.first_tier
        key = self.job_key(best_job)
        before = key if tier is None else key[: points.job_order.length_before(tier)]
        return (before, points.user_order.key(user), user[1])

    def ranked(self, jobs: Iterable[JobInfo]) -> list[JobInfo]:
        """``jobs`` in line order: queue order, then user rank, then job order.

        For one-off sorts (allocate keeps the three levels live as shares move); each
        queue's and user's part is computed once.
        """
        jobs = list(jobs)
        if len(jobs) < 2:
            return jobs
        points = self.points
        queue_keys: dict[str, tuple[object, ...]] = {}
        user_keys: dict[tuple[str, str], object] = {}
        tier = points.user_order.first_tier
        prefix = len(points.job_order) if tier is None else points.job_order.length_before(tier)

        def rank(job: JobInfo) -> tuple[object, ...]:
            queue = job.queue.name
            if queue not in queue_keys:
                queue_keys[queue] = points.queue_order.key(job.queue)
            user = (queue, job.user)
            if user not in user_keys:
                user_keys[user] = points.user_order.key(user)
            job_key = self.job_key(job)
            return (
                queue_keys[queue],
                queue,
                job_key[:prefix],
                user_keys[user],
                job.user,
                job_key,
                job.creation_time,
                job.name,
            )

        return sorted(jobs, key=rank)

    def job_pipelined(self, job: JobInfo) -> bool:
        """Every plugin agrees the job may keep its allocations and pipelined tasks."""
        return self.points.job_pipelined(job)

    def is_admitted(self, job: JobInfo) -> bool:
        """Whether allocate may consider the job (without an enqueue action, every job is)."""
        if job.phase is not JobPhase.PENDING or not self.has_enqueue:
            return True
        return job.name in self.admitted

    def candidate_jobs(self) -> list[JobInfo]:
        """Admitted, valid jobs with pending tasks, oldest first (name breaks ties); an
        invalid one is given its reason and left out."""
        found = []
        for job in self.waiting:  # a backlog of unadmitted jobs is skipped cheaply
            if not self.is_admitted(job) or job.pending_count == 0:
                continue
            invalid = self.points.job_valid(job)
            if invalid is not None:
                self.record_reason(job, Reason(code=ReasonCode.INVALID, message=invalid))
                continue
            found.append(job)
        return sorted(found, key=lambda j: (j.creation_time, j.name))

    def static_mask(self, role: RoleInfo) -> tuple[np.ndarray, dict[str, int]]:
        """The predicate mask of a role (static within a session), cached per role: the
        plugins' predicates, the role's ``gpuTypes`` (nodes whose ``phalanx.io/gpu-model``
        it names, whatever plugins are configured) and the schedulable nodes."""
        cached = self._static_masks.get(role.key)
        if cached is None:
            mask, excluded = self.points.predicate(role, len(self.snapshot.nodes))
            if role.spec.gpu_types:
                column = self.snapshot.label_column(GPU_MODEL_LABEL)
                accepted = np.isin(column, list(role.spec.gpu_types))
                newly = int(np.count_nonzero(mask & ~accepted))
                if newly:
                    excluded[f"gpuTypes [{', '.join(role.spec.gpu_types)}]"] = newly
                mask &= accepted
            mask &= self.snapshot.schedulable
            cached = (mask, excluded)
            self._static_masks[role.key] = cached
        return cached

    def victim_rank(self, task: TaskInfo) -> VictimRank:
        """``task``'s sort key in victim order: the plugins' key, then the most recently
        started first, then by name. Kept until a task of its job moves (victim-order
        keys depend on the session and the victim's own job only)."""
        job = task.job
        known = self._victim_keys.get(id(task))
        if known is not None and known[0] == job.version:
            return known[1]
        rank = (self.points.victim_order.key(task), -(task.start_time or 0.0), task.name)
        self._victim_keys[id(task)] = (job.version, rank)
        return rank

    def withheld_for(self, job: JobInfo, *, ends_by: float | None = None) -> Vector | None:
        """Resources held for other jobs' reservations that ``job`` may not use, or None.

        A job known to end by ``ends_by`` may use holds that start at or after that time.
        """
        total: Vector | None = None
        for hold in self.holds:
            if hold.job == job.name or (ends_by is not None and ends_by <= hold.start_time):
                continue
            total = hold.amounts.copy() if total is None else total + hold.amounts
        return total

    def record_reason(self, job: JobInfo, reason: Reason, *, replace: bool = True) -> None:
        """Remember why ``job`` could not be placed (the latest action's reason wins)."""
        if replace or job.name not in self.reasons:
            self.reasons[job.name] = reason

    def note(self, job: JobInfo, text: str) -> None:
        """Add ``text`` to ``job``'s reason should the session leave it waiting (what
        ordered it where it is, say, beside what kept it from a node)."""
        self.notes[job.name] = text

    def describe(self, row: Vector) -> str:
        """The non-zero finite entries of an engine-unit ``row`` in the units people write,
        GPUs first: ``8 GPUs, 16 CPUs and 64Gi memory``, ``500m CPU``.

        Remembered per session: reasons describe the same few rows over and over.
        """
        key = row.tobytes()
        text = self._described.get(key)
        if text is None:
            snap = self.snapshot
            finite = np.where(np.isfinite(row), row, 0.0)
            text = self._described[key] = snap.resources(finite).spoken()
        return text

    def explain(self, line: str) -> None:
        """Add a sentence to the session's readable account."""
        self.explanations.append(line)

    def queue_label(self, queue: QueueInfo) -> str:
        """``parent/child`` path of a queue, for messages."""
        return "/".join(q.name for q in reversed(queue.ancestors[:-1]))
