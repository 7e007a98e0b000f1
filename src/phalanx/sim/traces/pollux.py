"""Pollux's workloads (OSDI'21): ``philly-jobs-pollux/workloads*/workload-N.csv``.

Columns ``name,time,application,num_replicas,batch_size``. Each row is one job of
``num_replicas`` tasks of one GPU each (role ``worker``), all one gang, in the single
queue ``pollux``; it is submitted at ``time``.

Duration. The CSV has none. By default it is derived from the measured application
profiles beside the workloads (``app_profiles/<application>/``) the way Pollux's own
simulator estimates a job's completion time for a fixed configuration
(``Application.get_configurations``, adaptdl ``osdi21-artifact``):

- iterations: the ``iteration`` of the last epoch Pollux trains (the shortest
  validation file's length) in ``validation-<batch_size>.csv``, linearly interpolated
  between the two nearest measured batch sizes when there is no file for it;
- time per iteration: the job's replicas packed 4 per node (Pollux's 16 x 4-GPU
  cluster), the local batch ``ceil(batch_size / replicas)`` split into gradient
  accumulation steps of at most the largest profiled local batch (8 for yolov3),
  ``step_time`` linearly interpolated over the local batch from ``placements.csv``
  (that placement) or else ``scalability.csv`` (that node and replica count), plus
  one compute-only step per extra accumulation step;
- duration = iterations x time per iteration.

Pollux's goodput model, adaptive batch sizes and re-scaling are not modelled: the
job runs at the configuration of its row. ``durations`` (seconds per application)
overrides the derivation for the applications it names.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Final

import numpy as np
from numpy.typing import NDArray

from phalanx.domain.queue import Queue
from phalanx.sim.traces._common import (
    assemble,
    file_error,
    gpu_role,
    number,
    one_role_job,
    read_csv,
    row_error,
)
from phalanx.sim.workload import Workload, WorkloadJob

QUEUE: Final = "pollux"
COLUMNS: Final = ("name", "time", "application", "num_replicas", "batch_size")
#: The profiles, relative to the folder that holds the ``workloads*`` folders.
PROFILES: Final = Path("app_profiles")
#: GPUs per node of the cluster Pollux profiled and simulated (16 nodes x 4 GPUs).
GPUS_PER_NODE: Final = 4
#: Largest local batch per step where Pollux sets one below the profiled maximum.
MAX_LOCAL_BATCH: Final = {"yolov3": 8}

Curve = tuple[NDArray[np.float64], NDArray[np.float64], NDArray[np.float64]]


@dataclass(frozen=True, slots=True, kw_only=True)
class AppProfile:
    """One application's measurements: step times by placement and iterations by batch size."""

    name: str
    placements: Mapping[int, Curve]  # placement id -> (local batch, step time, sync time)
    scalability: Mapping[tuple[int, int], Curve]  # (nodes, replicas) -> the same
    iterations: Mapping[int, float]  # batch size -> iterations to the last epoch
    max_local_batch: int


def read_profile(folder: Path) -> AppProfile:
    """The profile of ``folder`` (``placements.csv``, ``scalability.csv``, ``validation-*.csv``)."""
    placements = _curves(folder / "placements.csv", ("placement",))
    scalability = _curves(folder / "scalability.csv", ("num_nodes", "num_replicas"))
    validations = {}
    for path in sorted(folder.glob("validation-*.csv")):
        header, rows = read_csv(path, ("iteration",))
        batch = int(number(path.stem.rsplit("-", 1)[1], where=(path, 0, "name"), integer=True))
        at = header.index("iteration")
        validations[batch] = [float(cells[at]) for _, cells in rows]
    if not validations or not placements:
        raise file_error(
            folder, "no validation or placement profile", "give the app_profiles folder"
        )
    epochs = min(len(its) for its in validations.values())
    largest = int(max(float(curve[0].max()) for curve in placements.values()))
    return AppProfile(
        name=folder.name,
        placements={key[0]: curve for key, curve in placements.items()},
        scalability={(key[0], key[1]): curve for key, curve in scalability.items()},
        iterations={batch: its[epochs - 1] for batch, its in sorted(validations.items())},
        max_local_batch=MAX_LOCAL_BATCH.get(folder.name, largest),
    )


def _curves(path: Path, keys: tuple[str, ...]) -> dict[tuple[int, ...], Curve]:
    columns = (*keys, "local_bsz", "step_time", "sync_time")
    header, rows = read_csv(path, columns)
    at = [header.index(name) for name in columns]
    grouped: dict[tuple[int, ...], list[tuple[float, float, float]]] = {}
    for line, cells in rows:
        values = [number(cells[i], where=(path, line, columns[n])) for n, i in enumerate(at)]
        key = tuple(int(v) for v in values[: len(keys)])
        grouped.setdefault(key, []).append((values[-3], values[-2], values[-1]))
    curves = {}
    for key, points in grouped.items():
        table = np.array(sorted(points), dtype=np.float64)
        curves[key] = (table[:, 0], table[:, 1], table[:, 2])
    return curves


