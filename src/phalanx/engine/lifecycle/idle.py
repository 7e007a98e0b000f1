"""Idle GPUs: which running jobs hold cards they do not use, and the one rule for what
follows, which the control plane and the simulator both apply.

``IdleWatch`` is fed readings: per job, the utilisation (percent) of the busiest of its
tasks in one node's sample, the time of the sample, and the idle policy of the job's
queue (``phalanx.domain.queue.idle_policy_of``). A job's idle spell starts at a reading
below the policy's threshold and lasts while every later reading is below it too:

- a reading at or above the threshold ends the spell (any busy task of any node is
  enough: the job is idle only when all of them are);
- old data judges nothing: a gap of more than ``stale`` seconds between readings
  starts the spell anew at the next one, and ``verdicts`` drops the spell of a job not
  read within ``stale`` seconds of ``now`` (a node that stopped reporting, a job that
  stopped running). ``stale`` should be a few of the nodes' sample intervals;
- a change of the job's policy starts the spell anew (its readings were judged by the
  old threshold);
- a reading older than the job's latest counts only if it is busy (it ends the spell:
  the benefit of the doubt); one that is not a number is ignored.

Once the readings of a spell span the policy's window, ``verdicts`` gives one
``IdleVerdict`` for it, and never another for the same spell. ``act_on`` turns verdicts
into lifecycle calls: ``mark`` an ``Idle`` event only; ``stop`` ``Lifecycle.stop_idle``
(stopped and Failed, or an elastic job above its minimum shrunk to it, watched anew so
that another idle window at its minimum stops it). Nothing here reads a clock; the same
readings and ``now`` give the same verdicts, sorted by job name.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Final, assert_never

from phalanx.domain.errors import InvalidInput
from phalanx.domain.queue import IdleAction, IdlePolicy
from phalanx.engine.lifecycle.effects import Effect
from phalanx.engine.lifecycle.jobs import Ending
from phalanx.engine.lifecycle.reducer import Lifecycle

#: Seconds between two samples of a node's GPUs (the nodes' default).
NODE_SAMPLE_INTERVAL: Final = 5.0
#: Readings older than this many seconds judge nothing: four missed samples.
STALE: Final = 4 * NODE_SAMPLE_INTERVAL
#: Slack on the window, so that readings exactly a window apart span it despite rounding.
_EPSILON: Final = 1e-9


@dataclass(frozen=True, slots=True, kw_only=True)
class IdleVerdict:
    """Job ``job`` has been idle since ``since`` for its queue's whole window, and
    ``action`` is what its queue asks. ``message`` says what was found, as one clause a
    person can act on: ``its GPUs were below 5% utilisation for 30m (queue nlp's
    idleGpus)``; the lifecycle adds what came of it (``: stopped``, ``: shrunk to its
    minimum of 1``, ``: marked idle; fix: ...``)."""

    job: str
    action: IdleAction
    since: float
    message: str


@dataclass(slots=True, kw_only=True)
class _Spell:
    """What the watch knows of one job: its latest reading and its idle spell, if any."""

    policy: IdlePolicy
    last: float  # the time of the latest reading
    since: float | None = None  # the first reading of the spell; None: not idle now
    judged: bool = False  # a verdict was given for this spell


class IdleWatch:
    """Jobs' GPU readings, kept until each job is forgotten or its readings go stale;
    see the module docstring for the rules."""

    def __init__(self, *, stale: float = STALE) -> None:
        """``stale``: seconds after which a job's latest reading judges nothing."""
        if not 0 < stale < math.inf:
            raise InvalidInput(f"{stale!r} s is not a span of time", field="stale", fix="give > 0")
        self.stale = stale
        self._spells: dict[str, _Spell] = {}

    def observe(self, job: str, utilisation: float, at: float, policy: IdlePolicy) -> None:
        """A reading of job ``job`` at ``at``: ``utilisation`` percent on the busiest of
        its tasks on one node, judged by ``policy`` (its queue's)."""
        if not math.isfinite(utilisation):
            return
        busy = utilisation >= policy.threshold
        spell = self._spells.get(job)
        if spell is None:
            self._spells[job] = _Spell(policy=policy, last=at, since=None if busy else at)
            return
        if at < spell.last:  # late: only a busy reading changes anything
            if busy:
                spell.since, spell.judged = None, False
            return
        if busy:
            spell.since, spell.judged = None, False
        elif spell.since is None or at - spell.last > self.stale or policy != spell.policy:
            spell.since, spell.judged = at, False
        spell.policy, spell.last = policy, at

    def verdicts(self, now: float) -> list[IdleVerdict]:
        """A verdict for each job whose idle spell now spans its window and was not
        judged yet (sorted by job); jobs not read within ``stale`` of ``now`` are
        dropped instead."""
        found = []
        for job in sorted(self._spells):
            spell = self._spells[job]
            if now - spell.last > self.stale:
                del self._spells[job]
                continue
            policy, since = spell.policy, spell.since
            if since is None or spell.judged or spell.last - since < policy.window - _EPSILON:
                continue
            spell.judged = True
            owner = f"queue {policy.queue}'s idleGpus" if policy.queue else "idleGpus"
            message = f"its GPUs were {policy.said()} ({owner})"
            found.append(IdleVerdict(job=job, action=policy.action, since=since, message=message))
        return found

    def idle_since(self, job: str) -> float | None:
        """When the idle spell of ``job`` began, once a verdict was given for it (the
        job's visible mark); None while it is not judged idle."""
        spell = self._spells.get(job)
        return spell.since if spell is not None and spell.judged else None

    def restart(self, job: str, at: float) -> None:
        """Start ``job``'s idle spell anew at ``at`` (a shrunk job is judged again at its
        new size); nothing for a job that is not idle now."""
        spell = self._spells.get(job)
        if spell is not None and spell.since is not None:
            spell.since, spell.judged = max(at, spell.since), False

    def forget(self, job: str) -> None:
        """Drop everything known of ``job`` (it ended, or its queue has no policy now)."""
        self._spells.pop(job, None)

    def watched(self) -> list[str]:
        """The jobs with readings kept, sorted."""
        return sorted(self._spells)


def act_on(
    lifecycle: Lifecycle, watch: IdleWatch, verdicts: Iterable[IdleVerdict], *, now: float
) -> list[Effect]:
    """The effects of ``verdicts`` at ``now``, the one rule both drivers apply: ``mark``
    says an ``Idle`` event and changes nothing; ``stop`` stops the job for good (Failed,
    ``IdleGpus``), or shrinks an elastic job above its minimum to it. A stopped job is
    forgotten by ``watch``; a shrunk one is watched anew from ``now``."""
    effects: list[Effect] = []
    for verdict in verdicts:
        match verdict.action:
            case IdleAction.MARK:
                effects += lifecycle.mark_idle(verdict.job, verdict.message, now=now)
            case IdleAction.STOP:
                effects += lifecycle.stop_idle(verdict.job, verdict.message, now=now)
                life = lifecycle.jobs.get(verdict.job)
                if life is None or life.ending is Ending.IDLE:
                    watch.forget(verdict.job)
                else:
                    watch.restart(verdict.job, now)
            case _:
                assert_never(verdict.action)
    return effects
