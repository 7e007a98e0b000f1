"""A run's events.jsonl, read once into what the report draws: spans, allocation, JCTs.

The rows are the lifecycle's events (``phalanx.engine.lifecycle.EventKind``, the
control plane's vocabulary). What is taken from them: a task holds the GPUs of its
``Placed`` row (``resources.gpu``, else the length of ``gpus``) until an ``Evicted`` or
``TaskFailed`` row that names it, or until its job is ``Pending`` again or ends
(``Succeeded``, ``Failed``, ``Cancelled``); a task placed again while held is taken as
stopped just before. JCT is ``Succeeded`` minus ``Submitted``; queueing delay is the
job's first ``Placed`` minus its ``Submitted``. ``Reserved`` and node rows are skipped.

Guarantees: the file is streamed (about 1 MiB of text at a time), so memory grows with
the number of jobs and of allocation changes (20 bytes each), not with the file;
events may come in any order of time for the allocation series (they are sorted);
a line that is not a JSON event raises a ``DocumentError`` naming the file and line.
"""

from __future__ import annotations

import json
from array import array
from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from phalanx.domain.errors import DocumentError
from phalanx.sim.svg import Array


class Changes:
    """Every change of the GPUs held, in event order: (time, holder, +/- GPUs), 20 bytes each.

    A holder is a queue or a user, by name."""

    __slots__ = ("d", "index", "q", "t")

    def __init__(self) -> None:
        self.t, self.q, self.d = array("d"), array("i"), array("d")
        self.index: dict[str, int] = {}

    def add(self, t: float, queue: int, gpus: float) -> None:
        """Record that holder ``queue`` (an index from ``queue_index``) took (+) or gave back (-) GPUs."""
        self.t.append(t)
        self.q.append(queue)
        self.d.append(gpus)

    def queue_index(self, queue: str) -> int:
        """The index that stands for ``queue`` in ``add``."""
        return self.index.setdefault(queue, len(self.index))

    def series(self, start: float, queue: str | None = None) -> tuple[Array, Array]:
        """GPUs held (by ``queue``, or by all) as a step function from 0 at ``start``.

        One point per distinct time, holding the value after the last change at it.
        """
        t, d = np.frombuffer(self.t, dtype=np.float64), np.frombuffer(self.d, dtype=np.float64)
        if queue is not None:
            mask = np.frombuffer(self.q, dtype=np.int32) == self.index.get(queue, -1)
            t, d = t[mask], d[mask]
        order = np.argsort(t, kind="stable")
        t, v = t[order], np.maximum(np.cumsum(d[order]).round(6), 0.0)
        last = np.r_[t[1:] != t[:-1], True] if t.size else np.zeros(0, dtype=bool)
        t, v = t[last], v[last]
        if t.size == 0 or t[0] > start:
            t, v = np.r_[start, t], np.r_[0.0, v]
        return t, v


@dataclass(slots=True)
class JobSpan:
    """One job as its events tell it: when it waited, ran, was evicted, and its GPU-seconds."""

    queue: str
    qi: int  # the queue's index in the run's Changes
    ui: int  # the user's index in the run's user_changes
    submit: float
    first_start: float | None = None
    end: float | None = None
    since: float = 0.0  # start of the current running interval
    held: dict[str, tuple[float, float]] = field(default_factory=dict)  # task -> (gpus, since)
    intervals: list[tuple[float, float]] = field(default_factory=list)
    evictions: list[float] = field(default_factory=list)
    gpu_seconds: float = 0.0


