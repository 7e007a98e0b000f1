"""GPU telemetry on the controller's tick: readings in, broken cards out, idle jobs acted on.

``GpuTelemetry.tick`` takes the samples the executor's nodes took since the last tick
(``GpuSource``) and:

- keeps the latest reading of every card and every task's use of its cards, published
  whole as ``picture`` after each tick (the API, ``/metrics`` and the console read it
  without a lock);
- folds each job's use into windows of a minute (``telemetry.windows``) and writes
  each closed window into the store (``store.gpu_use``): ``describe job`` and the job
  page read them back;
- judges every card's health (``telemetry.health``): a card that fails a rule is
  cordoned by itself in the store (``store.cards``, source ``health``), so the engine
  gives it to no new task from this tick on, and each job with a task on it is told
  (event ``GpuUnhealthy``); an admin's uncordon clears the judgement, which starts
  afresh from the next readings;
- watches the jobs of queues with ``idleGpus`` (``engine.lifecycle.idle``): a job whose
  cards all sat below the queue's threshold for its window gets an event and the mark
  ``idle_since``, and where the queue says ``stop`` is stopped, or shrunk when elastic,
  through the one lifecycle (``idle.act_on``, as the simulator does).

A node without NVML says so once (``picture.absent``); nothing else happens for it. A
node's readings older than ``FORGET`` seconds (it stopped reporting: lost, or its agent
gone) leave the picture, so nothing shows or exports a reading that no longer holds.
"""

from __future__ import annotations

import logging
from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Final

from phalanx.control.controllers.core import Core
from phalanx.control.store import cards as stored_cards
from phalanx.control.store import gpu_use as stored_use
from phalanx.control.store.database import Database
from phalanx.domain.queue import Queue, idle_policy_of
from phalanx.engine.lifecycle.idle import STALE, IdleVerdict, IdleWatch, act_on
from phalanx.executors.base import GpuSource
from phalanx.telemetry.health import CardHealth, HealthRules
from phalanx.telemetry.readings import CardReading, NodeSample, TaskGpuUse
from phalanx.telemetry.windows import WINDOW, GpuUse, Windows

log = logging.getLogger(__name__)

#: The job event kinds it writes.
GPU_UNHEALTHY: Final = "GpuUnhealthy"
#: Seconds after which a node's latest reading no longer stands for its cards.
FORGET: Final = 120.0


@dataclass(frozen=True, slots=True, kw_only=True)
class GpuPicture:
    """The latest of everything, replaced whole after each tick.

    ``cards`` by node (the latest reading of each), ``read_at`` when each node read
    them, ``tasks`` each live task's node and latest use by (job, task), ``holders`` the tasks
    given each (node, card), ``owners`` each such job's (user, queue), ``absent`` why a
    node has no readings, ``idle_since`` the jobs marked idle, ``current`` each job's
    open window, ``cordoned`` the cards out of scheduling with their reason."""

    cards: Mapping[str, tuple[CardReading, ...]] = field(default_factory=dict)
    read_at: Mapping[str, float] = field(default_factory=dict)
    tasks: Mapping[tuple[str, str], tuple[str, TaskGpuUse]] = field(default_factory=dict)
    holders: Mapping[tuple[str, int], tuple[tuple[str, str], ...]] = field(default_factory=dict)
    owners: Mapping[str, tuple[str, str]] = field(default_factory=dict)
    absent: Mapping[str, str] = field(default_factory=dict)
    idle_since: Mapping[str, float] = field(default_factory=dict)
    current: Mapping[str, GpuUse] = field(default_factory=dict)
    cordoned: Mapping[tuple[str, int], stored_cards.CardCordon] = field(default_factory=dict)


