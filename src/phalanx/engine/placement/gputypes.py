"""GPU types: a job's GPU tasks on nodes of one GPU type, and the reasons when the type
is what keeps a job waiting.

A node's GPU type is its label ``phalanx.io/gpu-model`` (``GPU_MODEL_LABEL``, set from a
Cluster document's ``gpus.model``); a node with GPUs and without the label is of the
type ``""`` (said "unlabelled"), one type of its own; a node without GPUs has no type.
A task asks for GPUs when its role has a card demand (``gpu`` or ``gpu-memory``).

Guarantees, for a job without ``allow_mixed_gpu_types`` (``typing_of``):

- Cheap where it cannot matter: on a cluster whose GPU nodes are all of one type, for
  a job that allows mixing and for one that asks for no GPUs, nothing here runs past
  one kept lookup (``GpuTypeIndex``, built once per snapshot).
- One type: every task of the job that asks for GPUs, across its roles, its groups and
  its later growth, is placed (allocated, pipelined, or given room by eviction) on
  nodes of one type. Tasks that ask for no GPUs go anywhere.
- Pinned: a job with a GPU task already placed keeps to that type (the type of most of
  those tasks, ties to the first by name, should it span several from before).
- One task: a gang with a single GPU task left to place and no type yet is placed as
  without types (it cannot span two); its node's type then pins the job.
- Wished for: a job not pinned for which a plugin names types (the ``gpu_types`` point,
  e.g. ``goodput`` on a cluster of several types) is tried on those alone, in that
  order (before a plugin's offered masks, which come next within each type): of a gang
  with several GPU tasks, those the bound below says it fits on; where none has room,
  on the first, so that its reason is placement's own there.
- Chosen per gang try: otherwise the types are tried in turn, each in its own attempt,
  only those where the gang fits by an upper bound of what placement finds (per role,
  the tasks each node's free room and slots hold under the role's predicates, summed
  per type; and the GPUs free on the type). Types with room for every pending task
  come first, the fewest GPUs left free after placing first (best fit: a large free
  pool stays whole for a large job); then types with room for the part the gang still
  needs (``minAvailable`` below the replicas), the most room first; ties by name.
- Reasons: a gang that would fit across types but fits on none alone waits with a
  reason naming what each type has and the fix (``spec.allowMixedGpuTypes``); one that
  would not fit even across types is tried on the type with the most room, so its
  reason is placement's own, the other types' nodes counted as excluded by its type.

A role's ``gpuTypes`` is a predicate the session applies to every role
(``Session.static_mask``); ``left_out`` words what it leaves out.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from phalanx.domain.node import GPU_MODEL_LABEL
from phalanx.domain.resources import GPU
from phalanx.engine.decisions import Reason, ReasonCode
from phalanx.engine.framework.kept import Lifetime
from phalanx.engine.framework.session import Session
from phalanx.engine.snapshot import CHARGED, EPSILON, JobInfo, RoleInfo, Snapshot, TaskInfo

#: Most types tried for one gang inside one offered mask: each failed try costs a
#: placement attempt.
MAX_TRIES = 8
_PLACED = tuple(CHARGED)


@dataclass(frozen=True, slots=True, kw_only=True)
class GpuTypeIndex:
    """The GPU types of one snapshot's nodes: ``names`` sorted ("" for unlabelled GPU
    nodes), ``ids[node]`` indexing them (-1: a node without GPUs)."""

    names: tuple[str, ...]
    ids: NDArray[np.intp]

    @property
    def several(self) -> bool:
        """Whether the GPU nodes are of more than one type."""
        return len(self.names) > 1

    def mask(self, type_id: int) -> NDArray[np.bool_]:
        """The nodes of type ``type_id``."""
        mask: NDArray[np.bool_] = self.ids == type_id
        return mask


def gpu_type_index(snapshot: Snapshot) -> GpuTypeIndex:
    """Every node's GPU type (a ``Lifetime.FIXED`` slot: labels and capacity never change
    in a snapshot's life)."""
    ids = np.full(len(snapshot.nodes), -1, dtype=np.intp)
    gpu = snapshot.dim.get(GPU)
    if gpu is None:
        return GpuTypeIndex(names=(), ids=ids)
    has = (snapshot.capacity[:, gpu] + snapshot.cordoned[:, gpu]) > 0
    column = snapshot.label_column(GPU_MODEL_LABEL)
    labels = ["" if value is None else str(value) for value in column]
    names = tuple(sorted({labels[i] for i in np.flatnonzero(has)}))
    number = {name: i for i, name in enumerate(names)}
    for i in np.flatnonzero(has):
        ids[i] = number[labels[i]]
    ids.flags.writeable = False
    return GpuTypeIndex(names=names, ids=ids)


