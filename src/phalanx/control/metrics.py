"""Prometheus metrics of the control plane, served at ``/metrics``.

Counters and the session-latency histogram are updated by the controller as things
happen; everything else (jobs by phase, pending reasons, queue quotas and allocation,
starvation, GPU allocation ratio) is computed from the store and the controller's
published view when scraped, so it is never stale and costs nothing between scrapes.

Reading ``/metrics`` takes a bearer token: an admin's, or the server's metrics token,
which grants nothing else. That token is kept in ``DATA_DIR/metrics.token`` (mode
0600), made on the first start and read on every later one, so a scrape configuration
that points at the file keeps working; deleting the file and restarting replaces it.
"""

from __future__ import annotations

import os
import secrets
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Final

from prometheus_client import CollectorRegistry, Counter, Histogram
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from phalanx.control.gpu_metrics import GpuCollector
from phalanx.control.history import History
from phalanx.control.store import jobs as stored_jobs
from phalanx.control.store.database import Database

if TYPE_CHECKING:
    from phalanx.control.controllers.telemetry import GpuPicture
    from phalanx.control.controllers.views import ClusterView

_WAITING = ("Pending", "Queued")

#: The file in the data dir that holds the metrics token.
METRICS_TOKEN_FILE: Final = "metrics.token"
#: How a metrics token starts (an API token starts with ``phx_``).
METRICS_TOKEN_PREFIX: Final = "phm_"


def metrics_token(data_dir: Path) -> str:
    """The token that reads ``/metrics``: the one in ``data_dir/metrics.token``, or a new
    random one (256 bits) written there with mode 0600. The file's mode is made 0600."""
    path = data_dir / METRICS_TOKEN_FILE
    try:
        token = path.read_text().strip()
    except FileNotFoundError:
        token = ""
    if not token:
        token = METRICS_TOKEN_PREFIX + secrets.token_urlsafe(32)
        descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(descriptor, "w") as handle:
            handle.write(token + "\n")
    path.chmod(0o600)
    return token


class Metrics:
    """The registry and the instruments the controller updates, and the ``history`` of
    the same figures it keeps for the console's charts (``/api/v1/system/history``)."""

    def __init__(self, history: History | None = None) -> None:
        self.history = history or History()
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

    def watch(
        self,
        db: Database,
        view: Callable[[], ClusterView],
        gpus: Callable[[], GpuPicture] | None = None,
    ) -> None:
        """Also export what ``db`` and the controller's ``view`` say at each scrape, and
        the GPU readings of ``gpus`` (``gpu_metrics``: the DCGM exporter's names)."""
        self.registry.register(_StateCollector(db, view))
        if gpus is not None:
            self.registry.register(GpuCollector(gpus))


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
            for (queue, phase), count in stored_jobs.count_by_queue_and_phase(session).items():
                jobs.add_metric([queue, phase], count)
            waiting = stored_jobs.waiting_by_queue(session, _WAITING)
            for (queue, reason), count in waiting.reasons.items():
                reasons.add_metric([queue, reason], count)
            for queue, since in waiting.since.items():
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
            "1 when a queue holds more than the deserved share the last scheduling session "
            "gave it (0 until a session computed one: without waiting work there is no "
            "contention to be over quota in).",
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
            is_over = usage.computed and any(
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
