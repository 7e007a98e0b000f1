"""Idle GPUs in the simulator: a hand-made trace's recorded utilisation replayed through
the lifecycle's one rule. A queue with ``idleGpus: {action: stop}`` stops the idle job
and its GPUs go to a waiting one; the same trace with ``action: mark`` only marks it."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

from phalanx.domain.job import Elastic, Job, Role
from phalanx.domain.queue import IdleAction, IdlePolicy, Queue
from phalanx.engine import default_config
from phalanx.sim.idle import IdleReplay
from phalanx.sim.runner import Simulation
from phalanx.sim.traces import load_jsonl
from phalanx.sim.workload import Workload, WorkloadJob
from phalanx.spec import QueueDocument, load_documents
from tests.builders import make_node, res

HOUR = 3600.0


def _trace(tmp_path: Path, action: str) -> tuple[Workload, list[Queue]]:
    """A notebook holding 8 GPUs at 1% for 10 hours, then a training job of 8 GPUs at
    90% that waits for them, both in queue nlp (idleGpus from its parent, team-a)."""
    lines = [
        {"name": "notebook", "submitTime": 0, "duration": 10 * HOUR, "queue": "nlp",
         "gpuUtil": 1, "roles": [{"name": "w", "replicas": 1, "resources": {"gpu": 8}}]},
        {"name": "train", "submitTime": 60, "duration": HOUR, "queue": "nlp",
         "gpuUtil": 90, "roles": [{"name": "w", "replicas": 1, "resources": {"gpu": 8}}]},
    ]  # fmt: skip
    trace = tmp_path / "idle.jsonl"
    trace.write_text("".join(json.dumps(line) + "\n" for line in lines))
    queues = tmp_path / "queues.yaml"
    queues.write_text(
        "apiVersion: phalanx/v1\nkind: Queue\nmetadata: {name: team-a}\n"
        f"spec: {{idleGpus: {{action: {action}}}}}\n---\n"  # 5% for 30m: the defaults
        "apiVersion: phalanx/v1\nkind: Queue\nmetadata: {name: nlp}\nspec: {parent: team-a}\n"
    )
    documents = load_documents(queues.read_text())
    return load_jsonl(trace), [d.to_domain() for d in documents if isinstance(d, QueueDocument)]


def _run(
    workload: Workload, queues: list[Queue]
) -> tuple[list[dict[str, object]], dict[str, object]]:
    out = io.StringIO()
    sim = Simulation([make_node("n0")], workload, default_config(), queues=queues, events_out=out)
    metrics = sim.run()
    rows = [json.loads(line) for line in out.getvalue().splitlines()]
    return rows, metrics.summary(sim_wall_s=0.0)


def _at(rows: list[dict[str, object]], ev: str, job: str) -> list[float]:
    return [float(r["t"]) for r in rows if r["ev"] == ev and r["job"] == job]  # type: ignore[arg-type]


def test_stop_frees_the_idle_jobs_gpus_for_the_waiting_one(tmp_path: Path) -> None:
    rows, summary = _run(*_trace(tmp_path, "stop"))

    (idle,) = [r for r in rows if r["ev"] == "Idle"]
    assert idle["job"] == "notebook" and idle["message"] == (
        "its GPUs were below 5% utilisation for 30m (queue team-a's idleGpus): stopped"
    )
    (failed,) = _at(rows, "Failed", "notebook")
    assert HOUR / 2 <= failed <= HOUR / 2 + 60.0  # a reading a minute (30m / 30)
    (placed,) = _at(rows, "Placed", "train")
    assert failed <= placed <= failed + 2.0  # the next session after the release
    assert _at(rows, "Succeeded", "train") == [pytest.approx(placed + HOUR)]
    assert (summary["idle_marked"], summary["idle_stopped"], summary["idle_shrunk"]) == (0, 1, 0)
    assert summary["idle_read_every_s"] == 60.0
    (start,) = _at(rows, "Placed", "notebook")
    held = failed - start  # it held its 8 GPUs idle from its start to its stop
    assert summary["idle_gpu_hours"] == pytest.approx(8 * held / HOUR, abs=1e-3)
    assert summary["idle_gpu_hours_returned"] == pytest.approx(8 * (10 - held / HOUR), abs=1e-3)
    assert summary["failed"] == 1


def test_mark_only_marks_and_the_waiting_job_waits(tmp_path: Path) -> None:
    rows, summary = _run(*_trace(tmp_path, "mark"))

    (idle,) = [r for r in rows if r["ev"] == "Idle"]
    assert str(idle["message"]).endswith(
        "(queue team-a's idleGpus): marked idle; fix: put its "
        "GPUs to work, or end it to free them for others"
    )
    assert _at(rows, "Succeeded", "notebook") == [pytest.approx(10 * HOUR, abs=1.0)]
    assert _at(rows, "Placed", "train")[0] >= 10 * HOUR
    assert (
        summary["idle_marked"],
        summary["idle_stopped"],
        summary["idle_gpu_hours_returned"],
    ) == (1, 0, 0.0)
    assert summary["idle_gpu_hours"] == pytest.approx(80.0, abs=0.01)


def test_without_idle_policies_the_summary_has_no_idle_figures(tmp_path: Path) -> None:
    workload, _ = _trace(tmp_path, "stop")
    rows, summary = _run(workload, [Queue(name="nlp")])

    assert not any(key.startswith("idle_") for key in summary)
    assert not [r for r in rows if r["ev"] == "Idle"]


def test_an_idle_elastic_job_is_shrunk_to_its_minimum_then_stopped() -> None:
    role = Role(
        name="w",
        replicas=4,
        resources=res(1, 1, 2),
        elastic=Elastic(min_replicas=1, max_replicas=4, interval=1e9),
    )
    job = Job(name="e", queue="nlp", roles=(role,), user="u")
    workload = Workload(jobs=(WorkloadJob(job=job, duration=10 * HOUR, gpu_util=0.0),))
    policy = IdlePolicy(threshold=5.0, window=HOUR, action=IdleAction.STOP)
    config = default_config()
    out = io.StringIO()
    queues = [Queue(name="nlp", idle_gpus=policy)]
    sim = Simulation([make_node("n0")], workload, config, queues=queues, events_out=out)
    summary = sim.run().summary(sim_wall_s=0.0)

    messages = [json.loads(line) for line in out.getvalue().splitlines()]
    idle = [str(r["message"]) for r in messages if r["ev"] == "Idle"]
    assert [m.rsplit(": ", 1)[-1] for m in idle] == ["shrunk to its minimum of 1", "stopped"]
    assert (summary["idle_shrunk"], summary["idle_stopped"]) == (1, 1)
    assert summary["idle_read_every_s"] == 60.0  # 1h / 30 is 120 s: at most a minute


def test_the_reading_interval_is_a_thirtieth_of_the_shortest_window_within_5_to_60_s() -> None:
    def every(*windows: float) -> float | None:
        queues = [
            Queue(name=f"q{i}", idle_gpus=IdlePolicy(threshold=5.0, window=w))
            for i, w in enumerate(windows)
        ]
        replay = IdleReplay.of(queues)
        return None if replay is None else replay.every

    assert every(1800.0) == 60.0
    assert every(1800.0, 600.0) == 20.0
    assert every(60.0) == 5.0
    assert every() is None
    assert IdleReplay.of([Queue(name="q", idle_gpus=IdlePolicy(threshold=5.0, window=60.0))], 1.0)