def spoken(name: str) -> str:
    """A type as reasons say it: its name, or ``unlabelled``."""
    return name or "unlabelled"


@dataclass(frozen=True, slots=True, kw_only=True)
class TypeMask:
    """Where a job's GPU tasks may go in one try: the nodes of type ``name``."""

    name: str
    mask: NDArray[np.bool_]


@dataclass(frozen=True, slots=True, kw_only=True)
class Typing:
    """How one job is held to one GPU type: the index, the type it is pinned to, and the
    types a plugin wants it on (``gpu_types``, best first; None: no wish)."""

    index: GpuTypeIndex
    pinned: int | None
    preferred: tuple[int, ...] | None = None

    @property
    def key(self) -> object:
        """What the job's tries depend on besides the snapshot's state and its shape."""
        return ("gpu-type", self.pinned, self.preferred)

    def preferred_masks(self) -> tuple[TypeMask, ...] | None:
        """The masks of the types a plugin wants the job on, best first (None: no wish)."""
        if self.preferred is None:
            return None
        return tuple(
            TypeMask(name=self.index.names[k], mask=self.index.mask(k)) for k in self.preferred
        )

    def pinned_mask(self) -> TypeMask | None:
        """The mask of the pinned type, or None when the job is not pinned."""
        if self.pinned is None:
            return None
        return TypeMask(name=self.index.names[self.pinned], mask=self.index.mask(self.pinned))


def asks_gpus(role: RoleInfo) -> bool:
    """Whether the role's tasks take GPU cards (whole, or a share)."""
    return role.cards is not None


def typing_of(session: Session, job: JobInfo) -> Typing | None:
    """How ``job`` is held to one GPU type; None when it is not (mixing allowed, no role
    asks for GPUs, or the GPU nodes are of one type)."""
    if job.spec.allow_mixed_gpu_types:
        return None
    index = session.kept.get(gpu_type_index, Lifetime.FIXED)
    if not index.several or not any(asks_gpus(role) for role in job.roles):
        return None
    pinned = pinned_type(index, job)
    preferred = None
    if pinned is None and session.points.gpu_types:
        wished = session.points.gpu_types(job)
        if wished is not None:
            number = {name: k for k, name in enumerate(index.names)}
            preferred = tuple(number[name] for name in wished if name in number)
    return Typing(index=index, pinned=pinned, preferred=preferred)


def pinned_type(index: GpuTypeIndex, job: JobInfo) -> int | None:
    """The type of most of the job's placed GPU tasks (ties: the first by name)."""
    if not job.count(*_PLACED):
        return None
    counts = np.zeros(len(index.names), dtype=np.int64)
    for task in job.tasks:
        if task.status in CHARGED and task.node >= 0 and asks_gpus(task.role):
            kind = int(index.ids[task.node])
            if kind >= 0:
                counts[kind] += 1
    return int(np.argmax(counts)) if counts.any() else None


def job_mask(session: Session, job: JobInfo, role: RoleInfo) -> NDArray[np.bool_] | None:
    """Where more of ``role``'s tasks may go by the job's type: its pinned type's nodes
    for a GPU role of a pinned job; None when the type does not confine them."""
    typing = typing_of(session, job)
    if typing is None or typing.pinned is None or not asks_gpus(role):
        return None
    return typing.index.mask(typing.pinned)


@dataclass(frozen=True, slots=True, kw_only=True)
class _Rooms:
    """Per type: the gang's tasks it holds (capped per role), whether all fit, free GPUs."""

    held: NDArray[np.float64]
    fits: NDArray[np.bool_]
    free_gpus: NDArray[np.float64]  # engine units
    nodes: NDArray[np.int64]  # nodes with free GPUs the gang's roles may use
    across: float  # GPU tasks the gang's roles have room for on every type at once
    size: int  # GPU tasks in the gang
    need: float  # GPUs the gang's GPU tasks ask for (engine units)
    unit: float  # engine units per GPU


