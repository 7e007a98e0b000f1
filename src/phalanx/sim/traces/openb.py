"""Alibaba's GPU-sharing trace of 2023 ("openb") as a workload and as a cluster.

Pods of ``csv/openb_pod_list_<variant>.csv`` become one-task jobs in the single queue
``openb``. What this loader assumes (each choice is an argument or a constant here):

- Resources: ``cpu_milli`` millicores, ``memory_mib`` MiB, and ``gpu`` = ``num_gpu``
  whole GPUs, or ``gpu_milli / 1000`` of one GPU for a sharing pod (``num_gpu == 1``
  with ``gpu_milli < 1000``). GPU memory is not requested (the trace has none).
- Time: submit time is ``creation_time``; duration is ``deletion_time -
  creation_time`` as the trace gives it (so it includes the original cluster's
  scheduling wait, 2 s median). A pod without a valid duration (no deletion time,
  or one not after its creation) runs for ``default_duration`` (540 s, the median
  duration of the default file). Pods still running at the end of the trace keep
  their censored duration.
- Priority from ``qos`` (``QOS_PRIORITY``): LS and Guaranteed 200, Burstable 100,
  BE (best effort) 0.
- A ``gpu_spec`` (``T4|P100``) becomes a required node affinity: label
  ``phalanx.io/gpu-model`` In the listed models.
- The four ``multigpu`` variants have no qos or timestamps: pods arrive one per
  second in row order (submit time = row index), run for ``default_duration`` and
  get the Burstable priority.
- GPU utilisation: the trace has none; an optional ``gpu_util`` column (percent) is
  read when a file has one.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from types import MappingProxyType
from typing import Final

from phalanx.domain.errors import DocumentError
from phalanx.domain.job import NodeSelectorRequirement, Role, SelectorOperator
from phalanx.domain.node import GPU_MODEL_LABEL, Gpu, Node
from phalanx.domain.queue import Queue
from phalanx.domain.resources import Resources
from phalanx.sim.traces._common import (
    assemble,
    file_error,
    gpu_util_of,
    note_unique,
    number,
    one_role_job,
    read_csv,
    row_error,
)
from phalanx.sim.workload import Workload, WorkloadJob

QUEUE: Final = "openb"
MIB: Final = 2**20
POD_COLUMNS: Final = ("name", "cpu_milli", "memory_mib", "num_gpu", "gpu_milli")
TIMED_COLUMNS: Final = ("qos", "creation_time", "deletion_time")
NODE_COLUMNS: Final = ("sn", "cpu_milli", "memory_mib", "gpu", "model")
#: Median deletion - creation time of ``openb_pod_list_default.csv``, in seconds.
DEFAULT_DURATION: Final = 540.0
QOS_PRIORITY: Final[Mapping[str, int]] = MappingProxyType(
    {"LS": 200, "Guaranteed": 200, "Burstable": 100, "BE": 0}
)
#: Priority of pods of a file without a qos column.
UNTIMED_PRIORITY: Final = QOS_PRIORITY["Burstable"]


def load_openb(
    path: Path,
    *,
    default_duration: float = DEFAULT_DURATION,
    qos_priority: Mapping[str, int] = QOS_PRIORITY,
    until: float | None = None,
    limit: int | None = None,
) -> Workload:
    """The pods of an openb pod list as one-task jobs in queue ``openb``.

    Raises ``DocumentError`` naming the line and column of a bad row.
    """
    if not default_duration > 0:
        raise DocumentError(
            f"{default_duration} is not a duration", field="default_duration", fix="use seconds > 0"
        )
    header, rows = read_csv(path, POD_COLUMNS)
    timed = all(column in header for column in TIMED_COLUMNS)
    jobs = []
    for index, (line, cells) in enumerate(rows):
        row = dict(zip(header, cells, strict=True))
        role = _role(row, path, line)
        if timed:
            submit, duration = _times(row, path, line, default_duration)
            priority = _priority(row["qos"], qos_priority, path, line)
        else:
            submit, duration, priority = float(index), default_duration, UNTIMED_PRIORITY
        job = one_role_job(
            name=row["name"].strip(), queue=QUEUE, role=role, submit_time=submit, priority=priority
        )
        util = gpu_util_of(header, cells, (path, line))
        jobs.append(WorkloadJob(job=job, duration=duration, gpu_util=util))
    _check_unique(jobs, rows, path)
    notes = (
        (
            f"pods without a valid duration run {default_duration:g} s",
            "priority from qos: " + ", ".join(f"{k} {v}" for k, v in qos_priority.items()),
        )
        if timed
        else (
            "this file has no timestamps: pods arrive one per second in row order",
            f"every pod runs {default_duration:g} s with priority {UNTIMED_PRIORITY} (no qos)",
        )
    )
    return assemble(
        jobs, queues=(Queue(name=QUEUE),), source=path, notes=notes, until=until, limit=limit
    )


def _role(row: Mapping[str, str], path: Path, line: int) -> Role:
    cpu = number(row["cpu_milli"], where=(path, line, "cpu_milli"))
    memory = number(row["memory_mib"], where=(path, line, "memory_mib")) * MIB
    gpus = number(row["num_gpu"], where=(path, line, "num_gpu"), integer=True)
    milli = number(row["gpu_milli"], where=(path, line, "gpu_milli"))
    if gpus == 1 and not 0 < milli <= 1000:
        raise row_error(
            path, line, "gpu_milli", f"{row['gpu_milli']!r} for one GPU", "write 1..1000"
        )
    share = milli / 1000.0 if gpus == 1 else gpus
    models = sorted({m.strip() for m in row.get("gpu_spec", "").split("|") if m.strip()})
    affinity = (
        (
            NodeSelectorRequirement(
                key=GPU_MODEL_LABEL, operator=SelectorOperator.IN, values=tuple(models)
            ),
        )
        if models
        else ()
    )
    amounts = {"cpu": cpu, "memory": memory, "gpu": share}
    resources = Resources.of({k: v for k, v in amounts.items() if v})
    return Role(name="worker", replicas=1, resources=resources, affinity=affinity)


def _times(
    row: Mapping[str, str], path: Path, line: int, default_duration: float
) -> tuple[float, float]:
    submit = number(row["creation_time"], where=(path, line, "creation_time"))
    deleted = row["deletion_time"].strip()
    if not deleted:
        return submit, default_duration
    end = number(deleted, where=(path, line, "deletion_time"))
    return submit, end - submit if end > submit else default_duration


def _priority(qos: str, table: Mapping[str, int], path: Path, line: int) -> int:
    if qos not in table:
        raise row_error(
            path, line, "qos", f"{qos[:40]!r} is not known", f"use one of {', '.join(table)}"
        )
    return table[qos]


def _check_unique(jobs: list[WorkloadJob], rows: list[tuple[int, list[str]]], path: Path) -> None:
    first: dict[str, int] = {}
    for job, (line, _) in zip(jobs, rows, strict=True):
        note_unique(
            first,
            job.name,
            where=(path, line, "name"),
            fix="give each pod its own name",
        )


def openb_nodes(path: Path) -> tuple[Node, ...]:
    """The nodes of an openb node list (``sn,cpu_milli,memory_mib,gpu,model``), in file order.

    GPU nodes carry the label ``phalanx.io/gpu-model``; GPU memory is unknown and left out.
    """
    header, rows = read_csv(path, NODE_COLUMNS)
    if not rows:
        raise file_error(path, "no nodes", "give at least one data row")
    at = {name: header.index(name) for name in NODE_COLUMNS}
    nodes: dict[str, Node] = {}
    for line, cells in rows:
        name = cells[at["sn"]].strip()
        if not name or name in nodes:
            raise row_error(
                path, line, "sn", f"{name!r} is empty or repeated", "name each node once"
            )
        gpus = int(number(cells[at["gpu"]], where=(path, line, "gpu"), integer=True))
        model = cells[at["model"]].strip()
        capacity = {
            "cpu": number(cells[at["cpu_milli"]], where=(path, line, "cpu_milli")),
            "memory": number(cells[at["memory_mib"]], where=(path, line, "memory_mib")) * MIB,
            "gpu": float(gpus),
        }
        nodes[name] = Node(
            name=name,
            capacity=Resources.of({k: v for k, v in capacity.items() if v}),
            labels={GPU_MODEL_LABEL: model} if model and gpus else {},
            gpus=tuple(Gpu(index=i, model=model) for i in range(gpus)),
        )
    return tuple(nodes.values())
