"""Cron schedules of pipelines (``phalanx.control.controllers.schedules``) on a real SQLite
store with a given clock: which firings start runs, whose runs they are, the
concurrency policies, catching up after downtime, and never two runs for one firing."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import yaml

from phalanx.control.controllers.schedules import CATCH_UP, fire_due, latest_firing
from phalanx.control.store.database import Database
from phalanx.control.store.models import PipelineRow, RunRow
from phalanx.domain.errors import DocumentError
from phalanx.spec.loader import load_pipelines
from phalanx.spec.pipeline import CronSchedule, PipelineDocument
from phalanx.workflow import RunPhase

NIGHTLY = """\
apiVersion: phalanx/v1
kind: Pipeline
metadata: {name: nightly}
spec:
  params: {lr: 0.1}
  schedule: {cron: "*/5 * * * *", concurrencyPolicy: POLICY}
  defaults: {queue: wf, resources: {cpu: 1}}
  steps:
    train: {command: "true"}
"""


def at(text: str) -> float:
    """A UTC time of 2026-11-26, ``HH:MM:SS``."""
    return datetime.fromisoformat(f"2026-11-26T{text}+00:00").timestamp()


def register(db: Database, policy: str, when: float) -> None:
    document = PipelineDocument.model_validate(yaml.safe_load(NIGHTLY.replace("POLICY", policy)))
    with db.write() as session:
        row = PipelineRow(name="nightly", user="alice", document=document.to_dict())
        row.created_at = row.updated_at = row.scheduled_through = when
        session.add(row)


def fire(db: Database, now: float) -> list[str]:
    with db.write() as session:
        return fire_due(session, now)


def runs(db: Database) -> dict[str, Any]:
    with db.session() as session:
        return {
            r.id: (r.user, r.params, r.scheduled_at, r.phase, r.stop_requested)
            for r in session.query(RunRow)
        }


@pytest.fixture
def db(tmp_path: Path) -> Database:
    return Database.open(f"sqlite:///{tmp_path / 'db.sqlite'}")


def test_a_firing_starts_one_run_of_the_owner_with_the_defaults(db: Database) -> None:
    register(db, "allow", at("10:01:30"))
    assert fire(db, at("10:04:59")) == []  # nothing before the first firing, 10:05
    assert fire(db, at("10:05:02")) == ["nightly-202611261005"]
    assert runs(db) == {
        "nightly-202611261005": ("alice", {"lr": 0.1}, at("10:05:00"), "Pending", False)
    }
    assert fire(db, at("10:05:40")) == []  # that firing is handled
    # A restart that lost scheduled_through finds the run and starts no other.
    with db.write() as session:
        session.get(PipelineRow, "nightly").scheduled_through = at("10:04:00")  # type: ignore[union-attr]
    assert fire(db, at("10:05:50")) == [] and len(runs(db)) == 1
    # allow: the next firing starts another run beside the one still Pending.
    assert fire(db, at("10:10:01")) == ["nightly-202611261010"]


def test_skip_starts_nothing_while_a_scheduled_run_is_under_way(db: Database) -> None:
    register(db, "skip", at("10:00:00"))
    assert fire(db, at("10:05:01")) == ["nightly-202611261005"]
    assert fire(db, at("10:10:01")) == []  # still Pending
    with db.write() as session:
        session.get(RunRow, "nightly-202611261005").phase = RunPhase.SUCCEEDED.value  # type: ignore[union-attr]
    assert fire(db, at("10:15:01")) == ["nightly-202611261015"]


def test_replace_stops_the_runs_under_way_and_starts_the_new_one(db: Database) -> None:
    register(db, "replace", at("10:00:00"))
    fire(db, at("10:05:01"))
    assert fire(db, at("10:10:01")) == ["nightly-202611261010"]
    found = runs(db)
    assert found["nightly-202611261005"][4] is True  # asked to stop: its finally steps run
    assert found["nightly-202611261010"][4] is False


def test_after_downtime_only_the_latest_missed_firing_starts_a_run(
    db: Database, caplog: pytest.LogCaptureFixture
) -> None:
    register(db, "allow", at("10:00:00"))
    assert fire(db, at("11:02:00")) == ["nightly-202611261100"]
    assert "11 earlier firing(s) of its schedule skipped" in caplog.text  # 10:05 .. 10:55


def test_latest_firing_looks_back_no_further_than_the_catch_up_window() -> None:
    hourly = CronSchedule.parse("@hourly")
    now = at("10:30:00")
    assert latest_firing(hourly, now - 3 * CATCH_UP, now) == (at("10:00:00"), 23)
    assert latest_firing(hourly, at("10:00:00"), now) == (None, 0)  # (after, now]
    yearly = CronSchedule.parse("@yearly")
    assert latest_firing(yearly, now - 3 * CATCH_UP, now) == (None, 0)
    moment = datetime(2027, 1, 1, tzinfo=UTC).timestamp()
    assert latest_firing(yearly, moment - 60, moment + 60) == (moment, 0)


def test_a_schedule_needs_a_default_for_every_param() -> None:
    text = NIGHTLY.replace("POLICY", "allow").replace("{lr: 0.1}", "{lr: {type: float}}")
    with pytest.raises(DocumentError) as refused:
        load_pipelines(text)
    assert "spec.schedule: param lr has no default" in str(refused.value)
    assert "fix: give lr a default, or remove schedule" in str(refused.value)