def _rooms(
    session: Session,
    index: GpuTypeIndex,
    tasks: Sequence[TaskInfo],
    free: NDArray[np.float64],
    slots: NDArray[np.float64],
    within: NDArray[np.bool_] | None,
) -> _Rooms:
    """The room each type has for the GPU tasks of ``tasks`` (vectorised over nodes)."""
    counts: dict[int, int] = {}
    roles: dict[int, RoleInfo] = {}
    for task in tasks:
        if asks_gpus(task.role):
            counts[task.role.index] = counts.get(task.role.index, 0) + 1
            roles[task.role.index] = task.role
    size = len(index.names)
    typed = index.ids >= 0
    if within is not None:
        typed = typed & within
    ids = index.ids[typed]
    gpu = session.snapshot.dim[GPU]
    usable = np.zeros(len(slots), dtype=np.bool_)
    held = np.zeros(size)
    fits = np.ones(size, dtype=np.bool_)
    across = 0.0
    need = 0.0
    for number in sorted(counts):
        role, count = roles[number], counts[number]
        mask = session.static_mask(role)[0]
        usable |= mask
        wanted = np.flatnonzero(role.request > 0)
        fit = np.array(slots, dtype=np.float64)
        ratio = (free[:, wanted] + EPSILON) / role.request[wanted]
        fit = np.minimum(fit, np.floor(ratio.min(axis=1)))
        fit = np.where(mask, np.clip(fit, 0.0, count), 0.0)
        per_type = np.bincount(ids, weights=fit[typed], minlength=size)
        held += np.minimum(per_type, count)
        fits &= per_type >= count
        across += min(float(per_type.sum()), count)
        need += float(role.request[gpu]) * count
    gpus = np.where(usable & typed, np.maximum(free[:, gpu], 0.0), 0.0)
    free_gpus = np.bincount(ids, weights=gpus[typed], minlength=size).astype(np.float64)
    with_gpus = np.bincount(ids, weights=(gpus[typed] > EPSILON), minlength=size)
    fits &= free_gpus + EPSILON >= need
    return _Rooms(
        held=held,
        fits=fits,
        free_gpus=free_gpus,
        nodes=with_gpus.astype(np.int64),
        across=across,
        size=sum(counts.values()),
        need=need,
        unit=float(session.snapshot.unit[gpu]),
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class Tries:
    """What to try, in order: (a plugin's mask or None, the type mask or None); and the
    job's reason when nothing is worth trying."""

    tries: tuple[tuple[NDArray[np.bool_] | None, TypeMask | None], ...]
    reason: Reason | None = None


def fixed_tries(
    typing: Typing | None,
    tasks: Sequence[TaskInfo],
    masks: Sequence[NDArray[np.bool_] | None],
) -> Tries | None:
    """The tries that need no room counted: every mask alone when ``typing`` is None or
    at most one task of ``tasks`` asks for GPUs (one task cannot span two types, and
    once placed it pins the job), every mask with the pinned type for a pinned job;
    None when the types must be ranked (``tries_for``)."""
    if typing is None:
        return Tries(tries=tuple((m, None) for m in masks))
    pinned = typing.pinned_mask()
    if pinned is not None:
        return Tries(tries=tuple((m, pinned) for m in masks))
    wished = typing.preferred_masks()
    if wished is not None and sum(1 for t in tasks if asks_gpus(t.role)) <= 1:
        return Tries(tries=tuple((m, w) for m in masks for w in wished[:MAX_TRIES]))
    if sum(1 for t in tasks if asks_gpus(t.role)) <= 1:
        return Tries(tries=tuple((m, None) for m in masks))
    return None


def tries_for(
    session: Session,
    typing: Typing | None,
    tasks: Sequence[TaskInfo],
    masks: Sequence[NDArray[np.bool_] | None],
    free: NDArray[np.float64],
    slots: NDArray[np.float64],
) -> Tries:
    """The tries for ``tasks`` inside each of ``masks`` in turn (a plugin's offer, or
    ``(None,)``): each mask with the job's pinned type, or with each type the gang fits
    on there, best first (see the module); every mask alone where ``fixed_tries`` says
    so."""
    fixed = fixed_tries(typing, tasks, masks)
    if fixed is not None:
        return fixed
    assert typing is not None
    index = typing.index
    job = tasks[0].job
    gpu_tasks = sum(1 for t in tasks if asks_gpus(t.role))
    # the GPU tasks the gang still needs from these: the rest of minAvailable past the
    # tasks that ask for none (at least one, at most all)
    wanted = min(max(job.min_available - job.ready_count - (len(tasks) - gpu_tasks), 1), gpu_tasks)
    found: list[tuple[NDArray[np.bool_] | None, TypeMask | None]] = []
    first: _Rooms | None = None
    for within in masks:
        rooms = _rooms(session, index, tasks, free, slots, within)
        first = first or rooms
        ranked = _ranked(rooms, wanted)
        if typing.preferred is not None:
            ranked = [k for k in typing.preferred if k in ranked]
        for kind in ranked[:MAX_TRIES]:
            found.append((within, TypeMask(name=index.names[kind], mask=index.mask(kind))))
    if found and typing.preferred is not None:  # the wished-for order first, then the offer's
        rank = {index.names[k]: n for n, k in enumerate(typing.preferred)}
        found.sort(key=lambda attempt: rank[attempt[1].name] if attempt[1] else 0)
    if found:
        return Tries(tries=tuple(found))
    if first is None:
        return Tries(tries=())
    if typing.preferred:  # no room on the types wished for: placement's own reason there
        kind = typing.preferred[0]
        return Tries(tries=((masks[0], TypeMask(name=index.names[kind], mask=index.mask(kind))),))
    if first.across >= wanted:
        return Tries(tries=(), reason=_one_type_reason(index, first, wanted))
    best = int(np.argmax(first.held))  # the most room (ties: first by name): its own reason
    return Tries(tries=((masks[0], TypeMask(name=index.names[best], mask=index.mask(best))),))


def _ranked(rooms: _Rooms, wanted: int) -> list[int]:
    """The types worth a try, best first: those with room for every task (the fewest GPUs
    left free after placing first), then those with room for the ``wanted`` tasks the
    gang needs (the most room first); ties by name."""
    order = np.arange(len(rooms.held))
    full = np.flatnonzero(rooms.fits)
    full = full[np.lexsort((order[full], rooms.free_gpus[full] - rooms.need))]
    part = np.flatnonzero(~rooms.fits & (rooms.held >= wanted))
    part = part[np.lexsort((order[part], -rooms.held[part]))]
    return [int(k) for k in (*full, *part)]


def _one_type_reason(index: GpuTypeIndex, rooms: _Rooms, wanted: int) -> Reason:
    """Why a gang that would fit across GPU types waits: what each type has."""
    unit = rooms.unit
    parts = [
        f"{spoken(name)}: {rooms.free_gpus[k] / unit:g} free on "
        f"{_count(int(rooms.nodes[k]), 'node')}, room for {int(rooms.held[k])} of its "
        f"{_count(rooms.size, 'GPU task')}"
        for k, name in enumerate(index.names)
        if rooms.free_gpus[k] > EPSILON
    ]
    most = float(rooms.free_gpus.max()) / unit if len(rooms.free_gpus) else 0.0
    needs = (
        f"{rooms.need / unit:g} GPUs"
        if wanted >= rooms.size
        else f"{_count(wanted, 'GPU task')} together"
    )
    return Reason(
        code=ReasonCode.GANG,
        message=f"needs {needs} of one GPU type: the most free of one type is {most:g} "
        f"({'; '.join(parts) or 'none free'}); fix: allow mixed types "
        "(spec.allowMixedGpuTypes: true) or wait for running tasks to end",
        resource=GPU,
    )


def _count(number: int, noun: str) -> str:
    return f"{number} {noun}" + ("" if number == 1 else "s")


def left_out(snapshot: Snapshot, role: RoleInfo) -> str | None:
    """``gpuTypes [A100] leaves out 12 free T4 GPUs``: the GPUs free now or once released
    on schedulable nodes of the types a role's ``gpuTypes`` does not name; None when it
    names none or leaves out no free GPU."""
    accepted = role.spec.gpu_types
    gpu = snapshot.dim.get(GPU)
    if not accepted or gpu is None:
        return None
    free = (
        snapshot.capacity[:, gpu]
        - snapshot.used[:, gpu]
        + snapshot.releasing[:, gpu]
        - snapshot.pipelined[:, gpu]
    )
    column = snapshot.label_column(GPU_MODEL_LABEL)
    outside = snapshot.schedulable & (free > EPSILON) & ~np.isin(column, list(accepted))
    if not outside.any():
        return None
    totals: dict[str, float] = {}
    for node in np.flatnonzero(outside):
        name = spoken("" if column[node] is None else str(column[node]))
        totals[name] = totals.get(name, 0.0) + float(free[node] / snapshot.unit[gpu])
    named = ", ".join(f"{amount:g} free {name} GPUs" for name, amount in sorted(totals.items()))
    return (
        f"gpuTypes [{', '.join(accepted)}] leaves out {named} (fix: add their types to the "
        "role's gpuTypes)"
    )


def placed_types(index: GpuTypeIndex, job: JobInfo) -> set[str]:
    """The types of the nodes the job's GPU tasks hold now (for checks and tests)."""
    return {
        index.names[int(index.ids[t.node])]
        for t in job.tasks
        if t.status in CHARGED and t.node >= 0 and asks_gpus(t.role) and index.ids[t.node] >= 0
    }
