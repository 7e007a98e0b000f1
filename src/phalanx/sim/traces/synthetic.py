"""A seeded synthetic workload: Poisson arrivals with size, duration, user and queue mixes.

Guarantees: the same parameters and seed give the same workload (numpy's PCG64
``Generator``; every draw is made in a fixed order). Jobs are named ``syn-<i>`` in
arrival order; job i arrives after i + 1 exponential gaps of mean ``1 / rate``.
A job of g GPUs is one gang of the fewest even tasks of at most ``gpusPerNode``
GPUs, each with ``cpuPerGpu`` cores and ``memoryPerGpu`` per GPU it holds. Durations
are lognormal (``durationMedian``, ``durationSigma``) unless ``durations`` gives
explicit choices, and never under one second.

Parameters come as a Python ``SyntheticParams`` or as a small YAML/JSON file of its
camelCase fields (``load_params``); an unknown field is refused with the allowed ones.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Annotated, Any, Final, Self

import numpy as np
import yaml
from pydantic import ConfigDict, Field, ValidationError, model_validator

from phalanx.domain.errors import DocumentError
from phalanx.domain.job import Role
from phalanx.domain.queue import Queue
from phalanx.domain.resources import canonical_amount
from phalanx.sim.traces._common import (
    assemble,
    file_error,
    gang_role,
    one_role_job,
)
from phalanx.sim.workload import Workload, WorkloadJob
from phalanx.spec.common import Name, SpecModel, UserName, located, suggest
from phalanx.spec.diagnostics import document_error, problems_of
from phalanx.spec.quantity import Quantity

Weight = Annotated[float, Field(gt=0, allow_inf_nan=False)]
MAX_JOBS: Final = 1_000_000


class SyntheticParams(SpecModel):
    """What to generate. Mixes map a value to its relative weight."""

    model_config = ConfigDict(strict=False, populate_by_name=True)

    jobs: Annotated[int, Field(ge=1, le=MAX_JOBS)] = 1000
    rate: Annotated[float, Field(gt=0, allow_inf_nan=False)] = 0.01  # arrivals per second
    sizes: dict[Annotated[int, Field(ge=1)], Weight] = Field(
        default_factory=lambda: {1: 0.7, 2: 0.1, 4: 0.1, 8: 0.08, 16: 0.02}
    )
    duration_median: Annotated[float, Field(gt=0, allow_inf_nan=False)] = 1800.0
    duration_sigma: Annotated[float, Field(ge=0, allow_inf_nan=False)] = 1.5
    durations: dict[Annotated[float, Field(gt=0, allow_inf_nan=False)], Weight] | None = None
    users: dict[UserName, Weight] = Field(
        default_factory=lambda: {"alice": 1.0, "bob": 1.0, "carol": 1.0}
    )
    queues: dict[Name, Weight] = Field(default_factory=lambda: {"default": 1.0})
    priorities: dict[int, Weight] = Field(default_factory=lambda: {0: 1.0})
    gpus_per_node: Annotated[int, Field(ge=1)] = 8
    cpu_per_gpu: Quantity = 4
    memory_per_gpu: Quantity = "32Gi"

    @model_validator(mode="before")
    @classmethod
    def _known_fields_only(cls, data: Any) -> Any:
        """Accept the Python (snake_case) names too; refuse unknown fields as documents do."""
        if not isinstance(data, dict):
            return data
        aliases = {name: info.alias or name for name, info in cls.model_fields.items()}
        allowed = list(aliases.values())
        data = {aliases.get(str(key), key): value for key, value in data.items()}
        for key in data:
            if key not in allowed:
                raise located("unknown field", suggest(str(key), allowed), at=(str(key),))
        return data

    @model_validator(mode="after")
    def _mixes_not_empty(self) -> Self:
        for field in ("sizes", "durations", "users", "queues", "priorities"):
            mix = getattr(self, field)
            if mix is not None and not mix:
                raise located("is empty", "give at least one value with its weight", at=(field,))
        return self


def load_params(path: Path) -> SyntheticParams:
    """Parameters from a YAML or JSON file of ``SyntheticParams`` fields (empty: defaults)."""
    try:
        raw: Any = yaml.safe_load(path.read_text(encoding="utf-8")) if path.stat().st_size else None
    except OSError as error:
        raise file_error(
            path, f"cannot read: {error.strerror or error}", "check the path"
        ) from None
    except yaml.YAMLError as error:
        raise file_error(path, f"is not YAML or JSON: {error}", "fix the syntax") from None
    if raw is None:
        return SyntheticParams()
    if not isinstance(raw, dict):
        raise file_error(path, "expected a mapping of parameters", "write key: value pairs")
    try:
        return SyntheticParams.model_validate(raw)
    except ValidationError as error:
        raise document_error(str(path), problems_of(error)) from None


def synthetic_workload(
    params: SyntheticParams | None = None, *, seed: int = 0, until: float | None = None
) -> Workload:
    """The workload ``params`` describe, drawn with ``seed``."""
    p = params if params is not None else SyntheticParams()
    if seed < 0:
        raise DocumentError(f"seed {seed} is negative", field="seed", fix="use a seed >= 0")
    rng = np.random.default_rng(seed)
    times = np.cumsum(rng.exponential(1.0 / p.rate, p.jobs))
    sizes = _draw(rng, p.sizes, p.jobs)
    if p.durations is None:
        spread = rng.lognormal(math.log(p.duration_median), p.duration_sigma, p.jobs)
        durations = np.maximum(spread, 1.0)
    else:
        durations = np.maximum(_draw(rng, p.durations, p.jobs), 1.0)
    users = _draw(rng, p.users, p.jobs)
    queues = _draw(rng, p.queues, p.jobs)
    priorities = _draw(rng, p.priorities, p.jobs)
    roles = _roles(p)
    jobs = [
        WorkloadJob(
            job=one_role_job(
                name=f"syn-{i}",
                queue=str(queues[i]),
                role=roles[int(sizes[i])],
                submit_time=float(times[i]),
                user=str(users[i]),
                priority=int(priorities[i]),
            ),
            duration=float(durations[i]),
        )
        for i in range(p.jobs)
    ]
    notes = (f"synthetic: seed {seed}, {p.jobs} jobs, Poisson arrivals at {p.rate:g}/s",)
    return assemble(
        jobs,
        queues=tuple(Queue(name=name) for name in sorted(p.queues)),
        source="synthetic",
        notes=notes,
        until=until,
    )


def _roles(p: SyntheticParams) -> dict[int, Role]:
    """The role of a job of each size of the mix."""
    cpu = canonical_amount("cpu", p.cpu_per_gpu, field="cpuPerGpu")
    memory = canonical_amount("memory", p.memory_per_gpu, field="memoryPerGpu")
    roles = {}
    for gpus in p.sizes:
        roles[gpus] = gang_role(gpus, p.gpus_per_node, cpu_per_gpu=cpu, memory_per_gpu=memory)
    return roles


def _draw(rng: np.random.Generator, mix: dict[Any, float], count: int) -> np.ndarray[Any, Any]:
    """``count`` values of ``mix`` drawn by weight, in a fixed key order."""
    values = list(mix)
    weights = np.array([mix[v] for v in values], dtype=np.float64)
    picks = rng.choice(len(values), size=count, p=weights / weights.sum())
    return np.array(values, dtype=object)[picks]
