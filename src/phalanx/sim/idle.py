"""Idle GPUs in the simulator: a trace's recorded utilisation replayed through the one
rule of ``phalanx.engine.lifecycle.idle``.

A workload job may carry its recorded mean GPU utilisation (``WorkloadJob.gpu_util``,
percent). While such a job runs in a queue with an idle policy (its own ``idleGpus``,
else its nearest ancestor's), the simulator reads it every ``every`` seconds of
simulated time, at whole multiples of ``every``, as a node's sampler would, and feeds
the readings to the ``IdleWatch`` the control plane uses; the driver applies the
verdicts through the same ``act_on``. One number per job means a job is idle for its
whole run or never: a job without a recorded utilisation, or at or above its queue's
threshold, is never judged idle and is not read.

The interval: nodes read their GPUs every 5 s, but a verdict only needs a spell to span
the window, so the simulator reads every ``window / 30`` of the shortest window among
the queues (within 5..60 s): a verdict then comes at most 1/30 of the window later than
with 5 s readings (a minute of 30m), for 12 times fewer events on 30m windows. The
readings judge nothing once older than four intervals (``IdleWatch.stale``), as a
node's would. ``SimOptions.idle_every`` sets the interval instead.

``IdleStats`` counts, in ``IDLE_FIGURES``: the jobs marked, stopped and shrunk for
idleness; the GPU-hours held idle (by jobs below their queue's threshold, all the time
they held GPUs, verdict or not); and the GPU-hours returned (the GPUs a stopped or shrunk
job gave up, times the run time it had left at the verdict: what it would have held,
idle, had it not been stopped).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Final

from phalanx.domain.errors import InvalidInput
from phalanx.domain.queue import IdleAction, IdlePolicy, Queue, idle_policy_of
from phalanx.engine.lifecycle import IdleVerdict, IdleWatch
from phalanx.engine.lifecycle.idle import NODE_SAMPLE_INTERVAL
from phalanx.sim.workload import WorkloadJob

#: The figures ``IdleStats.summary`` adds to a run's summary.
IDLE_FIGURES: Final = (
    "idle_marked",
    "idle_stopped",
    "idle_shrunk",
    "idle_gpu_hours",
    "idle_gpu_hours_returned",
    "idle_read_every_s",
)
#: Readings per window, when the interval is derived from the windows.
READS_PER_WINDOW: Final = 30
#: The coarsest derived interval, in seconds.
MAX_EVERY: Final = 60.0
#: Readings older than this many intervals judge nothing.
STALE_READS: Final = 4


@dataclass(slots=True, kw_only=True)
class IdleStats:
    """What idle GPUs cost a run, and what the policies gave back (see the module)."""

    every: float
    marked: set[str] = field(default_factory=set)
    stopped: set[str] = field(default_factory=set)
    shrunk: set[str] = field(default_factory=set)
    returned: float = 0.0  # GPU-seconds
    held: float = 0.0  # GPU-seconds held idle up to ``since``
    holding: float = 0.0  # GPUs held idle since ``since``
    since: float = 0.0

    def hold(self, time: float, gpus: float) -> None:
        """Jobs below their threshold took (+) or gave back (-) ``gpus`` at ``time``."""
        self.held += self.holding * max(time - self.since, 0.0)
        self.holding, self.since = max(self.holding + gpus, 0.0), max(time, self.since)

    def summary(self, end: float) -> dict[str, float | int]:
        """The ``IDLE_FIGURES`` of a run that ended at ``end``."""
        held = self.held + self.holding * max(end - self.since, 0.0)
        return {
            "idle_marked": len(self.marked),
            "idle_stopped": len(self.stopped),
            "idle_shrunk": len(self.shrunk),
            "idle_gpu_hours": round(held / 3600.0, 3),
            "idle_gpu_hours_returned": round(self.returned / 3600.0, 3),
            "idle_read_every_s": self.every,
        }


class IdleReplay:
    """The readings of a run's idle jobs, their watch and their figures."""

    def __init__(self, policies: Mapping[str, IdlePolicy], *, every: float) -> None:
        """``policies``: the policy that applies to each queue's jobs, by queue (queues
        without one absent); ``every``: seconds between readings."""
        if not 0 < every < math.inf:
            raise InvalidInput(f"{every!r} s between readings", field="idle_every", fix="give > 0")
        self.policies = dict(policies)
        self.every = every
        self.watch = IdleWatch(stale=STALE_READS * every)
        self.stats = IdleStats(every=every)
        self._read: dict[str, tuple[float, IdlePolicy]] = {}  # running idle jobs

    @classmethod
    def of(cls, queues: Sequence[Queue], every: float | None = None) -> IdleReplay | None:
        """The replay of ``queues``' idle policies (None when no queue has one), reading
        every ``every`` seconds, or as the module says when None."""
        by_name = {queue.name: queue for queue in queues}
        found = {name: idle_policy_of(name, by_name) for name in sorted(by_name)}
        policies = {name: policy for name, policy in found.items() if policy is not None}
        if not policies:
            return None
        if every is None:
            shortest = min(policy.window for policy in policies.values())
            every = min(max(shortest / READS_PER_WINDOW, NODE_SAMPLE_INTERVAL), MAX_EVERY)
        return cls(policies, every=every)

    def idle(self, job: WorkloadJob) -> IdlePolicy | None:
        """The policy under which ``job`` is idle (its recorded utilisation below the
        threshold of its queue's), else None."""
        policy = self.policies.get(job.job.queue)
        util = job.gpu_util
        return (
            policy if policy is not None and util is not None and util < policy.threshold else None
        )

    def running(self, job: WorkloadJob) -> bool:
        """``job``'s gang runs: read it from now on when it is idle; whether it is."""
        policy = self.idle(job)
        if policy is not None and job.gpu_util is not None:
            self._read[job.name] = (job.gpu_util, policy)
        return policy is not None

    def paused(self, name: str) -> None:
        """Job ``name`` does not run now (its readings stop, and go stale)."""
        self._read.pop(name, None)

    def ended(self, name: str) -> None:
        """Job ``name`` ended: nothing more is known of it."""
        self._read.pop(name, None)
        self.watch.forget(name)

    def read(self, now: float) -> list[IdleVerdict]:
        """Read every running idle job at ``now``; the verdicts that follow."""
        for name in sorted(self._read):
            util, policy = self._read[name]
            self.watch.observe(name, util, now, policy)
        return self.watch.verdicts(now)

    def next_read(self, now: float) -> float | None:
        """When to read next (a whole multiple of ``every`` after ``now``), None when no
        idle job runs."""
        if not self._read:
            return None
        return (math.floor(now / self.every) + 1) * self.every

    def judged(
        self, verdict: IdleVerdict, *, stopped: bool, freed: float, remaining: float
    ) -> None:
        """Count what came of ``verdict``: its job ``stopped`` for good, or shrunk when
        it gave up ``freed`` GPUs; either way those GPUs for the ``remaining`` seconds
        it would have run."""
        if verdict.action is IdleAction.MARK:
            self.stats.marked.add(verdict.job)
            return
        if stopped:
            self.stats.stopped.add(verdict.job)
        elif freed > 0:
            self.stats.shrunk.add(verdict.job)
        self.stats.returned += max(freed, 0.0) * max(remaining, 0.0)
