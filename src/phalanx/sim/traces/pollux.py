"""Pollux's workloads (OSDI'21): ``philly-jobs-pollux/workloads*/workload-N.csv``.

Columns ``name,time,application,num_replicas,batch_size``. Each row is one job of
``num_replicas`` tasks of one GPU each (role ``worker``), all one gang, in the single
queue ``pollux``; it is submitted at ``time``.

Duration. The CSV has none. By default it is the time Pollux's own simulator
(``Job.step``, adaptdl ``osdi21-artifact``) takes to train the job at the fixed size of
its row, alone, from the measured application profiles beside the workloads
(``app_profiles/<application>/``):

- configuration: the job's replicas packed 4 per node (Pollux's 16 x 4-GPU cluster;
  its Tiresias places a job this way on free nodes); the local batch
  ``ceil(batch_size / replicas)`` split into gradient accumulation steps of at most the
  largest profiled local batch (8 for yolov3), at least two steps on one replica when
  the batch exceeds the smallest profiled one, the step's batch capped so the total
  stays within the largest profiled batch size (``Job.update_local_bsz``);
- time per iteration: ``step_time`` linearly interpolated over the local batch from
  ``placements.csv`` (that placement) or else ``scalability.csv`` (that node and replica
  count), plus one compute-only step (``step_time - sync_time``) per extra
  accumulation step;
- progress: epoch ``e`` ends at the ``progress`` of row ``e`` of ``validation-*.csv``,
  the least over the batch sizes; it accrues at ``gain / time per iteration``, where
  the statistical gain ``(var + sqr) / (var / scale + sqr)`` comes from that epoch's
  gradient statistics (``grad_sqr``, ``grad_var``, linearly interpolated between the two
  nearest profiled batch sizes) and ``scale`` is the batch over the smallest profiled
  one; the job ends after the last epoch of the shortest validation file
  (bert 2, ncf 10, yolov3 50, deepspeech2 80, imagenet 90, cifar10 100);
- duration = the sum over epochs of (progress in the epoch) / (progress per second).
  Pollux rounds each epoch's end to a whole second within its 60 s steps; this does
  not (a difference of under half a second per epoch, either way).

Elastic jobs (``elastic=True``, the default where the profiles are read). Each job's
role is elastic, as Pollux's evaluation treats its jobs: it starts at its row's
``num_replicas``, may run on 1 to ``min(64, max batch / smallest local batch)`` GPUs
(Pollux's ``max_replicas``; ncf on 1, its batch fixed at 32,768), is rescaled at most
every 60 s at a cost of ``restart_delay``, and carries its profile
(``WorkloadJob.elastic``) so that the simulator advances it by Pollux's model on the
placement it has, at the batch of best goodput it learns (``sim.elastic.ElasticJob``).
A policy without the ``elastic`` action runs it at its row's size and batch, exactly
the fixed-size job below (Pollux's baselines do the same).

Fixed size: adaptive batch sizes are not modelled; the job runs at the configuration
of its row. ``durations`` (seconds per application) overrides the derivation for the
applications it names (those jobs are never elastic). Two more things of Pollux's model are kept: a job resumes where it stopped
when preempted (adaptdl checkpoints when it is rescaled; phalanx keeps progress to the
last second), and every start and resume spends ``restart_delay`` seconds (Pollux's 30)
before it progresses. The workloads give no GPU utilisation; an optional ``gpu_util``
column (percent) is read when a file has one.

GPU types (Sia's profiles, ``sia-philly/app_profiles``): beside the un-suffixed files
(the default curves, which ``duration`` is derived from), an application's folder may
hold ``placements-<suffix>.csv`` and ``scalability-<suffix>.csv`` per GPU type, the
suffix naming a GPU model (``phalanx.sim.traces.sia.PROFILE_SUFFIXES``: aws is T4, ...).
Each type's curves become a profile of their own with the folder's validation files
(``read_gpu_profiles``), carried by the job's ``ElasticModel.by_model``: the simulator
then runs the job at the speed of the GPU type it lands on (``phalanx.sim.gpu_types``).
``profiles_dir`` points at such a folder (``phalanx sim run --profiles DIR``).
Sia's profiles come with Sia's calibration, kept as its simulator keeps it
(``phalanx.sim.traces.sia``): each application trains ``SLOWDOWNS`` times slower than
its curves say (every step and sync time of its curves, default and per type, is
stretched by it: cifar10 1.8, ncf 1.5, the others 1.2, "fitted to real-world data"),
and each start costs its application's ``RESTART_SECONDS`` (cifar10 50 s, deepspeech2
25, yolov3 80, bert 120, imagenet 250, ncf 15) instead of Pollux's 30.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import Final

import numpy as np
from numpy.typing import NDArray

from phalanx.domain.job import Elastic, Job
from phalanx.domain.queue import Queue
from phalanx.sim.elastic.batch import BatchConfig, fixed_batch
from phalanx.sim.elastic.profile import AppProfile, Curve, build_profile
from phalanx.sim.elastic.progress import fixed_seconds
from phalanx.sim.elastic.throughput import packed
from phalanx.sim.traces._common import (
    assemble,
    file_error,
    gpu_role,
    gpu_util_of,
    note_unique,
    number,
    one_role_job,
    read_csv,
    row_error,
)
from phalanx.sim.traces.sia import RESTART_SECONDS, SLOWDOWNS, suffix_model
from phalanx.sim.workload import ElasticModel, Workload, WorkloadJob

QUEUE: Final = "pollux"
COLUMNS: Final = ("name", "time", "application", "num_replicas", "batch_size")
#: The profiles, relative to the folder that holds the ``workloads*`` folders.
PROFILES: Final = Path("app_profiles")
#: GPUs per node of the cluster Pollux profiled and simulated (16 nodes x 4 GPUs).
GPUS_PER_NODE: Final = 4
#: Seconds each start or resume of a job spends before it progresses (``Job.reallocate``).
RESTART_DELAY: Final = 30.0
#: A preempted job resumes from its progress at the last whole second (see the docstring).
CHECKPOINT_INTERVAL: Final = 1.0
VALIDATION: Final = ("progress", "grad_sqr", "grad_var")
#: Most GPUs a job of Pollux's simulator may hold (``get_pollux_job_info``).
MAX_REPLICAS: Final = 64
#: Seconds between two rescales of a job: Pollux reallocates once a 60 s interval.
RESCALE_INTERVAL: Final = 60.0
#: Applications Pollux runs on one GPU at a fixed batch (``Cluster.__init__``).
FIXED_APPS: Final = {"ncf": 32768}


def read_profile(folder: Path) -> AppProfile:
    """The profile of ``folder`` (``placements.csv``, ``scalability.csv``,
    ``validation-*.csv``), calibrated as Sia's are where they are Sia's."""
    return _profile(folder, "", _validation(folder)).slowed(_calibration(folder))


def read_gpu_profiles(folder: Path) -> dict[str, AppProfile]:
    """Per GPU model, the profile of ``folder`` measured on it: each
    ``placements-<suffix>.csv`` with ``scalability-<suffix>.csv`` where there is one, and
    the folder's validation files (progress and gradient statistics do not depend on the
    GPU), calibrated as Sia's (``SLOWDOWNS``). The model is ``sia.suffix_model(suffix)``;
    empty when no file has a suffix."""
    suffixes = sorted(
        path.stem.removeprefix("placements-") for path in folder.glob("placements-*.csv")
    )
    if not suffixes:
        return {}
    validation = _validation(folder)
    found: dict[str, AppProfile] = {}
    for suffix in suffixes:
        model = suffix_model(suffix)
        if model in found:
            raise file_error(
                folder / f"placements-{suffix}.csv",
                f"a second profile of GPU model {model!r}",
                "keep one placements file per GPU model",
            )
        found[model] = _profile(folder, suffix, validation, model=model)
    return {model: profile.slowed(_calibration(folder)) for model, profile in found.items()}


def _calibration(folder: Path) -> float:
    """How many times slower than its curves the application of ``folder`` trains:
    Sia's ``SLOWDOWNS`` for Sia's profiles (those with curves per GPU type), else 1."""
    if not any(folder.glob("placements-*.csv")):
        return 1.0
    return SLOWDOWNS.get(folder.name, 1.0)


def _validation(folder: Path) -> dict[int, NDArray[np.float64]]:
    """Per profiled batch size, its table of (progress, grad_sqr, grad_var) per epoch."""
    tables: dict[int, NDArray[np.float64]] = {}
    for path in sorted(folder.glob("validation-*.csv")):
        header, rows = read_csv(path, VALIDATION)
        batch = int(number(path.stem.rsplit("-", 1)[1], where=(path, 0, "name"), integer=True))
        at = [header.index(name) for name in VALIDATION]
        tables[batch] = np.array(
            [
                [number(cells[i], where=(path, line, VALIDATION[n])) for n, i in enumerate(at)]
                for line, cells in rows
            ],
            dtype=np.float64,
        )
    return tables


def _profile(
    folder: Path, suffix: str, tables: dict[int, NDArray[np.float64]], *, model: str = ""
) -> AppProfile:
    """The profile of ``folder``'s curves of ``suffix`` ("": the un-suffixed files)."""
    tail = f"-{suffix}" if suffix else ""
    placements = _curves(folder / f"placements{tail}.csv", ("placement",))
    scalability_file = folder / f"scalability{tail}.csv"
    scalability = (
        _curves(scalability_file, ("num_nodes", "num_replicas"))
        if not suffix or scalability_file.is_file()
        else {}
    )
    if not tables or not placements or not all(len(table) for table in tables.values()):
        raise file_error(
            folder, "no validation or placement profile", "give the app_profiles folder"
        )
    return build_profile(
        folder.name,
        placements={key[0]: curve for key, curve in placements.items()},
        scalability={(key[0], key[1]): curve for key, curve in scalability.items()},
        validation=tables,
        gpu_model=model,
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


def batch_config(profile: AppProfile, replicas: int, batch_size: int) -> BatchConfig:
    """Pollux's split of ``batch_size`` over ``replicas`` (``Job.update_local_bsz``)."""
    return fixed_batch(profile, replicas, batch_size)


def profile_duration(profile: AppProfile, replicas: int, batch_size: int) -> float | None:
    """Seconds to train at (``replicas``, ``batch_size``) alone, packed 4 GPUs a node, in
    Pollux's model; None when the profile does not measure that configuration."""
    return fixed_seconds(profile, packed(replicas, GPUS_PER_NODE), batch_size)


def load_pollux(
    path: Path,
    *,
    profiles_dir: Path | None = None,
    durations: Mapping[str, float] | None = None,
    restart_delay: float | None = None,
    until: float | None = None,
    limit: int | None = None,
    elastic: bool = True,
) -> Workload:
    """The jobs of a Pollux workload CSV, in queue ``pollux``; elastic (see the module
    docstring) unless ``elastic`` is False or ``durations`` names the application.

    ``profiles_dir`` defaults to ``app_profiles`` beside the workload's folder; it is
    read only for applications that ``durations`` does not name. Every job resumes
    where it stopped and spends ``restart_delay`` seconds at each start (None: Pollux's
    30 s, or Sia's time of its application for Sia's profiles). Raises
    ``DocumentError`` naming the line and column of a bad row or of a configuration
    the profiles do not cover.
    """
    header, rows = read_csv(path, COLUMNS)
    at = {name: header.index(name) for name in COLUMNS}
    profiles: dict[str, AppProfile] = {}
    typed: dict[str, dict[str, AppProfile]] = {}
    folder = profiles_dir if profiles_dir is not None else path.parent.parent / PROFILES
    jobs: list[WorkloadJob] = []
    lines: dict[str, int] = {}
    for line, cells in rows:
        name, app, submit, replicas, batch = _parse_row(cells, at, (path, line))
        note_unique(lines, name, where=(path, line, "name"), fix="name jobs once")
        if durations is not None and app in durations:
            duration = float(durations[app])
        else:
            duration = _derived(folder, profiles, app, replicas, batch, where=(path, line))
            if app not in typed:
                typed[app] = read_gpu_profiles(folder / app)
        job = one_role_job(name=name, queue=QUEUE, role=gpu_role(replicas, 1.0), submit_time=submit)
        model = None
        restart = restart_delay
        if restart is None:
            restart = RESTART_SECONDS.get(app, RESTART_DELAY) if typed.get(app) else RESTART_DELAY
        if elastic and app in profiles:
            job, model = elastic_job(
                job, profiles[app], batch, restart, by_model=typed.get(app, {})
            )
        jobs.append(
            WorkloadJob(
                job=job,
                duration=duration,
                checkpoint_interval=CHECKPOINT_INTERVAL,
                restart_delay=restart,
                elastic=model,
                gpu_util=gpu_util_of(header, cells, (path, line)),
            )
        )
    notes = (
        "each replica is a one-GPU task; all replicas form one gang"
        + (
            " (elastic jobs: of 1 or more, grown and shrunk by elastic policies)" if elastic else ""
        ),
        "durations: Pollux's progress model at the row's fixed size, from app_profiles"
        + (f", except {', '.join(sorted(durations))} given" if durations else ""),
        "a preempted job resumes where it stopped; each start spends "
        + (f"{restart_delay:g} s" if restart_delay is not None else _restart_note(typed)),
        *_type_note(typed),
    )
    return assemble(
        jobs, queues=(Queue(name=QUEUE),), source=path, notes=notes, until=until, limit=limit
    )


def _restart_note(typed: Mapping[str, Mapping[str, AppProfile]]) -> str:
    """How long a start takes, said once per workload: Pollux's 30 s, or Sia's per
    application where its profiles are Sia's."""
    sia = sorted(app for app, by_model in typed.items() if by_model)
    if not sia:
        return f"{RESTART_DELAY:g} s"
    each = ", ".join(f"{app} {RESTART_SECONDS.get(app, RESTART_DELAY):g} s" for app in sia)
    return f"its application's restart time as Sia's simulator has it ({each})"


def _type_note(typed: Mapping[str, Mapping[str, AppProfile]]) -> tuple[str, ...]:
    """The workload's note on GPU types: the models some application was profiled on."""
    models = sorted({model for by_model in typed.values() for model in by_model})
    if not models:
        return ()
    return (f"step times per GPU type ({', '.join(models)}); on another type, the default curves",)


def max_replicas(profile: AppProfile) -> int:
    """The most GPUs a job of ``profile`` may hold, as Pollux bounds it statically: its
    largest batch over its smallest local batch, at most 64 (Pollux also bounds it by
    twice the replicas the job has measured, a bound that grows as the job learns: the
    ``goodput`` plugin applies that one)."""
    if profile.name in FIXED_APPS:
        return 1
    return max(1, min(MAX_REPLICAS, profile.max_batch // profile.min_local_batch))


def elastic_job(
    job: Job,
    profile: AppProfile,
    batch: int,
    restart_delay: float,
    *,
    by_model: Mapping[str, AppProfile] | None = None,
) -> tuple[Job, ElasticModel]:
    """``job`` (one role, its row's replicas) made elastic as Pollux's evaluation treats
    it, and its progress model: adaptive batch, but ncf's fixed at 32,768; ``by_model``
    its profiles per GPU model (none: ``profile`` for any GPU)."""
    (role,) = job.roles
    high = max(max_replicas(profile), role.replicas)
    spec = Elastic(min_replicas=1, max_replicas=high, interval=RESCALE_INTERVAL, cost=restart_delay)
    elastic_role = replace(role, elastic=spec)
    fixed = FIXED_APPS.get(profile.name)
    model = ElasticModel(
        profile=profile,
        batch_size=batch if fixed is None else fixed,
        adaptive=fixed is None,
        by_model=dict(by_model or {}),
    )
    return replace(job, roles=(elastic_role,), min_available=None), model


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