def profile_duration(profile: AppProfile, replicas: int, batch_size: int) -> float | None:
    """Seconds to train at (``replicas``, ``batch_size``); None when the profile does not
    cover that configuration."""
    iterations = _iterations(profile, batch_size)
    placement = tuple([GPUS_PER_NODE] * (replicas // GPUS_PER_NODE))
    if replicas % GPUS_PER_NODE:
        placement += (replicas % GPUS_PER_NODE,)
    placement = min(placement[i:] + placement[:i] for i in range(len(placement)))
    curve = profile.placements.get(int("".join(map(str, placement))))
    if curve is None:
        curve = profile.scalability.get((min(len(placement), 16), replicas))
    if iterations is None or curve is None:
        return None
    local = math.ceil(batch_size / replicas - 1e-8)
    accumulation = math.ceil(local / profile.max_local_batch - 1e-8) - 1
    atomic = math.ceil(local / (accumulation + 1) - 1e-8)
    step = float(np.interp(atomic, curve[0], curve[1]))
    sync = float(np.interp(atomic, curve[0], curve[2]))
    return iterations * (step + accumulation * (step - sync))


def _iterations(profile: AppProfile, batch_size: int) -> float | None:
    sizes = sorted(profile.iterations)
    if not sizes[0] <= batch_size <= sizes[-1]:
        return None
    its = [profile.iterations[size] for size in sizes]
    return float(np.interp(batch_size, sizes, its))


def load_pollux(
    path: Path,
    *,
    profiles_dir: Path | None = None,
    durations: Mapping[str, float] | None = None,
    until: float | None = None,
    limit: int | None = None,
) -> Workload:
    """The jobs of a Pollux workload CSV, in queue ``pollux``.

    ``profiles_dir`` defaults to ``app_profiles`` beside the workload's folder; it is
    read only for applications that ``durations`` does not name. Raises
    ``DocumentError`` naming the line and column of a bad row or of a configuration
    the profiles do not cover.
    """
    header, rows = read_csv(path, COLUMNS)
    at = {name: header.index(name) for name in COLUMNS}
    profiles: dict[str, AppProfile] = {}
    folder = profiles_dir if profiles_dir is not None else path.parent.parent / PROFILES
    jobs: list[WorkloadJob] = []
    lines: dict[str, int] = {}
    for line, cells in rows:
        name, app, submit, replicas, batch = _parse_row(cells, at, (path, line))
        if name in lines:
            raise row_error(
                path, line, "name", f"{name!r} is also on line {lines[name]}", "name jobs once"
            )
        lines[name] = line
        if durations is not None and app in durations:
            duration = float(durations[app])
        else:
            duration = _derived(folder, profiles, app, replicas, batch, where=(path, line))
        job = one_role_job(name=name, queue=QUEUE, role=gpu_role(replicas, 1.0), submit_time=submit)
        jobs.append(WorkloadJob(job=job, duration=duration))
    notes = (
        "each replica is a one-GPU task; all replicas form one gang",
        "durations derived from app_profiles (Pollux's fixed-configuration estimate)"
        + (f", except {', '.join(sorted(durations))} given" if durations else ""),
    )
    return assemble(
        jobs, queues=(Queue(name=QUEUE),), source=path, notes=notes, until=until, limit=limit
    )


def _parse_row(
    cells: list[str], at: Mapping[str, int], where: tuple[Path, int]
) -> tuple[str, str, float, int, int]:
    """(name, application, time, replicas, batch size) of one row."""

    def count(column: str) -> int:
        return int(number(cells[at[column]], where=(*where, column), positive=True, integer=True))

    name, app = cells[at["name"]].strip(), cells[at["application"]].strip()
    submit = number(cells[at["time"]], where=(*where, "time"))
    return name, app, submit, count("num_replicas"), count("batch_size")


def _derived(
    folder: Path,
    profiles: dict[str, AppProfile],
    app: str,
    replicas: int,
    batch: int,
    *,
    where: tuple[Path, int],
) -> float:
    path, line = where
    if app not in profiles:
        if not (folder / app).is_dir():
            raise row_error(
                path,
                line,
                "application",
                f"no profile for {app!r} in {folder}",
                f"pass durations={{{app!r}: seconds}} or the app_profiles folder",
            )
        profiles[app] = read_profile(folder / app)
    duration = profile_duration(profiles[app], replicas, batch)
    if duration is None or not duration > 0:
        raise row_error(
            path,
            line,
            "num_replicas",
            f"the {app} profile does not cover {replicas} replicas at batch size {batch}",
            f"pass durations={{{app!r}: seconds}}",
        )
    return duration
