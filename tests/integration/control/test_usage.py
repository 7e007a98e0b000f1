"""Accounting through the real server and real processes: a preemption, an elastic
shrink and a restart of the server, then every allocation of the ledger checked to the
microsecond against the lifecycle's own records (its effects, captured as the
controller records them, and the events and task rows it wrote), and the totals."""

from __future__ import annotations

import csv
import io
import json
import os
import signal
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager, suppress
from pathlib import Path

import pytest

from phalanx.control.controllers.core import Core
from phalanx.control.server import Server, ServerSettings
from phalanx.control.store import usage as ledger
from phalanx.domain.job import TaskPhase
from phalanx.engine.lifecycle import TERMINAL, Effect, JobChanged, TaskChanged
from phalanx.executors.local import LocalExecutor
from tests.integration.control import serving as serving_module
from tests.integration.control.serving import CLUSTER, FAST, Api, database_url, role, wait_for
from tests.integration.control.test_cli import ok, phalanx

ON = {TaskPhase.BOUND, TaskPhase.RUNNING, TaskPhase.RELEASING}
OFF = {TaskPhase.PENDING, TaskPhase.SUCCEEDED, TaskPhase.FAILED}


@pytest.fixture
def effects(monkeypatch: pytest.MonkeyPatch) -> list[Effect]:
    """Every task and job change the lifecycle says, as the controllers record them."""
    seen: list[Effect] = []
    record = Core.record

    def recording(core: Core, said: Iterable[Effect]) -> None:
        said = list(said)
        seen.extend(e for e in said if isinstance(e, TaskChanged | JobChanged))
        record(core, said)

    monkeypatch.setattr(Core, "record", recording)
    return seen


@contextmanager
def serving(settings: ServerSettings, *, kill: bool) -> Iterator[Server]:
    """A started server; stopped after (its tasks killed too when ``kill``)."""
    server = Server(settings)
    server.start()
    try:
        yield server
    except BaseException:
        kill = True  # a failed test leaves no task behind
        raise
    finally:
        while serving_module._CLIENTS:
            serving_module._CLIENTS.pop().close()
        executor = server.controller.core.executor
        server.stop()
        if kill and isinstance(executor, LocalExecutor):
            for task in executor.running():
                with suppress(ProcessLookupError):
                    os.killpg(task.pid, signal.SIGKILL)
            executor.close()


def expected(seen: list[Effect]) -> list[tuple[str, str, float, float | None]]:
    """The allocations the lifecycle's effects say: from each bind to the task's leaving
    its node (or its job's end), by start."""
    held: dict[tuple[str, str], float] = {}
    out = []
    for effect in seen:
        if isinstance(effect, TaskChanged):
            key = (effect.job, effect.task)
            if effect.phase is TaskPhase.BOUND:
                held[key] = effect.time
            elif effect.phase in OFF and effect.previous in ON and key in held:
                out.append((*key, held.pop(key), effect.time))
        elif effect.phase in TERMINAL:
            for key in [k for k in held if k[0] == effect.job]:
                out.append((*key, held.pop(key), effect.time))
    out += [(*key, start, None) for key, start in held.items()]
    return sorted(out, key=lambda a: (a[2], a[0], a[1]))


def test_the_ledger_is_the_lifecycles_record_across_preemption_shrink_and_restart(
    tmp_path: Path, effects: list[Effect]
) -> None:
    (tmp_path / "cluster.yaml").write_text(CLUSTER)
    settings = ServerSettings(
        data_dir=tmp_path / "data",
        db_url=database_url(tmp_path),
        port=0,
        cluster=tmp_path / "cluster.yaml",
        timing=FAST,
        shared_identity=True,
    )
    elastic = role(replicas=2, command="sleep 600")
    elastic["elastic"] = {"minReplicas": 1, "maxReplicas": 2}
    with serving(settings, kill=False) as server:
        admin = Api(server.url, server.admin_token or "")
        admin.queue("team")
        alice, bob = admin.user("alice"), admin.user("bob")
        alice.submit("el", "team", elastic)
        wait_for(lambda: _phases(alice, "el") == ["Running", "Running"], "el running")
        alice.post("/api/v1/jobs/el/scale", {"replicas": 1}, expect=200)
        wait_for(lambda: len(_phases(alice, "el")) == 1, "el shrunk")
        alice.submit("low", "team", role(replicas=2, command="sleep 600", gpu=4), priority=1)
        wait_for(lambda: _phases(alice, "low") == ["Running", "Running"], "low running")
        bob.submit("high", "team", role(replicas=2, command="sleep 1", gpu=4), priority=100)
        bob.wait_phase("high", "Succeeded")
        wait_for(lambda: _phases(alice, "low") == ["Running", "Running"], "low running again")
        tokens = (admin.token, alice.token, bob.token)
    restarted_at = effects[-1].time if effects else 0.0
    with serving(settings, kill=True) as server:
        admin, alice, bob = (Api(server.url, token) for token in tokens)
        assert _phases(alice, "low") == ["Running", "Running"]  # taken back, not restarted
        for job in ("low", "el"):
            alice.post(f"/api/v1/jobs/{job}/cancel", expect=200)
            alice.wait_phase(job, "Cancelled")
        with server.db.session() as session:
            found = ledger.overlapping(session)
        said = expected(effects)
        assert [(a.job, a.task, a.start, a.end) for a in found] == said
        _check_reasons(found, restarted_at)
        _check_against_stored_records(admin, found)
        _check_report(admin, alice, bob, found)
        _check_cli(server, admin.token, found)


