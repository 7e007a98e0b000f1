"""Prometheus metrics of the control plane, served at ``/metrics``.

Counters and the session-latency histogram are updated by the controller as things
happen; everything else (jobs by phase, pending reasons, queue quotas and allocation,
starvation, GPU allocation ratio) is computed from the store and the controller's
published view when scraped, so it is never stale and costs nothing between scrapes.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING

from prometheus_client import CollectorRegistry, Counter, Histogram
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector
from sqlalchemy import func, select

from phalanx.control.store.database import Database
from phalanx.control.store.models import JobRow

if TYPE_CHECKING:
    from phalanx.control.controllers.views import ClusterView

_WAITING = ("Pending", "Queued")


class Metrics:
    """The registry and the instruments the controller updates."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self.session_seconds = Histogram(
            "phalanx_scheduling_session_seconds",
            "Duration of one scheduling session.",
            buckets=(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10),
            registry=self.registry,
        )
        self.evictions = Counter(
            "phalanx_preemptions",
            "Tasks evicted by the scheduler, by action (preempt, reclaim).",
            ["action"],
            registry=self.registry,
        )

    def watch(self, db: Database, view: Callable[[], ClusterView]) -> None:
        """Also export what ``db`` and the controller's ``view`` say at each scrape."""
        self.registry.register(_StateCollector(db, view))


class _StateCollector(Collector):
    def __init__(self, db: Database, view: Callable[[], ClusterView]) -> None:
        self._db = db
        self._view = view

    def collect(self) -> Iterator[GaugeMetricFamily]:
        yield from self._jobs()
        yield from self._queues()

    def _jobs(self) -> Iterator[GaugeMetricFamily]:
        jobs = GaugeMetricFamily(
            "phalanx_jobs", "Jobs by queue and phase.", labels=["queue", "phase"]
        )
        reasons = GaugeMetricFamily(
            "phalanx_pending_jobs", "Waiting jobs by queue and reason.", labels=["queue", "reason"]
        )
        starving = GaugeMetricFamily(
            "phalanx_queue_starvation_seconds",
            "How long the longest-waiting job of each queue has waited.",
            labels=["queue"],
        )
        now = time.time()
        with self._db.session() as session:
            for queue, phase, count in session.execute(
                select(JobRow.queue, JobRow.phase, func.count()).group_by(
                    JobRow.queue, JobRow.phase
                )
            ):
                jobs.add_metric([queue, phase], count)
            for queue, reason, count in session.execute(
                select(JobRow.queue, JobRow.reason, func.count())
                .where(JobRow.phase.in_(_WAITING))
                .group_by(JobRow.queue, JobRow.reason)
            ):
                reasons.add_metric([queue, reason], count)
            for queue, since in session.execute(
                select(JobRow.queue, func.min(JobRow.phase_time))
                .where(JobRow.phase.in_(_WAITING))
                .group_by(JobRow.queue)
            ):
                starving.add_metric([queue], max(0.0, now - since))
        yield jobs
        yield reasons
        yield starving

    def _queues(self) -> Iterator[GaugeMetricFamily]:
        view = self._view()
        families = {
            key: GaugeMetricFamily(
                f"phalanx_queue_{key}",
                f"Queue {key} per resource (canonical units).",
                labels=["queue", "resource"],
            )
            for key in ("allocated", "deserved", "guarantee", "capability")
        }
        over = GaugeMetricFamily(
            "phalanx_queue_over_quota",
            "1 when a queue holds more than it deserves.",
            labels=["queue"],
        )
        under = GaugeMetricFamily(
            "phalanx_queue_under_guarantee",
            "1 when a queue holds less than its guarantee on some resource.",
            labels=["queue"],
        )
        for name, usage in sorted(view.queues.items()):
            for key, family in families.items():
                for resource, value in sorted(getattr(usage, key).items()):
                    family.add_metric([name, resource], value)
            is_over = any(
                v > usage.deserved.get(r, float("inf")) + 1e-9 for r, v in usage.allocated.items()
            )
            is_under = any(
                usage.allocated.get(r, 0.0) + 1e-9 < v for r, v in usage.guarantee.items()
            )
            over.add_metric([name], float(is_over))
            under.add_metric([name], float(is_under))
        yield from families.values()
        yield over
        yield under
        ratio = GaugeMetricFamily("phalanx_gpu_allocation_ratio", "Allocated GPUs over all GPUs.")
        ratio.add_metric([], view.gpu_allocated / view.gpu_total if view.gpu_total else 0.0)
        yield ratio
