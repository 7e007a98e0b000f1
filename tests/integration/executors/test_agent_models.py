"""A Ray node's agent and the model versions its tasks read, in-process (no Ray: the
actor's class itself, its tasks real processes): a start that reads a version not yet
on the node returns at once and starts once the version is copied out of the store,
reading it at ``PHALANX_MODEL_PATH``; a version the store lacks fails the start naming
it and the store; a start stopped while its version is copied never runs; the node's
copies are collected only when no copy is under way; a model a task wrote is taken
into the store on the node."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from phalanx.engine.decisions import Evict
from phalanx.executors.base import TaskEvent, TaskEventKind
from phalanx.executors.gangs import PlannedStart
from phalanx.executors.launch import TaskLaunch
from phalanx.executors.ray.agent import AgentSettings, NodeAgent, key_digest
from phalanx.executors.rendezvous import Placement
from phalanx.models.manifest import Manifest
from phalanx.models.store import ModelStore
from phalanx.tenantfs import Limits, Place
from tests.integration.control.serving import wait_for

KEY = "k" * 64
NODE = "ray-127-0-0-1"
MISSING = "sha256:" + "0" * 64


@pytest.fixture
def store(tmp_path: Path) -> ModelStore:
    return ModelStore(str(tmp_path / "store"))


@pytest.fixture
def version(store: ModelStore, tmp_path: Path) -> Manifest:
    written = tmp_path / "written" / "model"
    written.mkdir(parents=True)
    (written / "config").write_text("seven")
    return store.intake(
        Place(tmp_path / "written", "model"), reader=None, limits=Limits(max_bytes=1 << 20)
    )


@pytest.fixture
def agent(tmp_path: Path, store: ModelStore) -> Iterator[NodeAgent]:
    settings = AgentSettings(
        node=NODE,
        address="127.0.0.1",
        data_dir=tmp_path / "node" / "data",
        tasks_dir=tmp_path / "node" / "tasks",
        models=store.root,
    )
    made = NodeAgent(settings, key_digest(KEY))
    yield made
    made.stop(KEY, [Evict(job=t.job, task=t.task, node=NODE, action="test", by="test", reason="end") for t in made._executor.running()], time.time(), 0.0)  # fmt: skip
    made.close(KEY)


def start(task: str, digest: str | None, command: str) -> PlannedStart:
    launch = TaskLaunch(
        job="job", task=task, role="w", index=0, node=NODE, command=command, model_digest=digest
    )
    return PlannedStart(
        launch=launch,
        placement=Placement(role="w", index=0, node=NODE, host="127.0.0.1", port=40000),
        env={},
    )


def events_of(agent: NodeAgent, task: str, *kinds: TaskEventKind) -> list[TaskEvent]:
    seen: list[TaskEvent] = []

    def found() -> bool:
        seen.extend(e for e in agent.events(KEY, 0.2).events if e.task == task)
        return any(e.kind in kinds for e in seen)

    wait_for(found, f"{task}: {kinds}")
    return seen


def test_a_start_reads_its_version_copied_out_on_the_node(
    agent: NodeAgent, version: Manifest, tmp_path: Path
) -> None:
    agent.launch(KEY, [start("reads", version.digest, 'cat "$PHALANX_MODEL_PATH/config"')], 0.0)
    (ended,) = [
        e for e in events_of(agent, "reads", TaskEventKind.EXITED) if e.kind is TaskEventKind.EXITED
    ]
    assert ended.exit_code == 0
    assert (tmp_path / "node" / "tasks" / "job" / "reads" / "stdout.log").read_text() == "seven"
    copied = tmp_path / "node" / "models" / version.digest.removeprefix("sha256:")
    assert (copied / "config").read_text() == "seven"
    assert agent.collect_models(KEY, []) == 1 and not copied.exists()


def test_a_version_the_store_lacks_fails_the_start_naming_it(agent: NodeAgent) -> None:
    agent.launch(KEY, [start("lacks", MISSING, "true")], 0.0)
    (failed,) = events_of(agent, "lacks", TaskEventKind.FAILED_TO_START)
    assert MISSING in failed.message and f"node {NODE}" in failed.message
    assert "holds no version" in failed.message and not failed.retriable


def test_a_start_stopped_while_its_version_is_copied_never_runs(
    agent: NodeAgent, version: Manifest, monkeypatch: pytest.MonkeyPatch
) -> None:
    release = threading.Event()
    copying = threading.Event()
    store = agent._models
    assert store is not None
    materialize = store.materialize

    def slow(digest: str, dest: Path) -> Manifest:
        copying.set()
        release.wait(30)
        return materialize(digest, dest)

    monkeypatch.setattr(store, "materialize", slow)
    agent.launch(KEY, [start("stopped", version.digest, "true")], 0.0)
    assert copying.wait(30)
    assert agent.collect_models(KEY, []) is None  # a copy is under way: nothing removed
    agent.stop(KEY, [Evict(job="job", task="stopped", node=NODE, action="cancel", by="job", reason="asked")], time.time(), 5.0)  # fmt: skip
    (ended,) = events_of(agent, "stopped", TaskEventKind.EXITED)
    assert ended.stopped and "stopped before it started" in ended.message
    release.set()
    agent._fetches.shutdown(wait=True)  # the copy finished, and what followed it
    assert agent._executor.running() == []
    assert not [e for e in agent.events(KEY, 0.0).events if e.task == "stopped"]
    assert agent.collect_models(KEY, [version.digest]) == 0  # kept: the copy stays


def test_a_model_written_on_the_node_is_taken_into_the_store(
    agent: NodeAgent, store: ModelStore
) -> None:
    script = "mkdir -p out && printf weights > out/w"
    agent.launch(KEY, [start("writes", None, script)], 0.0)
    (ended,) = [
        e
        for e in events_of(agent, "writes", TaskEventKind.EXITED)
        if e.kind is TaskEventKind.EXITED
    ]
    assert ended.exit_code == 0
    manifest = agent.intake(KEY, "job", "writes", "out", None, Limits(max_bytes=1 << 20))
    assert [(f.path, f.size) for f in manifest.files] == [("w", 7)]
    assert store.manifest(manifest.digest) == manifest