def _phases(api: Api, job: str) -> list[str]:
    return [t["phase"] for t in api.get(f"/api/v1/jobs/{job}/tasks")["items"]]


def _check_reasons(found: list[ledger.Allocation], restarted_at: float) -> None:
    by_job: dict[str, list[ledger.Allocation]] = {}
    for allocation in found:
        by_job.setdefault(allocation.job, []).append(allocation)
    assert {a.ended_by for a in by_job["el"]} >= {"shrink", "cancel"}
    assert any(a.ended_by == "preempt" for a in by_job["low"])  # high evicted it
    # the low job's last placement spans the restart in one allocation each
    spanning = [a for a in by_job["low"] if a.start < restarted_at < (a.end or 0)]
    assert len(spanning) == 2 and {a.ended_by for a in spanning} == {"cancel"}
    assert [(a.ended_by, a.resources["gpu"]) for a in by_job["high"]] == [("Succeeded", 4.0)] * 2
    assert all(a.elastic for a in by_job["el"]) and not any(a.elastic for a in by_job["low"])


def _check_against_stored_records(admin: Api, found: list[ledger.Allocation]) -> None:
    """Each start is the time of a Placed event of its job; a task that succeeded
    ended when its task row says."""
    for job in ("el", "low", "high"):
        placed = {
            e["time"] for e in admin.get(f"/api/v1/jobs/{job}/events") if e["kind"] == "Placed"
        }
        assert {a.start for a in found if a.job == job} <= placed
    finished = {t["name"]: t["finished_at"] for t in admin.get("/api/v1/jobs/high/tasks")["items"]}
    assert {a.task: a.end for a in found if a.job == "high"} == finished


def _hours(
    found: Iterable[ledger.Allocation], amount: Callable[[ledger.Allocation], float]
) -> float:
    return sum(amount(a) * ((a.end or 0.0) - a.start) / 3600 for a in found)


def _check_report(admin: Api, alice: Api, bob: Api, found: list[ledger.Allocation]) -> None:
    report = admin.get("/api/v1/usage", by="user")
    gpu = _hours(found, lambda a: a.resources.get("gpu", 0.0))
    cpu = _hours(found, lambda a: a.resources.get("cpu", 0.0) / 1000)
    assert report["total"]["gpu_hours"] == pytest.approx(gpu, rel=1e-12)
    assert report["total"]["cpu_hours"] == pytest.approx(cpu, rel=1e-12)
    assert [row["key"] for row in report["items"]] == ["alice", "bob"]
    assert report["total"]["allocations"] == len(found)
    # a user sees their own usage only
    mine = bob.get("/api/v1/usage")
    assert [row["key"] for row in mine["items"]] == ["high"] and mine["user"] == "bob"
    refused = bob.get("/api/v1/usage", expect=403, user="alice")
    assert refused["field"] == "user"
    bad = alice.get("/api/v1/usage", expect=422, since="yesterday")
    assert bad["field"] == "since" and "7d" in bad["fix"]


def _check_cli(server: Server, token: str, found: list[ledger.Allocation]) -> None:
    rows = list(
        csv.DictReader(
            io.StringIO(ok(phalanx(server, "usage", "--by", "queue", "-o", "csv", token=token)))
        )
    )
    assert [row["key"] for row in rows] == ["team", "total"]
    assert float(rows[-1]["gpu_hours"]) == pytest.approx(
        _hours(found, lambda a: a.resources.get("gpu", 0.0)), abs=1e-6
    )
    view = json.loads(
        ok(
            phalanx(
                server, "usage", "--by", "allocation", "--since", "1d", "-o", "json", token=token
            )
        )
    )
    assert len(view["items"]) == len(found)
    assert "usage by job" in ok(phalanx(server, "usage", token=token))