class GpuTelemetry:
    """See the module docstring. Called on the controller's thread only."""

    def __init__(
        self, *, rules: HealthRules | None = None, window: float = WINDOW, stale: float = STALE
    ) -> None:
        self._rules = rules or HealthRules()
        self._health: dict[str, CardHealth] = {}
        self._windows = Windows(window)
        self._idle = IdleWatch(stale=stale)
        self._latest: dict[str, NodeSample] = {}
        self._absent: dict[str, str] = {}
        self._cordoned: dict[tuple[str, int], stored_cards.CardCordon] = {}
        self.picture = GpuPicture()

    def read_cordons(self, cordons: list[stored_cards.CardCordon]) -> None:
        """Take in the store's cordoned cards: a card no longer cordoned is judged afresh."""
        now = {(c.node, c.gpu): c for c in cordons}
        for node, gpu in set(self._cordoned) - set(now):
            health = self._health.get(node)
            if health is not None:
                health.clear(gpu)
        self._cordoned = now

    def tick(self, core: Core, db: Database) -> bool:
        """Take the new samples in and act on them; True when a card was cordoned (the
        caller reads the store's cordons into the engine's nodes)."""
        executor = core.executor
        if not isinstance(executor, GpuSource):
            return False
        samples = executor.gpu_samples()
        queues = {name: info.spec for name, info in core.state.snapshot.queues.items()}
        broken: list[tuple[NodeSample, CardReading, str]] = []
        for sample in samples:
            broken += self._take(core, sample, queues)
        cordoned = self._cordon(core, db, broken) if broken else False
        for node, sample in list(self._latest.items()):
            if core.now - sample.at > FORGET:
                del self._latest[node]
        self._act(core, self._idle.verdicts(core.now))
        self._settle(core, db)
        self._publish(core)
        return cordoned

    # -- readings -------------------------------------------------------------------------

    def _take(
        self, core: Core, sample: NodeSample, queues: Mapping[str, Queue]
    ) -> list[tuple[NodeSample, CardReading, str]]:
        """Keep one node's sample; the cards it newly finds broken, with why."""
        if sample.absent is not None:
            if sample.node not in self._absent:
                log.info("no GPU readings from %s: %s", sample.node, sample.absent)
            self._absent[sample.node] = sample.absent
            return []
        self._absent.pop(sample.node, None)
        self._latest[sample.node] = sample
        by_job: dict[str, list[TaskGpuUse]] = defaultdict(list)
        for use in sample.tasks:
            by_job[use.job].append(use)
        for job, uses in by_job.items():
            self._windows.add(job, sample.node, sample.at, uses)
            life = core.life.jobs.get(job)
            policy = None if life is None else idle_policy_of(life.job.queue, queues)
            if policy is not None:
                busiest = max(use.utilisation for use in uses)
                self._idle.observe(job, busiest, sample.at, policy)
        health = self._health.setdefault(sample.node, CardHealth(self._rules))
        broken = []
        for card in sample.cards:
            health.observe(card, sample.at)
            verdict = health.verdict(card.index)
            if verdict is not None and (sample.node, card.index) not in self._cordoned:
                broken.append((sample, card, verdict))
        return broken

    # -- acting ---------------------------------------------------------------------------

    def _cordon(
        self, core: Core, db: Database, broken: list[tuple[NodeSample, CardReading, str]]
    ) -> bool:
        """Cordon each broken card in the store and tell the jobs on it."""
        with db.write() as session:
            for sample, card, reason in broken:
                cordon = stored_cards.CardCordon(
                    node=sample.node,
                    gpu=card.index,
                    uuid=card.uuid,
                    reason=reason,
                    source="health",
                    since=sample.at,
                )
                if not stored_cards.cordon(session, cordon):  # an admin's, not read yet
                    self._cordoned[(cordon.node, cordon.gpu)] = (
                        stored_cards.cordon_of(session, cordon.node, cordon.gpu) or cordon
                    )
                    continue
                self._cordoned[(cordon.node, cordon.gpu)] = cordon
                log.warning("GPU %d of %s cordoned: %s", card.index, sample.node, reason)
                for use in sample.tasks:
                    rows = core.rows.get(use.job)
                    if card.index in use.gpus and rows is not None:
                        core.journal.event(
                            rows.id,
                            core.now,
                            GPU_UNHEALTHY,
                            f"{use.task} runs on GPU {card.index} of {sample.node}, which "
                            f"is taken out of scheduling: {reason}. The task goes on; stop "
                            "or drain it to move it to a sound card",
                        )
        return True

    def _act(self, core: Core, verdicts: list[IdleVerdict]) -> None:
        """Mark each idle job, and stop or shrink those whose queue says so (the one
        rule, ``idle.act_on``, which the lifecycle's events say)."""
        if verdicts:
            core.record(act_on(core.life, self._idle, verdicts, now=core.now))

    def _settle(self, core: Core, db: Database) -> None:
        """Close the windows of jobs that hold no card any more; store closed windows."""
        holding = {use.job for sample in self._latest.values() for use in sample.tasks}
        for job in self._windows.jobs() - holding:
            self._windows.close(job)
        for job in self._idle.watched():
            if job not in core.life.jobs:
                self._idle.forget(job)
        closed = [
            (rows.id, use)
            for job, use in self._windows.closed()
            if (rows := core.rows.get(job)) is not None
        ]
        if closed:
            with db.write() as session:
                stored_use.add(session, closed)

    def _publish(self, core: Core) -> None:
        tasks: dict[tuple[str, str], tuple[str, TaskGpuUse]] = {}
        holders: dict[tuple[str, int], list[tuple[str, str]]] = defaultdict(list)
        owners: dict[str, tuple[str, str]] = {}
        for node, sample in self._latest.items():
            for use in sample.tasks:
                tasks[(use.job, use.task)] = (node, use)
                for gpu in use.gpus:
                    holders[(node, gpu)].append((use.job, use.task))
                life = core.life.jobs.get(use.job)
                if life is not None:
                    owners[use.job] = (life.job.user, life.job.queue)
        self.picture = GpuPicture(
            cards={node: sample.cards for node, sample in self._latest.items()},
            read_at={node: sample.at for node, sample in self._latest.items()},
            tasks=tasks,
            holders={key: tuple(value) for key, value in holders.items()},
            owners=owners,
            absent=dict(self._absent),
            idle_since={
                job: since
                for job in self._idle.watched()
                if (since := self._idle.idle_since(job)) is not None
            },
            current={
                job: window
                for job in self._windows.jobs()
                if (window := self._windows.current(job)) is not None
            },
            cordoned=dict(self._cordoned),
        )
