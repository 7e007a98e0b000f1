"""phalanx's own workload format: JSON Lines, one job per line.

A line is the ``spec`` of a Job document (``queue``, ``user``, ``priority``,
``minAvailable``, ``roles``, ``walltime``, ``runtimeEstimate``, ``maxRetry``,
``starvationThreshold``, ``preemptible``, placement fields) plus ``name``,
``submitTime`` (seconds from the workload's start), ``duration`` (seconds of run time
on the requested resources), an optional ``checkpointInterval`` (seconds), an optional
``restartDelay`` (seconds each run spends starting before it progresses) and an
optional ``failAfter`` (seconds into each failing run: ``[30]`` makes the first run fail
30 s in, a task exiting with code 1, after which the job retries by its ``maxRetry``),
an optional ``datasetSizes`` (the bytes of datasets its roles read, ``datasets``;
one not sized on any line takes ``--dataset-size``) and an optional ``gpuUtil`` (its
recorded mean GPU utilisation in percent, 0..100, which queues' ``idleGpus`` judge)::

    {"name": "bert-1", "submitTime": 0, "duration": 3600, "queue": "nlp", "user": "ann",
     "priority": 0, "minAvailable": 2, "roles": [{"name": "worker", "replicas": 2,
     "resources": {"cpu": 8, "memory": "32Gi", "gpu": 8}, "datasets": ["wiki"]}],
     "datasetSizes": {"wiki": "150Gi"}}

Guarantees: ``load_jsonl`` accepts exactly the fields above (camelCase; an unknown
field is refused with the closest allowed one); a bad line raises ``DocumentError``
naming the file, the line number, the field and the fix (a dataset sized on a line
whose roles do not read it, or sized differently on two lines, too). Blank lines are
skipped. ``write_jsonl`` writes what ``load_jsonl`` reads back into an equal workload
(jobs and dataset sizes; queues are not part of the format: the loader derives one
default queue per name; a dataset's digest is written only when it is a pinned one).
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Iterable, Mapping
from dataclasses import replace
from pathlib import Path
from typing import Annotated, Any, Final

from pydantic import Field, ValidationError

from phalanx.domain.errors import DocumentError
from phalanx.domain.job import DataLocality, Job, NodeSelectorRequirement, Role
from phalanx.domain.node import Toleration
from phalanx.domain.resources import CPU, GPU_MEMORY, MEMORY, parse_quantity
from phalanx.sim.traces._common import (
    assemble,
    default_queues,
    file_error,
    note_unique,
    open_text,
    row_error,
)
from phalanx.sim.workload import Dataset, Workload, WorkloadJob
from phalanx.spec.common import Duration, Name, SpecModel
from phalanx.spec.diagnostics import document_error, problems_of
from phalanx.spec.job import JobSpec
from phalanx.spec.quantity import Quantity

#: Longest line accepted, in characters; a guard against hostile input.
MAX_LINE: Final = 1_000_000
_DEFAULT_MAX_RETRY: Final = Job(name="x", queue="x", roles=()).max_retry


class Timing(SpecModel):
    """The fields of a line that only a replay knows."""

    name: Name
    submit_time: Annotated[float, Field(ge=0, allow_inf_nan=False)]
    duration: Duration
    checkpoint_interval: Duration | None = None
    restart_delay: Duration | None = None
    fail_after: list[Duration] = Field(default_factory=list, max_length=100)
    dataset_sizes: dict[str, Quantity] = Field(default_factory=dict, max_length=16)
    gpu_util: Annotated[float, Field(ge=0, le=100, allow_inf_nan=False)] | None = None


class WorkloadRow(JobSpec, Timing):
    """One line: a Job spec with its name, submit time, duration and checkpoint interval."""


_TIMING_KEYS: Final = frozenset(info.alias or name for name, info in Timing.model_fields.items())


class _Shapes:
    """Validates lines; what a line shares with others (all but its timing) is validated
    and converted once, so a trace of many alike jobs reads fast."""

    def __init__(self) -> None:
        self._seen: dict[str, tuple[JobSpec, tuple[Role, ...]]] = {}

    def job(self, raw: dict[str, Any]) -> WorkloadJob:
        """The job of a line; raises ``ValidationError`` exactly when ``WorkloadRow`` would."""
        try:
            timing = Timing.model_validate({k: v for k, v in raw.items() if k in _TIMING_KEYS})
            rest = {k: v for k, v in raw.items() if k not in _TIMING_KEYS}
            key = repr(rest)  # equal for equal JSON values in the same key order
            if key not in self._seen:
                spec = JobSpec.model_validate(rest)
                self._seen[key] = (spec, tuple(role.to_domain(spec) for role in spec.roles))
        except ValidationError:
            row = WorkloadRow.model_validate(raw)  # raises with every field's location
            return _workload_job(row, row, tuple(role.to_domain(row) for role in row.roles))
        return _workload_job(timing, *self._seen[key])


def _workload_job(timing: Timing, spec: JobSpec, roles: tuple[Role, ...]) -> WorkloadJob:
    job = spec.to_job(timing.name, timing.submit_time, roles)
    return WorkloadJob(
        job=job,
        duration=timing.duration,
        checkpoint_interval=timing.checkpoint_interval,
        restart_delay=timing.restart_delay or 0.0,
        fail_after=tuple(timing.fail_after),
        gpu_util=timing.gpu_util,
    )


def _refuse_constant(text: str) -> float:
    raise ValueError(f"{text} is not a JSON number")


_DECODER: Final = json.JSONDecoder(parse_constant=_refuse_constant)


def load_jsonl(path: Path, *, until: float | None = None, limit: int | None = None) -> Workload:
    """Every job of a JSONL workload file submitted before ``until``; the first ``limit``.

    Raises ``DocumentError`` naming the line number of the first bad line.
    """
    jobs: list[WorkloadJob] = []
    lines: dict[str, int] = {}
    sizes: dict[str, tuple[int, int]] = {}  # dataset -> (bytes, the line that said so)
    shapes = _Shapes()
    try:
        with open_text(path) as stream:
            for number, text in enumerate(stream, start=1):
                if not text.strip():
                    continue
                job, raw = _parse_line(text, path, number, shapes)
                note_unique(
                    lines,
                    job.name,
                    where=(path, number, "name"),
                    fix="give every job its own name",
                )
                jobs.append(job)
                _note_sizes(sizes, raw.get("datasetSizes", {}), job, path, number)
    except UnicodeDecodeError as error:
        raise file_error(path, f"byte {error.start} is not UTF-8", "save it as UTF-8") from None
    notes = ("queues derived from the job lines with default settings; --queues sets quotas",)
    queues = default_queues(job.job.queue for job in jobs)
    workload = assemble(jobs, queues=queues, source=path, notes=notes, until=until, limit=limit)
    datasets = tuple(Dataset(name=name, size=size) for name, (size, _) in sorted(sizes.items()))
    return replace(workload, datasets=datasets)


def _note_sizes(
    sizes: dict[str, tuple[int, int]],
    given: Mapping[str, str | float],
    job: WorkloadJob,
    path: Path,
    line: int,
) -> None:
    """Record the dataset sizes a line gives (checked: read by its roles, said alike)."""
    read = {name for role in job.job.roles for name, _ in role.datasets}
    for name, value in given.items():
        size = int(parse_quantity(value))
        if name not in read:
            raise row_error(
                path, line, "datasetSizes", f"no role reads {name!r}", "size the datasets read"
            )
        said = sizes.setdefault(name, (size, line))
        if said[0] != size:
            raise row_error(
                path,
                line,
                "datasetSizes",
                f"{name!r} is {size} bytes here and {said[0]} on line {said[1]}",
                "give each dataset one size",
            )


def _parse_line(
    text: str, path: Path, number: int, shapes: _Shapes
) -> tuple[WorkloadJob, dict[str, Any]]:
    """The job of a line, and the line as decoded (its job validated it)."""
    if len(text) > MAX_LINE:
        raise row_error(path, number, "line", f"over {MAX_LINE} characters", "shorten the line")
    try:
        raw = _DECODER.decode(text)
    except ValueError as error:
        raise row_error(
            path, number, "line", f"not JSON: {error}", "write one JSON object per line"
        ) from None
    if not isinstance(raw, dict):
        raise row_error(
            path, number, "line", f"expected an object, got {type(raw).__name__}", "write {...}"
        )
    try:
        return shapes.job(raw), raw
    except ValidationError as error:
        raise document_error(_header(raw, path, number), problems_of(error)) from None
    except DocumentError as error:
        header = _header(raw, path, number)
        raise DocumentError(f"{header}: {error}", field=error.field, fix=error.fix) from None


def _header(raw: dict[str, Any], path: Path, number: int) -> str:
    name = raw.get("name")
    shown = isinstance(name, str) and name.isprintable() and len(name) < 64
    return f"{os.fspath(path)}, line {number}" + (f" ({name})" if shown else "")


def write_jsonl(workload: Workload | Iterable[WorkloadJob], path: Path) -> None:
    """Write the jobs of ``workload`` to ``path``, one line each, in workload order."""
    jobs = workload.jobs if isinstance(workload, Workload) else workload
    sizes = {d.name: d.size for d in workload.datasets} if isinstance(workload, Workload) else {}
    with open(path, "w", encoding="utf-8") as stream:
        for job in jobs:
            stream.write(json.dumps(row_of(job, sizes), separators=(",", ":")) + "\n")


def row_of(item: WorkloadJob, sizes: Mapping[str, int] | None = None) -> dict[str, Any]:
    """The JSONL row of one job (optional fields only when they differ from the default),
    with the ``sizes`` of the datasets its roles read that have one."""
    job = item.job
    row: dict[str, Any] = {
        "name": job.name,
        "submitTime": job.creation_time,
        "duration": item.duration,
        "queue": job.queue,
        "user": job.user,
        "priority": job.priority,
    }
    if job.min_available is not None:
        row["minAvailable"] = job.min_available
    row["roles"] = [_role_row(role) for role in job.roles]
    optional = {
        "walltime": job.walltime,
        "runtimeEstimate": job.runtime_estimate,
        "checkpointInterval": item.checkpoint_interval,
        "restartDelay": item.restart_delay or None,
        "starvationThreshold": job.starvation_threshold,
    }
    row.update({key: value for key, value in optional.items() if value is not None})
    if item.fail_after:
        row["failAfter"] = list(item.fail_after)
    if item.gpu_util is not None:
        row["gpuUtil"] = item.gpu_util
    read = sorted({name for role in job.roles for name, _ in role.datasets} & set(sizes or {}))
    if read and sizes:
        row["datasetSizes"] = {name: quantity(MEMORY, sizes[name]) for name in read}
    if job.max_retry != _DEFAULT_MAX_RETRY:
        row["maxRetry"] = job.max_retry
    if not job.preemptible:
        row["preemptible"] = False
    return row


def _role_row(role: Role) -> dict[str, Any]:
    row: dict[str, Any] = {
        "name": role.name,
        "replicas": role.replicas,
        "resources": {name: quantity(name, amount) for name, amount in role.resources.items()},
    }
    if role.command:
        row["command"] = list(role.command)
    if role.node_selector:
        row["nodeSelector"] = dict(role.node_selector)
    if role.affinity:
        row["affinity"] = [_term(term) for term in role.affinity]
    if role.tolerations:
        row["tolerations"] = [_toleration(t) for t in role.tolerations]
    if role.depends_on:
        row["dependsOn"] = [{"role": name} for name in role.depends_on]
    if role.datasets:
        row["datasets"] = [
            f"{name}@{digest}" if digest and digest.startswith("sha256:") else name
            for name, digest in role.datasets
        ]
    if role.data_locality is not DataLocality.PREFERRED:
        row["dataLocality"] = str(role.data_locality)
    return row


def _term(term: NodeSelectorRequirement) -> dict[str, Any]:
    row: dict[str, Any] = {"key": term.key, "operator": str(term.operator)}
    if term.values:
        row["values"] = list(term.values)
    return row


def _toleration(toleration: Toleration) -> dict[str, Any]:
    row: dict[str, Any] = {"operator": toleration.operator}
    if toleration.key:
        row["key"] = toleration.key
    if toleration.value:
        row["value"] = toleration.value
    if toleration.effect is not None:
        row["effect"] = str(toleration.effect)
    return row


_BINARY: Final[Mapping[str, int]] = {"Ti": 2**40, "Gi": 2**30, "Mi": 2**20, "Ki": 2**10}


def quantity(name: str, amount: float) -> str | int | float:
    """A Kubernetes quantity that parses back to exactly ``amount`` (canonical units).

    cpu: whole cores as a number, else millicores (``"500m"``); memory: the largest
    binary suffix that divides it (``"32Gi"``), else bytes; anything else: the number.
    """
    if name == CPU:
        cores = amount / 1000.0
        if cores == int(cores) and cores * 1000.0 == amount:
            return int(cores)
        return f"{int(amount)}m" if amount == int(amount) else f"{amount!r}m"
    whole = amount == int(amount) and math.isfinite(amount)
    if name in (MEMORY, GPU_MEMORY) and whole:
        for suffix, unit in _BINARY.items():
            if amount >= unit and amount % unit == 0:
                return f"{int(amount) // unit}{suffix}"
    return int(amount) if whole else amount
