"""Tiresias' simulator inputs (NSDI'19): ``tiresias-sample/60_job.csv`` and cluster specs.

Jobs (``job_id,num_gpu,submit_time,iterations,model_name,duration,interval``): job
``tiresias-<job_id>`` asks ``num_gpu`` GPUs as one gang of the fewest even tasks of at
most ``gpus_per_task`` GPUs (default 4, the GPUs of a ``cluster_spec.csv`` node). The
trace gives no CPU or memory, so tasks ask GPUs only. Single queue ``tiresias``. Nor
does it give GPU utilisation; an optional ``gpu_util`` column (percent) is read when a
file has one.

Clusters (``num_switch,num_node_p_switch,num_gpu_p_node,num_cpu_p_node,mem_p_node``):
nodes ``tiresias-<i>`` numbered switch by switch, each with network position
``{"tor": "switch-<s>"}``; ``mem_p_node`` is read as GB (10^9 bytes) as the README says.
"""

from __future__ import annotations

from pathlib import Path
from typing import Final

from phalanx.domain.node import Gpu, Node
from phalanx.domain.queue import Queue
from phalanx.domain.resources import Resources
from phalanx.sim.traces._common import (
    assemble,
    file_error,
    gang_role,
    gpu_util_of,
    note_unique,
    number,
    one_role_job,
    read_csv,
)
from phalanx.sim.workload import Workload, WorkloadJob

QUEUE: Final = "tiresias"
JOB_COLUMNS: Final = ("job_id", "num_gpu", "submit_time", "duration")
SPEC_COLUMNS: Final = (
    "num_switch",
    "num_node_p_switch",
    "num_gpu_p_node",
    "num_cpu_p_node",
    "mem_p_node",
)
GPUS_PER_TASK: Final = 4
GB: Final = 10**9


def load_tiresias(
    path: Path,
    *,
    gpus_per_task: int = GPUS_PER_TASK,
    until: float | None = None,
    limit: int | None = None,
) -> Workload:
    """The jobs of a Tiresias job CSV in queue ``tiresias``.

    Raises ``DocumentError`` naming the line and column of a bad row.
    """
    header, rows = read_csv(path, JOB_COLUMNS)
    at = {name: header.index(name) for name in JOB_COLUMNS}
    jobs = []
    lines: dict[str, int] = {}
    for line, cells in rows:
        where = (path, line)
        job_id = int(number(cells[at["job_id"]], where=(*where, "job_id"), integer=True))
        gpus = number(cells[at["num_gpu"]], where=(*where, "num_gpu"), positive=True, integer=True)
        submit = number(cells[at["submit_time"]], where=(*where, "submit_time"))
        duration = number(cells[at["duration"]], where=(*where, "duration"), positive=True)
        name = f"tiresias-{job_id}"
        note_unique(
            lines,
            name,
            where=(path, line, "job_id"),
            fix="give each job its own id",
            shown=str(job_id),
        )
        role = gang_role(int(gpus), gpus_per_task)
        job = one_role_job(name=name, queue=QUEUE, role=role, submit_time=submit)
        util = gpu_util_of(header, cells, where)
        jobs.append(WorkloadJob(job=job, duration=duration, gpu_util=util))
    notes = (f"a job of g GPUs runs as the fewest even tasks of at most {gpus_per_task} GPUs",)
    return assemble(
        jobs, queues=(Queue(name=QUEUE),), source=path, notes=notes, until=until, limit=limit
    )


def tiresias_nodes(path: Path) -> tuple[Node, ...]:
    """The nodes a Tiresias cluster spec describes (its first data row), switch by switch."""
    header, rows = read_csv(path, SPEC_COLUMNS)
    if not rows:
        raise file_error(path, "no cluster row", "give one data row after the header")
    line, cells = rows[0]
    value = {
        name: int(
            number(cells[header.index(name)], where=(path, line, name), positive=True, integer=True)
        )
        for name in SPEC_COLUMNS
    }
    gpus = value["num_gpu_p_node"]
    capacity = Resources.of(
        {
            "cpu": value["num_cpu_p_node"] * 1000.0,
            "memory": value["mem_p_node"] * float(GB),
            "gpu": gpus,
        }
    )
    cards = tuple(Gpu(index=i) for i in range(gpus))
    per_switch = value["num_node_p_switch"]
    return tuple(
        Node(
            name=f"tiresias-{switch * per_switch + i}",
            capacity=capacity,
            gpus=cards,
            network={"tor": f"switch-{switch}"},
        )
        for switch in range(value["num_switch"])
        for i in range(per_switch)
    )
