"""``Client.wait``: the phases asked for end it; a timeout and an ended job are errors
that name the job, its phase and the phases waited for."""

from __future__ import annotations

import httpx
import pytest

from phalanx.client import Client, ClientError, JobEnded, WaitTimeout
from phalanx.client._wait import wait_for_phase
from phalanx.wire.views import JobView


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
