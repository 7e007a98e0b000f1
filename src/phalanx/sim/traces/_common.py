"""What every trace loader shares: errors that name the line, CSV reading, gangs, assembly.

Every CSV format reads an optional ``gpu_util`` column (``gpu_util_of``): a job's
recorded mean GPU utilisation in percent, which queues' ``idleGpus`` judge.

Guarantees: a problem in a trace file is a ``DocumentError`` whose message names the
file, the 1-based line number, the column or field and the fix; an unreadable file
is a ``DocumentError`` too. ``assemble`` returns a ``Workload`` whose jobs are sorted
by (submit time, name).
"""

from __future__ import annotations

import csv
import gzip
import io
import math
import os
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Final, TextIO

from phalanx.domain.errors import DocumentError
from phalanx.domain.job import Job, Role
from phalanx.domain.queue import Queue
from phalanx.domain.resources import Resources
from phalanx.sim.workload import Workload, WorkloadJob

#: Where the public traces live, seen from a checkout of the repository.
TRACES_HINT: Final = "the public traces live in ../shared/traces beside the repository"


def row_error(source: str | Path, line: int, field: str, message: str, fix: str) -> DocumentError:
    """A ``DocumentError`` for one bad row: ``<file>, line <n>: <field>: <message>; fix: <fix>``."""
    error = DocumentError(f"{os.fspath(source)}, line {line}: {field}: {message}; fix: {fix}")
    error.field, error.fix = field, fix
    return error


def file_error(source: str | Path, message: str, fix: str) -> DocumentError:
    """A ``DocumentError`` about a whole file."""
    error = DocumentError(f"{os.fspath(source)}: {message}; fix: {fix}")
    error.fix = fix
    return error


def open_text(path: Path) -> TextIO:
    """The UTF-8 text of ``path`` (gunzipped when it ends in ``.gz``), opened for reading."""
    try:
        if path.suffix == ".gz":
            return io.TextIOWrapper(gzip.open(path, "rb"), encoding="utf-8", newline="")
        return open(path, encoding="utf-8-sig", newline="")
    except OSError as error:
        raise file_error(
            path, f"cannot read: {error.strerror or error}", f"check the path ({TRACES_HINT})"
        ) from None


def read_csv(path: Path, required: Sequence[str]) -> tuple[list[str], list[tuple[int, list[str]]]]:
    """The header and every ``(line number, cells)`` row of a CSV file.

    Raises ``DocumentError`` when the file cannot be read, is empty, lacks one of the
    ``required`` columns, or has a row with another number of cells than the header.
    """
    try:
        with open_text(path) as stream:
            reader = csv.reader(stream)
            header = [cell.strip() for cell in next(reader, [])]
            if not header:
                raise file_error(path, "the file is empty", "give a CSV file with a header line")
            missing = [name for name in required if name not in header]
            if missing:
                raise row_error(
                    path,
                    1,
                    "header",
                    f"missing column(s) {', '.join(missing)}; found {', '.join(header)}",
                    f"the header must name {', '.join(required)}",
                )
            rows = [(reader.line_num, cells) for cells in reader if cells]
    except (OSError, EOFError, UnicodeDecodeError, csv.Error) as error:
        raise file_error(path, f"cannot be read as CSV: {error}", "check the file") from None
    for line, cells in rows:
        if len(cells) != len(header):
            raise row_error(
                path,
                line,
                "row",
                f"{len(cells)} cells for {len(header)} columns",
                "give one value per column, separated by commas",
            )
    return header, rows


def note_unique(
    first: dict[str, int],
    name: str,
    *,
    where: tuple[Path, int, str],
    fix: str,
    shown: str | None = None,
) -> None:
    """Record in ``first`` that ``name`` stands on the line of ``where`` (file, line,
    column); a row error ``<shown> is also on line <n>`` when an earlier line had it
    (``shown``: the name, quoted, unless given)."""
    path, line, column = where
    if name in first:
        said = repr(name) if shown is None else shown
        raise row_error(path, line, column, f"{said} is also on line {first[name]}", fix)
    first[name] = line


