"""What a simulation measured: per job, per queue and user, for the cluster, and for fairness.

All figures come from the run's own events (submit, start, finish, evict ...), so the
summary of a run and its ``events.jsonl`` agree. Time-weighted averages integrate
step functions between events.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Final

import numpy as np

from phalanx.sim import userfair
from phalanx.sim.data import DataStats
from phalanx.sim.fragmentation import FragmentationSummary
from phalanx.sim.gpu_types import GpuTypeStats
from phalanx.sim.idle import IdleStats

#: The summary figures a side-by-side view of runs shows first (CLI table, benchmarks).
HEADLINE_FIGURES: Final = (
    "jobs",
    "finished",
    "avg_jct_s",
    "p95_jct_s",
    "avg_queue_delay_s",
    "p95_queue_delay_s",
    "makespan_s",
    "gpu_alloc_ratio_avg",
    "gpu_fragmented_ratio_avg",
    "preemptions",
    "jain_fairness",
    "sim_wall_s",
)
#: The figures of fairness between users (``phalanx.sim.userfair``), shown after the
#: headline ones; None (n/a) when the workload has fewer than two users.
USER_FIGURES: Final = userfair.USER_FIGURES


@dataclass(slots=True)
class JobRecord:
    """One job's life as the simulation saw it."""

    name: str
    queue: str
    user: str
    gpus: float  # GPUs of its gang (minAvailable tasks)
    duration: float
    submit: float
    first_start: float | None = None
    end: float | None = None
    #: pending | running | finished | failed | killed (past its walltime, or for idle GPUs)
    outcome: str = "pending"
    preemptions: int = 0
    restarts: int = 0

    @property
    def queue_delay(self) -> float | None:
        """Seconds from submission to first start."""
        return None if self.first_start is None else self.first_start - self.submit

    @property
    def slowdown(self) -> float | None:
        """JCT over the job's run time (at least 1 s): 1 means it never waited or lost work."""
        jct = self.jct
        return None if jct is None else jct / max(self.duration, 1.0)

    @property
    def jct(self) -> float | None:
        """Job completion time: submission to successful end."""
        return (
            self.end - self.submit if self.outcome == "finished" and self.end is not None else None
        )


@dataclass(slots=True)
class _Series:
    """A step function of time, integrated as it is recorded."""

    last_time: float = 0.0
    last_value: float = 0.0
    area: float = 0.0
    points: list[tuple[float, float]] = field(default_factory=list)

    def set(self, time: float, value: float) -> None:
        self.area += self.last_value * (time - self.last_time)
        self.last_time, self.last_value = time, value
        if self.points and self.points[-1][0] == time:
            self.points[-1] = (time, value)
        else:
            self.points.append((time, value))

    def average(self, start: float, end: float) -> float:
        area = self.area + self.last_value * (end - self.last_time)
        return area / (end - start) if end > start else 0.0


