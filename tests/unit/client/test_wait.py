"""``Client.wait``: the phases asked for end it; a timeout and an ended job are errors
that name the job, its phase and the phases waited for."""

from __future__ import annotations

import httpx
import pytest

from phalanx.client import Client, ClientError, JobEnded, RunEnded, WaitTimeout
from phalanx.client._wait import wait_for_phase, wait_for_run
from phalanx.wire.views import JobView, RunView, StepView


def view(phase: str, reason: str = "") -> JobView:
    return JobView(name="j", queue="q", user="u", phase=phase, reason=reason, created_at=1.0)


def test_wait_returns_the_view_once_the_job_is_in_a_phase_asked_for() -> None:
    phases = iter(["Pending", "Queued", "Running", "Succeeded"])

    def handler(request: httpx.Request) -> httpx.Response:
        assert request.url.path == "/api/v1/jobs/j"
        return httpx.Response(200, json=view(next(phases)).model_dump(mode="json"))

    client = Client("http://phalanx.test", "phx_t", transport=httpx.MockTransport(handler))
    job = client.wait("j", phase=["running", "Succeeded"], timeout=10, interval=0.001)
    assert job.phase == "Running"


def test_a_timeout_names_the_job_its_phase_and_the_phases_waited_for() -> None:
    now = [0.0]
    slept: list[float] = []

    def sleep(seconds: float) -> None:
        slept.append(seconds)
        now[0] += seconds

    with pytest.raises(WaitTimeout) as raised:
        wait_for_phase(
            lambda: view("Pending", "Unschedulable"),
            "j",
            ("Succeeded", "Failed"),
            2.0,
            interval=0.5,
            clock=lambda: now[0],
            sleep=sleep,
        )
    error = raised.value
    assert (error.job, error.phase, error.wanted) == ("j", "Pending", ("Succeeded", "Failed"))
    assert str(error).startswith(
        "timed out after 2s waiting for job j to be Succeeded or Failed; "
        "it is Pending (Unschedulable)"
    )
    assert "phalanx describe job j" in str(error)
    assert sum(slept) == pytest.approx(2.0)


def test_a_job_that_ended_elsewhere_ends_the_wait_at_once() -> None:
    with pytest.raises(JobEnded) as raised:
        wait_for_phase(lambda: view("Failed", "TaskFailed"), "j", ("Succeeded",), 60.0)
    assert str(raised.value).startswith(
        "job j ended Failed (TaskFailed); it was waited for to be Succeeded"
    )


def test_a_phase_that_does_not_exist_is_refused_before_any_request() -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        raise AssertionError("nothing is sent")

    client = Client("http://phalanx.test", "phx_t", transport=httpx.MockTransport(handler))
    with pytest.raises(ClientError) as raised:
        client.wait("j", phase="Done")
    assert raised.value.field == "phase" and "Succeeded" in str(raised.value)


def run_view(phase: str, *steps: StepView, message: str = "") -> RunView:
    return RunView(
        id="r", pipeline="p", user="u", phase=phase, created_at=1.0, message=message,
        steps=list(steps),
    )  # fmt: skip


def test_a_run_that_failed_ends_the_wait_at_once_naming_each_failed_step_and_why() -> None:
    steps = (
        StepView(unit="prep", phase="Succeeded"),
        StepView(unit="train[0]", phase="Failed", reason="exited with code 3"),
        StepView(unit="train[1]", phase="Failed"),
        StepView(unit="report", phase="Skipped"),
    )
    with pytest.raises(RunEnded) as raised:
        wait_for_run(lambda: run_view("Failed", *steps), "r", ("Succeeded",), 60.0)
    error = raised.value
    assert (error.kind, error.name, error.phase) == ("run", "r", "Failed")
    assert error.failed == (("train[0]", "exited with code 3"), ("train[1]", ""))
    assert str(error).startswith(
        "run r ended Failed: step train[0] failed (exited with code 3); step train[1] failed; "
        "it was waited for to be Succeeded"
    )
    assert error.fix == "see its steps: phalanx describe run r"
    with pytest.raises(RunEnded) as cancelled:
        wait_for_run(lambda: run_view("Cancelled", message="stopped"), "r", ("Succeeded",), 60.0)
    assert str(cancelled.value).startswith("run r ended Cancelled: stopped; ")


def test_a_run_wait_returns_once_in_a_phase_asked_for_and_times_out_naming_the_run() -> None:
    phases = iter(["Pending", "Running", "Succeeded"])

    def handler(request: httpx.Request) -> httpx.Response:
        assert request.url.path == "/api/v1/runs/r"
        return httpx.Response(200, json=run_view(next(phases)).model_dump(mode="json"))

    client = Client("http://phalanx.test", "phx_t", transport=httpx.MockTransport(handler))
    assert client.wait_run("r", ["running"], timeout=10, interval=0.001).phase == "Running"
    now = [0.0]

    def sleep(seconds: float) -> None:
        now[0] += seconds

    with pytest.raises(WaitTimeout) as raised:
        wait_for_run(
            lambda: run_view("Running"), "r", ("Succeeded",), 1.0, clock=lambda: now[0], sleep=sleep
        )
    assert str(raised.value).startswith(
        "timed out after 1s waiting for run r to be Succeeded; it is Running"
    )
    assert "phalanx describe run r" in str(raised.value)
    with pytest.raises(ClientError) as refused:
        client.wait_run("r", "Queued")
    assert "not a run phase" in str(refused.value) and "Cancelled" in str(refused.value)
