"""The CLI's drawing helpers and its error line, without a server."""

from __future__ import annotations

import pytest
import typer
from rich.console import Console

from phalanx.cli import remote, render
from phalanx.client import ClientError, GpuView, JobSummaryView, NodeView, TaskView
from phalanx.domain.errors import DocumentError, InvalidInput


def text_of(renderable: object, width: int = 200) -> str:
    console = Console(width=width, record=True, color_system=None)
    console.print(renderable)
    return console.export_text()


@pytest.mark.parametrize(
    ("seconds", "shown"), [(0, "0s"), (59, "59s"), (61, "1m"), (7200, "2h"), (3 * 86400, "3d")]
)
def test_age(seconds: float, shown: str) -> None:
    assert render.age(1000.0, 1000.0 + seconds) == shown
    assert render.age(None, 5.0) == "-"


def test_amounts_read_like_documents() -> None:
    assert render.amount("cpu", 8000) == "8"
    assert render.amount("cpu", 500) == "500m"
    assert render.amount("memory", 32 * 2**30) == "32Gi"
    assert render.amount("gpu", 0.5) == "0.5"
    assert render.amount("gpu", None) == "-"


def test_bars_fill_by_share_and_never_overflow() -> None:
    assert render.bar(2, 4, width=4).plain == "[██░░]"
    assert render.bar(9, 4, width=4).plain == "[████]"
    assert render.bar(1, 0, width=4).plain == "[░░░░]"
    assert render.cards([0.0, 0.5, 1.0]).plain == "·▄█"


def test_the_jobs_table_counts_running_tasks_and_held_gpus() -> None:
    requests = {"cpu": 4000.0, "memory": 2.0 * 2**30, "gpu": 2.0}
    job = JobSummaryView(
        name="j",
        queue="q",
        user="u",
        phase="Running",
        created_at=0.0,
        requests=requests,
        task_counts={"Running": 1, "Pending": 1},
        allocated={"cpu": 2000.0, "gpu": 1.0},
        nodes=["n0"],
    )
    text = text_of(render.jobs_table([job], now=90.0, wide=True))
    assert "1/2" in text and " 1 " in text and "1m" in text and "n0" in text
    assert "cpu=4, gpu=2, memory=2Gi" in text
    assert render.task_counts(job) == "1 Pending, 1 Running"


def test_the_jobs_table_shows_a_waiting_jobs_place_in_its_queues_line() -> None:
    def job(name: str, phase: str, position: int | None) -> JobSummaryView:
        return JobSummaryView(
            name=name, queue="q", user="u", phase=phase, created_at=0.0, queue_position=position
        )

    text = text_of(render.jobs_table([job("a", "Running", None), job("b", "Queued", 2)], 0.0))
    header, running, waiting = text.splitlines()[:3]
    assert header.split()[3:5] == ["PHASE", "POSITION"]
    assert running.split()[3:5] == ["Running", "-"]
    assert waiting.split()[3:5] == ["Queued", "2"]


def test_an_ended_job_counts_its_succeeded_tasks_and_a_retry_says_so() -> None:
    def job(phase: str, counts: dict[str, int], **more: object) -> JobSummaryView:
        return JobSummaryView.model_validate(
            {"name": "j", "queue": "q", "user": "u", "phase": phase, "created_at": 0.0}
            | {"task_counts": counts, **more}
        )

    # A finished gang reads as done, not as none running (kubectl's COMPLETIONS).
    assert render.job_tasks(job("Succeeded", {"Succeeded": 2})) == "2/2"
    assert render.job_tasks(job("Failed", {"Failed": 1, "Succeeded": 1})) == "1/2"
    assert render.job_tasks(job("Running", {"Running": 1, "Pending": 1})) == "1/2"
    # Waiting out a retry: the phase says why; the attempt is numbered as the log's header.
    retrying = job("Pending", {"Pending": 2}, reason="Retrying", attempts=1)
    row = text_of(render.jobs_table([retrying], 0.0, wide=True)).splitlines()[1]
    assert "Pending (Retrying)" in row and "2 (1 retry)" in row
    assert render.attempt(job("Running", {})) == "1"
    assert render.attempt(job("Running", {}, attempts=2)) == "3 (2 retries)"


