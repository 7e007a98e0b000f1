"""Each waiting job's multifactor priority, as Slurm's ``sprio`` shows it.

The controller publishes these with its view after every tick (``ClusterView.priorities``)
when its scheduler config has the ``fairshare`` plugin: the four factors the plugin
orders jobs by, its weights, and their weighted sum, computed by the plugin's own
``Multifactor`` against the controller's engine state at the tick's ``now``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final

from phalanx.domain.job import JobPhase
from phalanx.engine.framework.config import SchedulerConfig
from phalanx.engine.plugins.fairshare import Multifactor, plugin_of
from phalanx.engine.snapshot import Snapshot

#: The job phases a priority is shown for: those of a job waiting to start.
_WAITING: Final = frozenset({JobPhase.PENDING, JobPhase.QUEUED})


@dataclass(frozen=True, slots=True, kw_only=True)
class JobPriority:
    """One waiting job's factors (each 0..1), the plugin's ``weights`` (keyed ``age``,
    ``fairShare``, ``size``, ``priority``, as its args name them) and ``total``, their
    weighted sum: what the fairshare plugin orders the job by, at ``time``."""

    job: str
    queue: str
    user: str
    created_at: float
    age: float
    fair_share: float
    size: float
    priority: float
    total: float
    weights: Mapping[str, float]
    time: float


class Priorities:
    """The fairshare plugin of one scheduler config, built once; ``None`` answers from
    ``of`` when the config has no such plugin."""

    def __init__(self, config: SchedulerConfig) -> None:
        self.plugin = plugin_of(config)

    @property
    def enabled(self) -> bool:
        """Whether the config orders jobs by multifactor priority."""
        return self.plugin is not None

    def of(self, snapshot: Snapshot, now: float) -> dict[str, JobPriority]:
        """Each job of ``snapshot`` waiting to start (Pending or Queued with a pending
        task) at ``now``, by name: empty without the plugin. One ``Multifactor`` for all,
        so usage is read once; the caller holds the lock that keeps ``snapshot`` still."""
        plugin = self.plugin
        if plugin is None or not snapshot.waiting:
            return {}
        multifactor = Multifactor(plugin, snapshot, now)
        weights = dict(plugin.weights)
        found = {}
        for name, job in snapshot.waiting.items():
            if job.phase not in _WAITING:
                continue
            factors = multifactor.factors(job)
            found[name] = JobPriority(
                job=name,
                queue=job.queue.name,
                user=job.user,
                created_at=job.creation_time,
                age=factors.age,
                fair_share=factors.fair_share,
                size=factors.size,
                priority=factors.priority,
                total=factors.total,
                weights=weights,
                time=now,
            )
        return found