class Metrics:
    """Collects a run's figures; ``summary()`` renders them as summary.json."""

    def __init__(
        self,
        *,
        total_gpus: float,
        queue_guarantees: dict[str, float],
        queue_deserved: dict[str, float],
        total_cpu: float = 0.0,
    ) -> None:
        self.total_gpus = total_gpus
        self.total_cpu = total_cpu  # millicores
        self.cpu_alloc = _Series()
        self._cpu = 0.0
        self.jobs: dict[str, JobRecord] = {}
        self.gpu_alloc = _Series()
        self.queue_alloc: dict[str, _Series] = defaultdict(_Series)
        self.user_alloc: dict[str, _Series] = defaultdict(_Series)
        self.fragmented = _Series()  # fragmented GPUs (FGD), sampled after sessions
        self.frag_rate = _Series()  # fragmented / free GPUs
        self._user_allocated: dict[str, float] = defaultdict(float)
        # Gang GPUs of each user's unfinished jobs: what they could use (userfair's demand).
        self.user_demand: dict[str, _Series] = defaultdict(_Series)
        self._user_demand: dict[str, float] = defaultdict(float)
        self._unfinished: set[str] = set()
        self.guarantee = queue_guarantees
        self.deserved = queue_deserved
        self.below_guarantee: dict[str, float] = defaultdict(float)
        self.session_seconds: list[float] = []
        self.preemptions = 0
        self._allocated: dict[str, float] = defaultdict(float)
        self._waiting: dict[str, int] = defaultdict(int)  # jobs waiting per queue
        self._last = 0.0
        self.start_time: float | None = None
        self.end_time = 0.0
        self.data: DataStats | None = None  # what reading datasets cost, when jobs read any
        self.idle: IdleStats | None = None  # idle GPUs, when a queue has an idle policy
        #: the GPU types jobs with curves per type trained on (summarised when any did)
        self.gpu_types: GpuTypeStats | None = None

    def submitted(self, record: JobRecord) -> None:
        self.jobs[record.name] = record
        self.start_time = (
            record.submit if self.start_time is None else min(self.start_time, record.submit)
        )
        self._waiting[record.queue] += 1
        self._unfinished.add(record.name)
        self._demand(record.submit, record.user, record.gpus)

    def _demand(self, time: float, user: str, gpus: float) -> None:
        if gpus:
            self._user_demand[user] = max(0.0, self._user_demand[user] + gpus)
            self.user_demand[user].set(time, self._user_demand[user])

    def allocation(
        self, time: float, queue: str, user: str, resources: Mapping[str, float], sign: float
    ) -> None:
        """A task of ``user`` in ``queue`` took (sign 1) or gave back (sign -1) ``resources``."""
        self._advance(time)
        self._cpu += sign * resources.get("cpu", 0.0)
        self.cpu_alloc.set(time, self._cpu)
        gpus = sign * resources.get("gpu", 0.0)
        if not gpus:
            return
        self._allocated[queue] += gpus
        self.queue_alloc[queue].set(time, self._allocated[queue])
        self._user_allocated[user] += gpus
        self.user_alloc[user].set(time, self._user_allocated[user])
        self.gpu_alloc.set(time, sum(self._allocated.values()))

    def fragmentation(self, time: float, measured: FragmentationSummary) -> None:
        """GPU fragmentation as FGD defines it, measured at ``time``."""
        self.fragmented.set(time, measured.fragmented_gpus)
        self.frag_rate.set(time, measured.rate)

    def started(self, time: float, job: str) -> None:
        record = self.jobs[job]
        if record.first_start is None:
            record.first_start = time
            self._advance(time)
            self._waiting[record.queue] -= 1
        record.outcome = "running"

    def ended(self, time: float, job: str, outcome: str) -> None:
        record = self.jobs[job]
        record.end, record.outcome = time, outcome
        self.end_time = max(self.end_time, time)
        if record.name in self._unfinished:
            self._unfinished.discard(record.name)
            self._demand(time, record.user, -record.gpus)

    def _advance(self, time: float) -> None:
        """Charge time spent below guarantee by queues that had work waiting."""
        span = time - self._last
        if span > 0:
            for queue, waiting in self._waiting.items():
                if waiting > 0 and self._allocated[queue] < self.guarantee.get(queue, 0.0) - 1e-9:
                    self.below_guarantee[queue] += span
        self._last = max(self._last, time)

    def summary(
        self, *, sim_wall_s: float, fairness_window: float = userfair.DAY
    ) -> dict[str, object]:
        """summary.json: the figures named by the simulator issue, plus per-queue and
        per-user detail and the ``USER_FIGURES`` (Jain's index over users per window of
        ``fairness_window`` seconds); with the ``DATA_FIGURES`` when the run modelled
        datasets, the ``IDLE_FIGURES`` when a queue had an idle policy, and the
        ``gpu_type_*`` figures when jobs trained by curves per GPU type."""
        records = list(self.jobs.values())
        finished = [r for r in records if r.outcome == "finished"]
        jct = np.array([r.jct for r in finished if r.jct is not None], dtype=float)
        delay = np.array([r.queue_delay for r in records if r.queue_delay is not None], dtype=float)
        start = self.start_time or 0.0
        end = max(self.end_time, start)
        per_user = self.per_user(start, end)
        found = self.user_windows(start, end, fairness_window) if len(per_user) > 1 else []
        return {
            "jobs": len(records),
            "finished": len(finished),
            "failed": sum(r.outcome in ("failed", "killed") for r in records),
            "unfinished": sum(r.outcome in ("pending", "running") for r in records),
            "avg_jct_s": _mean(jct),
            "p50_jct_s": _pct(jct, 50),
            "p95_jct_s": _pct(jct, 95),
            "p99_jct_s": _pct(jct, 99),
            "avg_queue_delay_s": _mean(delay),
            "p95_queue_delay_s": _pct(delay, 95),
            "avg_slowdown": _mean(
                np.array([r.slowdown for r in finished if r.slowdown is not None])
            ),
            "makespan_s": round(end - start, 3),
            "throughput_jobs_per_h": round(len(finished) / ((end - start) / 3600.0), 3)
            if end > start
            else 0.0,
            "gpu_alloc_ratio_avg": round(self.gpu_alloc.average(start, end) / self.total_gpus, 6)
            if self.total_gpus
            else 0.0,
            "cpu_alloc_ratio_avg": round(self.cpu_alloc.average(start, end) / self.total_cpu, 6)
            if self.total_cpu
            else 0.0,
            "gpu_fragmented_ratio_avg": round(
                self.fragmented.average(start, end) / self.total_gpus, 6
            )
            if self.total_gpus
            else 0.0,
            "gpu_frag_rate_avg": round(self.frag_rate.average(start, end), 6),
            "preemptions": self.preemptions,
            "jain_fairness": self.jain(start, end),
            **userfair.user_figures(per_user, found, window=fairness_window),
            "sessions": len(self.session_seconds),
            "session_p50_ms": round(1000 * _pct(np.array(self.session_seconds), 50), 3),
            "session_p99_ms": round(1000 * _pct(np.array(self.session_seconds), 99), 3),
            "sim_wall_s": round(sim_wall_s, 3),
            **({} if self.data is None else self.data.summary()),
            **({} if self.idle is None else self.idle.summary(end)),
            **(self.gpu_types.summary() if self.gpu_types and self.gpu_types.jobs else {}),
            "per_queue": self.per_queue(start, end),
            "per_user": per_user,
        }

    def per_job(self) -> list[dict[str, object]]:
        """One row per job, in submission order: what jobs.csv holds."""
        rows: list[dict[str, object]] = []
        for r in sorted(self.jobs.values(), key=lambda r: (r.submit, r.name)):
            rows.append(
                {
                    "job": r.name,
                    "queue": r.queue,
                    "user": r.user,
                    "gpus": r.gpus,
                    "submit_s": r.submit,
                    "start_s": r.first_start,
                    "end_s": r.end,
                    "outcome": r.outcome,
                    "queue_delay_s": r.queue_delay,
                    "jct_s": r.jct,
                    "slowdown": None if r.slowdown is None else round(r.slowdown, 6),
                    "preemptions": r.preemptions,
                    "restarts": r.restarts,
                }
            )
        return rows

    def per_queue(self, start: float, end: float) -> dict[str, dict[str, float | int]]:
        """Per queue: jobs, JCT, delay, starvation (longest wait), GPU share, time below guarantee."""
        result = self._per_group(lambda r: r.queue, self.queue_alloc, start, end)
        for queue, figures in result.items():
            figures["time_below_guarantee_s"] = round(self.below_guarantee.get(queue, 0.0), 3)
        return result

    def per_user(self, start: float, end: float) -> dict[str, dict[str, float | int]]:
        """Per user: jobs, JCT, delay, waiting, starvation (longest wait), GPU share and
        GPU-time over the run."""
        return self._per_group(lambda r: r.user, self.user_alloc, start, end)

    def user_windows(self, start: float, end: float, window: float) -> list[userfair.Window]:
        """Fairness between users in each window of ``window`` seconds from ``start``
        (``phalanx.sim.userfair`` defines it)."""
        return userfair.windows(
            {user: series.points for user, series in self.user_demand.items()},
            {user: series.points for user, series in self.user_alloc.items()},
            capacity=self.total_gpus,
            start=start,
            end=end,
            window=window,
        )

    def _per_group(
        self,
        group_of: Callable[[JobRecord], str],
        alloc: Mapping[str, _Series],
        start: float,
        end: float,
    ) -> dict[str, dict[str, float | int]]:
        groups: dict[str, list[JobRecord]] = defaultdict(list)
        for record in self.jobs.values():
            groups[group_of(record)].append(record)
        result: dict[str, dict[str, float | int]] = {}
        for name in sorted(groups):
            records = groups[name]
            jct = np.array([r.jct for r in records if r.jct is not None], dtype=float)
            # a job that never started has waited until the end of the run
            waits = [
                max(0.0, (r.first_start if r.first_start is not None else end) - r.submit)
                for r in records
            ]
            series = alloc.get(name)
            gpu_time = series.average(start, end) * (end - start) if series is not None else 0.0
            result[name] = {
                "jobs": len(records),
                "finished": int(jct.size),
                "avg_jct_s": _mean(jct),
                "avg_queue_delay_s": _mean(
                    np.array([r.queue_delay for r in records if r.queue_delay is not None])
                ),
                "avg_wait_s": _mean(np.array(waits, dtype=float)),
                "starvation_s": round(max(waits), 3) if waits else 0.0,
                "gpu_share_avg": round(series.average(start, end) / self.total_gpus, 6)
                if series is not None and self.total_gpus
                else 0.0,
                "gpu_time_s": round(gpu_time, 3),
                "preemptions": sum(r.preemptions for r in records),
            }
        return result

    def jain(self, start: float, end: float) -> float:
        """Jain's index over queues' average GPU allocation normalised by their deserved GPUs."""
        shares = [
            self.queue_alloc[q].average(start, end) / deserved
            for q, deserved in sorted(self.deserved.items())
            if deserved > 0 and q in self.queue_alloc
        ]
        if not shares or not any(shares):
            return 1.0
        values = np.array(shares)
        return round(float(values.sum() ** 2 / (len(values) * (values**2).sum())), 6)


def _mean(values: np.ndarray) -> float:
    return round(float(values.mean()), 3) if values.size else 0.0


def _pct(values: np.ndarray, q: float) -> float:
    return round(float(np.percentile(values, q)), 3) if values.size else 0.0