def test_the_tasks_table_shows_each_task() -> None:
    tasks = [
        TaskView(name="j-w-0", role="w", index=0, phase="Running", node="n0", gpus=[0, 1]),
        TaskView(name="j-w-1", role="w", index=1, phase="Failed", exit_code=3),
    ]
    lines = text_of(render.tasks_table(tasks)).splitlines()
    assert lines[0].split() == ["TASK", "ROLE", "PHASE", "NODE", "GPUS", "EXIT"]
    assert lines[1].split() == ["j-w-0", "w", "Running", "n0", "0,1", "-"]
    assert lines[2].split() == ["j-w-1", "w", "Failed", "-", "-", "3"]


def test_the_nodes_table_shows_status_and_cards() -> None:
    node = NodeView(
        name="n0",
        capacity={"cpu": 8000, "memory": 2**35, "gpu": 2},
        allocated={"cpu": 1000, "memory": 2**30, "gpu": 1},
        gpus=[GpuView(index=0, used=1.0), GpuView(index=1, used=0.0)],
        cordoned=True,
    )
    text = text_of(render.nodes_table([node]))
    assert "Cordoned" in text and "1/2" in text and "█·" in text and "1/8" in text
    assert "ADDRESS" not in text


def test_the_wide_nodes_table_shows_each_nodes_address() -> None:
    declared = NodeView(name="n0", address="10.0.0.7", capacity={}, allocated={})
    undeclared = NodeView(name="n1", capacity={}, allocated={})
    lines = text_of(render.nodes_table([declared, undeclared], wide=True)).splitlines()
    assert "ADDRESS" in lines[0]
    assert "10.0.0.7" in lines[1] and "10.0.0.7" not in lines[2]


def test_the_error_line_adds_field_and_fix_once(capsys: pytest.CaptureFixture[str]) -> None:
    error = ClientError("no queue named 'x'", status=404, field="name", fix="list queues")
    with pytest.raises(typer.Exit) as exit_:
        remote.fail(error)
    assert exit_.value.exit_code == 1
    assert capsys.readouterr().err == "error: no queue named 'x'; field: name; fix: list queues\n"

    located = DocumentError("f.yaml document 1 (Job j), line 9: spec.x: bad; fix: do y")
    located.field, located.fix = "spec.x", "do y"
    assert remote.describe(located) == "f.yaml document 1 (Job j), line 9: spec.x: bad; fix: do y"
    assert remote.describe(InvalidInput("bad", field="--port", fix="another")) == (
        "--port: bad; fix: another"
    )


def test_several_problems_keep_one_error_line(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(typer.Exit):
        remote.fail(DocumentError("first problem\nsecond problem"))
    assert capsys.readouterr().err == "error: first problem\n  second problem\n"


def test_shared_gpus_count_as_the_share_they_hold_in_every_column() -> None:
    """Two tasks of ``gpu: 0.5`` on one card hold 1 GPU: GPUS, REQUESTS and the node's
    GPUS agree (they were once counted as 2 cards)."""
    job = JobSummaryView(
        name="half",
        queue="q",
        user="u",
        phase="Running",
        created_at=0.0,
        requests={"gpu": 1.0},
        allocated={"gpu": 1.0},
        task_counts={"Running": 2},
    )
    row = text_of(render.jobs_table([job], 0.0, wide=True)).splitlines()[1].split()
    assert row[6] == "1" and "gpu=1" in row  # GPUS, REQUESTS
    node = NodeView(
        name="n",
        capacity={"gpu": 4.0},
        allocated={"gpu": 1.0},
        gpus=[GpuView(index=0, used=1.0, tasks=["half-w-0", "half-w-1"])]
        + [GpuView(index=i, used=0.0) for i in (1, 2, 3)],
        tasks=2,
    )
    assert text_of(render.nodes_table([node])).splitlines()[1].split()[2] == "1/4"
