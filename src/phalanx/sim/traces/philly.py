"""Microsoft Philly (2017) as a workload: ``philly-jobs-pollux/philly.csv.gz``.

The file has one row per job: ``timestamp,duration,num_gpus,gpu_time,cluster``. What
this loader assumes, since the trace does not say (every choice is an argument):

- Submit time: seconds since the earliest ``timestamp`` of the file (the rows are not
  in time order, so the first row is not the earliest). Timestamps carry no zone and
  are compared as written.
- Shape: a job of g GPUs runs as one role ``worker`` of the fewest tasks, none larger
  than a node, that split the GPUs evenly (``split_gang``: 8 -> 1 x 8, 12 -> 2 x 6,
  128 -> 16 x 8 with 8-GPU nodes), all of them one gang. The trace has no CPU or
  memory column: each task asks ``cpu_per_gpu`` cores (default 4) and
  ``memory_per_gpu`` (default 32Gi) per GPU it holds.
- Queue: the job's virtual cluster (VC hash). The 11 VCs of
  ``extra_from_HeliosArtifact/philly_vc.csv`` become queues whose guarantee and
  deserved share are the VC's size (nodes x ``gpus_per_node`` GPUs with cpu and
  memory at the same per-GPU ratio) and whose capability is unlimited, so a VC
  borrows idle GPUs of the others; weight is the VC's node count. Jobs of the 4
  small VCs missing from that file go to ``philly-other`` (guarantee 0).
- User: the table has no user column (the raw Philly log's hashed users did not make it
  into this derived table); the VC stands in for the user, so the simulator's per-user
  figures on this trace compare VCs.
- Names: ``philly-<row index>``, the index counting data rows from 0.
- GPU utilisation: the table has none; an optional ``gpu_util`` column (percent) is
  read when a file has one.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from pathlib import Path
from typing import Final

from phalanx.domain.errors import DocumentError
from phalanx.domain.job import Role
from phalanx.domain.queue import Queue
from phalanx.domain.resources import Resources, canonical_amount
from phalanx.sim.traces._common import (
    assemble,
    file_error,
    gang_role,
    gpu_util_of,
    number,
    one_role_job,
    read_csv,
    row_error,
)
from phalanx.sim.workload import Workload, WorkloadJob

COLUMNS: Final = ("timestamp", "duration", "num_gpus", "cluster")
#: The VC file, relative to the folder of ``philly.csv.gz``.
VC_FILE: Final = Path("extra_from_HeliosArtifact/philly_vc.csv")
#: The queue of jobs whose VC is not in the VC file.
OTHER_QUEUE: Final = "philly-other"
GPUS_PER_NODE: Final = 8
CPU_PER_GPU: Final = "4"
MEMORY_PER_GPU: Final = "32Gi"


def read_vcs(path: Path) -> tuple[tuple[str, int], ...]:
    """``(vc, nodes)`` of each row of a ``vc,node num`` file, in file order."""
    header, rows = read_csv(path, ())
    if len(header) != 2:
        raise row_error(path, 1, "header", f"{len(header)} columns", "write vc,node num")
    seen: dict[str, int] = {}
    for line, (vc, nodes) in rows:
        if not vc.strip() or vc.strip() in seen:
            raise row_error(
                path, line, header[0], f"{vc!r} is empty or repeated", "name each VC once"
            )
        count = number(nodes, where=(path, line, header[1]), positive=True, integer=True)
        seen[vc.strip()] = int(count)
    return tuple(seen.items())


def philly_queues(
    vcs: Sequence[tuple[str, int]],
    *,
    gpus_per_node: int = GPUS_PER_NODE,
    cpu_per_gpu: str | float = CPU_PER_GPU,
    memory_per_gpu: str | float = MEMORY_PER_GPU,
) -> tuple[Queue, ...]:
    """One queue per VC (guarantee = deserved = its size, unlimited capability), then
    ``philly-other`` with no guarantee."""
    cpu, memory = _per_gpu(cpu_per_gpu, memory_per_gpu)
    queues = []
    for vc, nodes in vcs:
        gpus = nodes * gpus_per_node
        size = Resources.of({"gpu": gpus, "cpu": gpus * cpu, "memory": gpus * memory})
        queues.append(Queue(name=vc, weight=float(nodes), guarantee=size, deserved=size))
    queues.append(Queue(name=OTHER_QUEUE))
    return tuple(queues)


def load_philly(
    path: Path,
    *,
    vc_file: Path | None = None,
    gpus_per_node: int = GPUS_PER_NODE,
    cpu_per_gpu: str | float = CPU_PER_GPU,
    memory_per_gpu: str | float = MEMORY_PER_GPU,
    checkpoint_interval: float | None = None,
    until: float | None = None,
    limit: int | None = None,
) -> Workload:
    """The jobs of a Philly job table submitted before ``until``; the first ``limit`` of them.

    ``vc_file`` defaults to ``extra_from_HeliosArtifact/philly_vc.csv`` beside ``path``.
    Raises ``DocumentError`` naming the line and column of a bad row.
    """
    if gpus_per_node < 1:
        raise DocumentError(
            f"{gpus_per_node} is not a GPU count", field="gpus_per_node", fix="use 1 or more"
        )
    cpu, memory = _per_gpu(cpu_per_gpu, memory_per_gpu)
    rows = _read_rows(path)
    vcs = read_vcs(vc_file if vc_file is not None else path.parent / VC_FILE)
    start = min(row[0] for row in rows)
    keyed = sorted(
        ((t - start).total_seconds(), f"philly-{i}", duration, gpus, vc, util)
        for i, (t, duration, gpus, vc, util) in enumerate(rows)
    )
    roles: dict[int, Role] = {}

    def role_of(gpus: int) -> Role:
        if gpus not in roles:
            roles[gpus] = gang_role(gpus, gpus_per_node, cpu_per_gpu=cpu, memory_per_gpu=memory)
        return roles[gpus]

    known = {vc for vc, _ in vcs}
    jobs: list[WorkloadJob] = []
    for submit, name, duration, gpus, vc, util in keyed:
        if (until is not None and submit >= until) or (limit is not None and len(jobs) >= limit):
            break
        queue = vc if vc in known else OTHER_QUEUE
        job = one_role_job(name=name, queue=queue, role=role_of(gpus), submit_time=submit, user=vc)
        jobs.append(
            WorkloadJob(
                job=job,
                duration=duration,
                checkpoint_interval=checkpoint_interval,
                gpu_util=util,
            )
        )
    queues = philly_queues(
        vcs, gpus_per_node=gpus_per_node, cpu_per_gpu=cpu_per_gpu, memory_per_gpu=memory_per_gpu
    )
    return assemble(jobs, queues=queues, source=path, notes=_notes(start, gpus_per_node))


def _per_gpu(cpu_per_gpu: str | float, memory_per_gpu: str | float) -> tuple[float, float]:
    return (
        canonical_amount("cpu", cpu_per_gpu, field="cpu_per_gpu"),
        canonical_amount("memory", memory_per_gpu, field="memory_per_gpu"),
    )


def _read_rows(path: Path) -> list[tuple[datetime, float, int, str, float | None]]:
    header, rows = read_csv(path, COLUMNS)
    if not rows:
        raise file_error(path, "no jobs", "give at least one data row")
    at = {name: header.index(name) for name in COLUMNS}
    i_time, i_duration, i_gpus, i_vc = (at[name] for name in COLUMNS)
    parsed = []
    for line, cells in rows:
        try:
            submitted = datetime.fromisoformat(cells[i_time])
        except ValueError:
            raise row_error(
                path,
                line,
                "timestamp",
                f"{cells[i_time][:40]!r} is not a date and time",
                "write YYYY-MM-DD HH:MM:SS",
            ) from None
        duration = number(cells[i_duration], where=(path, line, "duration"), positive=True)
        gpus = number(cells[i_gpus], where=(path, line, "num_gpus"), positive=True, integer=True)
        vc = cells[i_vc].strip()
        if not vc:
            raise row_error(path, line, "cluster", "is empty", "write the job's VC")
        parsed.append(
            (submitted, duration, int(gpus), vc, gpu_util_of(header, cells, (path, line)))
        )
    return parsed


def _notes(start: datetime, gpus_per_node: int) -> tuple[str, ...]:
    return (
        f"submit times are seconds since {start.isoformat(sep=' ')}, the earliest timestamp",
        f"a job of g GPUs runs as the fewest even tasks of at most {gpus_per_node} GPUs, one gang",
        "cpu and memory per task are assumed in proportion to its GPUs (the trace has neither)",
        "each VC of the VC file is a queue guaranteed its size, borrowing allowed; "
        f"other VCs share {OTHER_QUEUE}",
    )