@dataclass(slots=True)
class RunLog:
    """One run folder, read: its summary and what its events say over time."""

    folder: Path
    summary: dict[str, Any]
    name: str = ""
    start: float | None = None
    end: float = 0.0
    jobs: dict[str, JobSpan] = field(default_factory=dict)
    changes: Changes = field(default_factory=Changes)  # per queue
    user_changes: Changes = field(default_factory=Changes)  # per user
    jct: dict[str, list[float]] = field(default_factory=lambda: defaultdict(list))
    delay: dict[str, list[float]] = field(default_factory=lambda: defaultdict(list))

    @property
    def total_gpus(self) -> float:
        """The cluster's GPUs as summary.json says (``total_gpus``); 0 when it does not."""
        value = self.summary.get("total_gpus")
        return float(value) if isinstance(value, int | float) and value > 0 else 0.0

    def feed(self, row: dict[str, Any]) -> None:
        """Apply one event row."""
        t, ev, name = float(row["t"]), row["ev"], str(row.get("job", ""))
        if self.start is None or t < self.start:
            self.start = t
        self.end = max(self.end, t)
        if ev == "Submitted":
            self._add_job(name, str(row.get("queue", "")), str(row.get("user", "")), t)
            return
        if ev not in _TASK_EVENTS:
            return
        job = self.jobs.get(name)
        if job is None:  # no submit seen: count it from here
            job = self._add_job(name, str(row.get("queue", "")), str(row.get("user", "")), t)
        if ev == "Placed":
            self._start(job, row.get("tasks") or [], t)
            return
        listed = [str(task) for task in row.get("tasks") or []]
        for task in listed if ev in ("Evicted", "TaskFailed") else list(job.held):
            self._release(job, task, t)
        if ev == "Evicted" and row.get("action") not in _ENDING_STOPS:
            job.evictions.append(t)
        elif ev in _ENDS:
            job.end = t
        if ev == "Succeeded":
            self.jct[job.queue].append(t - job.submit)

    def _add_job(self, name: str, queue: str, user: str, t: float) -> JobSpan:
        job = self.jobs[name] = JobSpan(
            queue=queue,
            qi=self.changes.queue_index(queue),
            ui=self.user_changes.queue_index(user),
            submit=t,
        )
        return job

    def _start(self, job: JobSpan, tasks: list[dict[str, Any]], t: float) -> None:
        if job.first_start is None:
            job.first_start = t
            self.delay[job.queue].append(t - job.submit)
        for task in tasks:
            name = str(task["task"])
            resources = task.get("resources") or {}
            gpus = float(resources["gpu"] if "gpu" in resources else len(task.get("gpus") or ()))
            if name in job.held:  # started again without a stop event: stopped just before
                self._release(job, name, t)
            if not job.held:
                job.since = t
            job.held[name] = (gpus, t)
            if gpus:
                self.changes.add(t, job.qi, gpus)
                self.user_changes.add(t, job.ui, gpus)

    def _release(self, job: JobSpan, task: str, t: float) -> None:
        entry = job.held.pop(task, None)
        if entry is None:
            return
        gpus, since = entry
        job.gpu_seconds += gpus * (t - since)
        if gpus:
            self.changes.add(t, job.qi, -gpus)
            self.user_changes.add(t, job.ui, -gpus)
        if not job.held:
            job.intervals.append((job.since, t))


#: Rows that place or release tasks: ``Placed`` lists tasks placed, ``Evicted`` and
#: ``TaskFailed`` the tasks that left their nodes; a job Pending again or ended holds none.
_ENDS = frozenset({"Succeeded", "Failed", "Cancelled"})
#: ``Evicted`` rows that stop a job for good, which the report does not count as evictions.
_ENDING_STOPS = frozenset({"cancel", "walltime", "abort", "idle"})
_TASK_EVENTS = frozenset({"Placed", "Evicted", "TaskFailed", "Pending", *_ENDS})


def load_summary(path: Path) -> dict[str, Any]:
    """The JSON object in ``path``; a ``DocumentError`` naming the file when there is none."""
    try:
        value = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as error:
        raise DocumentError(
            f"{path}: cannot read: {error}", field="summary.json", fix="point at a folder a "
            "`phalanx sim run --out DIR` wrote"
        ) from None  # fmt: skip
    if not isinstance(value, dict):
        raise DocumentError(
            f"{path}: not a JSON object", field="summary.json", fix="rerun the simulation"
        )
    return value


def _bad(path: Path, number: int, error: Exception) -> DocumentError:
    return DocumentError(
        f"{path}, line {number}: bad event: {error!r}"[:300], field="events.jsonl",
        fix="rerun the simulation; events.jsonl is written by `phalanx sim`",
    )  # fmt: skip


def _events(path: Path) -> Iterator[tuple[int, Any]]:
    """(line number, parsed row) of every event the charts use, parsed about 1 MiB at a time."""
    with path.open(encoding="utf-8") as lines:
        offset = 0
        while chunk := lines.readlines(1 << 20):
            kept = [
                (offset + i, line)
                for i, line in enumerate(chunk, 1)
                if '"ev":"Reserved"' not in line and '"ev":"Node' not in line and line.strip()
            ]
            offset += len(chunk)
            try:
                rows = json.loads("[" + ",".join(line for _, line in kept) + "]")
            except ValueError:
                rows = None
            if not isinstance(rows, list) or len(rows) != len(kept):  # find the bad line
                rows = []
                for number, line in kept:
                    try:
                        rows.append(json.loads(line))
                    except ValueError as error:
                        raise _bad(path, number, error) from None
            yield from zip((number for number, _ in kept), rows, strict=True)


def read_run(folder: Path) -> RunLog:
    """The run in ``folder``; its events.jsonl streamed once (absent: no charts from events)."""
    run = RunLog(folder=folder, summary=load_summary(folder / "summary.json"))
    path = folder / "events.jsonl"
    if not path.is_file():
        return run
    for number, row in _events(path):
        try:
            run.feed(row)
        except (ValueError, KeyError, TypeError, AttributeError) as error:
            raise _bad(path, number, error) from None
    for job in run.jobs.values():
        if job.held:
            job.intervals.append((job.since, run.end))
    return run
