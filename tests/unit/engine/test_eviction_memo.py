"""Eviction's memo of failed searches serves preemptors that differ only in their place
in line, where the plugins judge each victim on its own (Tiresias' within-level order
gives every waiting job its own place)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from phalanx.domain.job import JobPhase
from phalanx.engine import Snapshot
from phalanx.engine.cycle import run_cycle
from phalanx.engine.placement.eviction import gangs
from phalanx.policies import load_policy
from tests.builders import make_job, make_nodes, make_queue

NOW = 100_000.0
WAITING = 5


def _snapshot() -> Snapshot:
    # two 8-GPU nodes, each held by a job past las' 16 GPU-hour level; behind them five
    # first-level gangs of three 8-GPU tasks: each may evict both, none can fit
    running = [
        make_job(f"run-{i}", gpus=8, running_on=[f"n{i}"], started=0.0, created=float(i))
        for i in range(2)
    ]
    waiting = [
        make_job(f"wait-{i}", gpus=8, replicas=3, created=NOW - 100 + i, phase=JobPhase.PENDING)
        for i in range(WAITING)
    ]
    return Snapshot.build(
        nodes=make_nodes(2, cpu=64, memory_gib=256),
        queues=[make_queue("default")],
        jobs=[*running, *waiting],
    )


def test_preemptors_alike_but_in_line_search_once(monkeypatch: pytest.MonkeyPatch) -> None:
    searches: list[str] = []
    search: Callable[..., bool] = gangs._evict_for_tasks

    def counted(session: Any, job: Any, *args: Any) -> bool:
        searches.append(job.name)
        return search(session, job, *args)

    monkeypatch.setattr(gangs, "_evict_for_tasks", counted)
    decisions = run_cycle(_snapshot(), load_policy("tiresias-pollux").config, now=NOW)

    assert searches == ["wait-0"]  # the others are answered by the memo
    assert not decisions.evictions  # all or nothing: no gang of three fits on two nodes
    assert {u.job for u in decisions.unschedulable} >= {f"wait-{i}" for i in range(WAITING)}
