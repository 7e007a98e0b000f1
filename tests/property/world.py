"""The input of one property example, the configs it runs under, and the suite's settings."""

from __future__ import annotations

import dataclasses
import math
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from hypothesis import settings

from phalanx.domain.job import Job, TaskPhase
from phalanx.domain.node import Node
from phalanx.domain.queue import Queue
from phalanx.domain.resources import Resources
from phalanx.engine import SchedulerConfig, Snapshot, default_config

GiB = 2**30
NOW = 10_000.0


#: The share of each property test's examples that runs: ``make test-fast`` sets
#: PHALANX_PROPERTY_SHARE=0.2 for the inner loop; ``make test`` and CI run them all.
EXAMPLES_SHARE = float(os.environ.get("PHALANX_PROPERTY_SHARE") or 1)


def suite_settings(max_examples: int, **overrides: Any) -> settings:
    """A property test's settings: the suite's profile (see conftest) with its own budget
    (times ``EXAMPLES_SHARE``)."""
    return settings(
        settings.get_profile("phalanx-property"),
        max_examples=max(1, math.ceil(max_examples * EXAMPLES_SHARE)),
        deadline=None,
        **overrides,
    )


def res(cpu: float = 0, memory_gib: float = 0, gpu: float = 0) -> Resources:
    """Resources in people's units: cpu cores, memory GiB, gpu devices.

    Names left at zero are left out: for a quota, a written zero is a limit of zero.
    """
    amounts = {"cpu": cpu * 1000, "memory": memory_gib * GiB, "gpu": gpu}
    return Resources.of({name: value for name, value in amounts.items() if value})


def _swap(config: SchedulerConfig, old: str, new: str | None) -> SchedulerConfig:
    """``config`` with plugin ``old`` replaced by ``new`` (or removed when None)."""
    tiers = tuple(
        tuple(
            dataclasses.replace(p, name=new) if p.name == old else p
            for p in tier
            if p.name != old or new is not None
        )
        for tier in config.tiers
    )
    return dataclasses.replace(config, tiers=tiers)


CONFIGS: Mapping[str, SchedulerConfig] = {
    "default": default_config(),
    "proportion": _swap(default_config(), "capacity", "proportion"),
    "spread": _swap(default_config(), "binpack", "spread"),
    "no-gang": _swap(default_config(), "gang", None),
}
#: Configs that promise gang scheduling (every one but the negative control).
GANG_CONFIGS = tuple(name for name in CONFIGS if name != "no-gang")


@dataclass(frozen=True, slots=True, kw_only=True)
class World:
    """One random input: cluster, queues, jobs, the config to run and the time."""

    nodes: tuple[Node, ...]
    queues: tuple[Queue, ...]
    jobs: tuple[Job, ...]
    config_name: str
    now: float = NOW

    @property
    def config(self) -> SchedulerConfig:
        return CONFIGS[self.config_name]

    def snapshot(
        self, *, jobs: Sequence[Job] | None = None, queues: Sequence[Queue] | None = None
    ) -> Snapshot:
        """A fresh snapshot (optionally with jobs and queues given in another order)."""
        return Snapshot.build(
            nodes=self.nodes,
            queues=self.queues if queues is None else queues,
            jobs=self.jobs if jobs is None else jobs,
        )

    def describe(self) -> str:
        """A compact listing for failure messages."""
        lines = [f"config={self.config_name} now={self.now:g}"]
        lines += [
            f"node {n.name}: {n.capacity.describe()} max_tasks={n.max_tasks} "
            f"schedulable={n.schedulable} labels={dict(n.labels)}"
            for n in self.nodes
        ]
        lines += [
            f"queue {q.name} < {q.parent}: w={q.weight:g} g=[{q.guarantee.describe()}] "
            f"d=[{q.deserved.describe() if q.deserved is not None else '-'}] "
            f"cap={dict(q.capability.items()) if q.capability is not None else '-'} "
            f"reclaimable={q.reclaimable} overcommit={q.overcommit}"
            for q in self.queues
        ]
        for j in self.jobs:
            lines.append(
                f"job {j.name} @{j.queue} {j.phase} prio={j.priority} min={j.gang_size} "
                f"preemptible={j.preemptible} created={j.creation_time:g}"
            )
            lines += [f"  role {r.name} x{r.replicas}: {r.resources.describe()}" for r in j.roles]
            lines += [
                f"  task {t.role}-{t.index} {t.phase} {t.node}"
                for t in j.all_tasks()
                if t.phase is not TaskPhase.PENDING
            ]
        return "\n".join(lines)