def number(
    text: str,
    *,
    where: tuple[Path, int, str],
    minimum: float = 0.0,
    positive: bool = False,
    integer: bool = False,
) -> float:
    """``text`` as a finite number >= ``minimum`` (> 0 when ``positive``), else a row error.

    ``where`` is (file, line, column) for the message.
    """
    path, line, column = where
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    kind = "a whole number" if integer else "a number"
    if not math.isfinite(value) or (integer and value != int(value)):
        raise row_error(path, line, column, f"{text[:40]!r} is not {kind}", f"write {kind}")
    if value < minimum or (positive and value <= 0):
        bound = f"> {minimum:g}" if positive else f">= {minimum:g}"
        raise row_error(path, line, column, f"{text!r} is out of range", f"write {kind} {bound}")
    return value


#: The optional column of a CSV trace that gives a job's recorded mean GPU utilisation,
#: in percent (0..100); an empty cell: not recorded. No shipped trace has it.
GPU_UTIL: Final = "gpu_util"


def gpu_util_of(
    header: Sequence[str], cells: Sequence[str], where: tuple[Path, int]
) -> float | None:
    """The ``gpu_util`` cell of a row as a percent, None when the file has no such column
    or the cell is empty; a row error when it is not a number within 0..100."""
    if GPU_UTIL not in header:
        return None
    text = cells[header.index(GPU_UTIL)].strip()
    if not text:
        return None
    value = number(text, where=(*where, GPU_UTIL))
    if value > 100:
        path, line = where
        raise row_error(path, line, GPU_UTIL, f"{text!r} is above 100", "write a percent, 0..100")
    return value


def split_gang(gpus: int, gpus_per_node: int) -> tuple[int, int]:
    """(tasks, GPUs per task) for a gang of ``gpus`` GPUs on nodes of ``gpus_per_node``.

    The fewest tasks, none larger than a node, that split the GPUs evenly: 8 -> 1 x 8,
    12 -> 2 x 6, 24 -> 3 x 8 and 128 -> 16 x 8 on 8-GPU nodes.
    """
    tasks = max(1, math.ceil(gpus / gpus_per_node))
    while gpus % tasks:
        tasks += 1
    return tasks, gpus // tasks


def default_queues(names: Iterable[str]) -> tuple[Queue, ...]:
    """One queue with default settings per distinct name, sorted by name."""
    return tuple(Queue(name=name) for name in sorted(set(names)))


def one_role_job(
    *,
    name: str,
    queue: str,
    role: Role,
    submit_time: float,
    user: str = "default",
    priority: int = 0,
) -> Job:
    """A pending job of one role whose replicas form one gang."""
    return Job(
        name=name,
        queue=queue,
        roles=(role,),
        user=user,
        priority=priority,
        min_available=role.replicas,
        creation_time=submit_time,
    )


def gpu_role(
    replicas: int, gpus: float, *, cpu_per_gpu: float = 0.0, memory_per_gpu: float = 0.0
) -> Role:
    """Role ``worker``: ``replicas`` tasks of ``gpus`` GPUs with cpu (millicores) and
    memory (bytes) in proportion to their GPUs."""
    amounts = {"gpu": gpus, "cpu": cpu_per_gpu * gpus, "memory": memory_per_gpu * gpus}
    return Role(
        name="worker",
        replicas=replicas,
        resources=Resources.of({k: v for k, v in amounts.items() if v}),
    )


def gang_role(
    gpus: int, gpus_per_node: int, *, cpu_per_gpu: float = 0.0, memory_per_gpu: float = 0.0
) -> Role:
    """Role ``worker`` of a gang of ``gpus`` GPUs: the fewest even tasks no larger than a
    node (``split_gang``), with cpu and memory in proportion to their GPUs (``gpu_role``)."""
    tasks, per_task = split_gang(gpus, gpus_per_node)
    return gpu_role(tasks, per_task, cpu_per_gpu=cpu_per_gpu, memory_per_gpu=memory_per_gpu)


def assemble(
    jobs: Iterable[WorkloadJob],
    *,
    queues: Sequence[Queue],
    source: str | Path,
    notes: Sequence[str] = (),
    until: float | None = None,
    limit: int | None = None,
) -> Workload:
    """A ``Workload`` of the jobs submitted before ``until``, the first ``limit`` of them
    in (submit time, name) order."""
    kept = [job for job in jobs if until is None or job.submit_time < until]
    kept.sort(key=lambda job: (job.submit_time, job.name))
    if limit is not None:
        del kept[max(limit, 0) :]
    return Workload(
        jobs=tuple(kept), queues=tuple(queues), source=os.fspath(source), notes=tuple(notes)
    )
