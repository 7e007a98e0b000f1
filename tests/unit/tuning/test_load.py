"""The open-loop load generator: the schedule is kept whatever the server does, a stall
shows up as latency (no coordinated omission), every request is counted once by kind.

Assertions are on counts and on lower bounds that a stall forces; none on how fast this
machine is."""

from __future__ import annotations

import asyncio
import itertools
import math
import threading
from collections.abc import Iterator

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from phalanx.domain.errors import InvalidInput
from phalanx.tuning.load import (
    ERROR_KINDS,
    LoadResult,
    Sample,
    arrivals,
    drive,
    drive_sync,
    run_schedule,
    summarize,
    warmup_sync,
)
from tests.unit.tuning.server import STALL_SECONDS, free_port, serving


@pytest.fixture(scope="module")
def server() -> Iterator[str]:
    with serving() as url:
        yield url


# -- the schedule ----------------------------------------------------------------------------


@settings(deadline=None)  # up to 10,000 arrivals a case: a loaded host takes over 200 ms
@given(
    rate=st.floats(min_value=0.5, max_value=2000), duration=st.floats(min_value=0.1, max_value=5)
)
def test_uniform_arrivals_are_one_every_interval_up_to_the_duration(
    rate: float, duration: float
) -> None:
    due = arrivals(rate, duration)
    assert len(due) == math.ceil(rate * duration - 1e-9)
    assert due[0] == 0.0 and all(t < duration for t in due)
    assert all(b - a == pytest.approx(1 / rate) for a, b in itertools.pairwise(due))


def test_poisson_arrivals_are_seeded_and_keep_the_mean_rate() -> None:
    due = arrivals(100, 50, arrival="poisson", seed=7)
    assert due == arrivals(100, 50, arrival="poisson", seed=7)
    assert due != arrivals(100, 50, arrival="poisson", seed=8)
    assert due == sorted(due) and due[0] > 0 and due[-1] < 50
    assert abs(len(due) - 5000) < 4 * math.sqrt(5000)  # four standard deviations


@pytest.mark.parametrize(
    ("call", "field"),
    [
        (lambda: arrivals(0, 1), "rate"),
        (lambda: arrivals(10, -1), "duration"),
        (lambda: arrivals(10, 1, arrival="bursty"), "arrival"),  # type: ignore[arg-type]
        (lambda: drive_sync("localhost:80/x", rate=1, duration=1, body=b""), "url"),
        (lambda: drive_sync("http://h/x", rate=1, duration=1, body=b"", timeout=0), "timeout"),
        (
            lambda: drive_sync("http://h/x", rate=1, duration=1, body=b"", concurrency_cap=0),
            "concurrency_cap",
        ),
    ],
)
def test_bad_settings_are_refused_naming_them(call: object, field: str) -> None:
    with pytest.raises(InvalidInput) as refused:
        call()  # type: ignore[operator]
    assert refused.value.field == field and refused.value.fix


def test_the_schedule_goes_on_while_nothing_answers_and_drops_over_the_cap() -> None:
    """Sends that never answer: the first ``cap`` go out on time, the rest are dropped
    (not queued), and each one sent is a timeout once ``timeout`` has passed."""
    started = 0

    async def hang() -> int:
        nonlocal started
        started += 1
        await asyncio.Event().wait()
        return 200

    offsets = [i * 0.005 for i in range(20)]
    samples = asyncio.run(run_schedule(offsets, hang, timeout=0.5, concurrency_cap=5))
    result = summarize(samples, rate=200, duration=0.1)
    assert started == 5
    assert result.scheduled == 20 and result.sent == 5 and result.ok == 0
    assert result.errors == {**dict.fromkeys(ERROR_KINDS, 0), "timeout": 5, "dropped": 15}
    assert result.error_rate == 1.0 and result.p99 is None


def test_latency_counts_from_the_due_time_not_from_the_send() -> None:
    """A server that answers nothing until 0.3 s: every request due before then waits
    for it, and its latency says so."""

    async def scenario() -> list[Sample]:
        gate = asyncio.Event()
        asyncio.get_running_loop().call_later(0.3, gate.set)

        async def send() -> int:
            await gate.wait()
            return 200

        return await run_schedule(
            [i * 0.02 for i in range(10)], send, timeout=5, concurrency_cap=100
        )

    samples = asyncio.run(scenario())
    assert len(samples) == 10 and all(s.outcome == "ok" for s in samples)
    for sample in samples:
        assert sample.ended - sample.due >= 0.3 - sample.due - 0.01


def test_summarize_counts_each_request_once_and_ranks_latencies() -> None:
    samples = [Sample(due=i * 0.1, ended=i * 0.1 + (i + 1) / 100, outcome="ok") for i in range(10)]
    samples += [
        Sample(due=1.0, ended=1.5, outcome="status", status=503),
        Sample(due=1.1, ended=1.2, outcome="status", status=500),
        Sample(due=1.2, ended=1.3, outcome="status", status=503),
        Sample(due=1.3, ended=11.3, outcome="timeout"),
        Sample(due=1.4, ended=1.4, outcome="connect"),
        Sample(due=1.5, ended=1.5, outcome="dropped"),
    ]
    result = summarize(samples, rate=10, duration=1.6)
    assert (result.scheduled, result.sent, result.ok, result.failed) == (16, 15, 10, 6)
    assert result.errors == {
        "status": 3,
        "timeout": 1,
        "connect": 1,
        "disconnected": 0,
        "dropped": 1,
    }
    assert result.statuses == {500: 1, 503: 2}
    assert result.p50 == pytest.approx(0.05) and result.p90 == pytest.approx(0.09)
    assert result.p99 == pytest.approx(0.10) and result.max == pytest.approx(0.10)
    assert result.window == 1.6 and result.throughput == pytest.approx(10 / 1.6)
    assert result.error_rate == pytest.approx(6 / 16)


def test_a_load_result_round_trips_through_json_and_refuses_a_partial_one() -> None:
    result = summarize(
        [
            Sample(due=0, ended=0.2, outcome="ok"),
            Sample(due=0, ended=1, outcome="status", status=502),
        ],
        rate=2,
        duration=1,
    )
    assert LoadResult.from_dict(result.to_dict()) == result
    partial = result.to_dict()
    del partial["p99"]
    with pytest.raises(InvalidInput, match="missing p99"):
        LoadResult.from_dict(partial)


# -- against a real server ---------------------------------------------------------------------


def test_the_asked_rate_is_sent_and_answered(server: str) -> None:
    result = drive_sync(f"{server}/ok", rate=200, duration=1.0, body=b"{}")
    assert result.scheduled == 200 and result.sent == 200
    assert result.ok + result.failed == 200 and result.ok >= 190
    assert result.p50 is not None and result.p99 is not None and result.max is not None
    assert 0 < result.p50 <= result.p99 <= result.max


def test_a_stalled_server_shows_as_latency_of_the_requests_due_during_the_stall(
    server: str,
) -> None:
    """The tenth request blocks the server for 1 s. A closed-loop client would send
    nothing meanwhile and see one slow request; this one keeps sending, and about half a
    second's worth of requests carry over 0.5 s of waiting."""
    result = drive_sync(f"{server}/stall/co", rate=50, duration=2.0, body=b"")
    assert result.scheduled == 100 and result.sent == 100 and result.ok == 100
    assert result.max is not None and result.max >= 0.9 * STALL_SECONDS
    # the stall begins with request STALL_AT (due at 0.18 s); the 25 due in its first half
    # wait over 0.5 s each: a quarter of the requests, so the p90 is among them
    assert result.p90 is not None and result.p90 >= 0.5 * STALL_SECONDS


def test_errors_are_counted_by_kind(server: str) -> None:
    failing = drive_sync(f"{server}/fail", rate=50, duration=0.4, body=b"")
    assert failing.errors["status"] == failing.scheduled == 20
    assert failing.statuses == {500: 20} and failing.ok == 0 and failing.error_rate == 1.0
    refused = drive_sync(f"http://127.0.0.1:{free_port()}/x", rate=50, duration=0.4, body=b"")
    assert refused.errors["connect"] == refused.scheduled == 20 and refused.ok == 0


def test_requests_over_the_cap_are_dropped_and_slow_ones_time_out(server: str) -> None:
    result = drive_sync(
        f"{server}/slow", rate=100, duration=0.2, body=b"", timeout=0.5, concurrency_cap=5
    )
    assert result.scheduled == 20
    assert result.errors["dropped"] == 15 and result.sent == 5
    assert result.errors["timeout"] == 5 and result.ok == 0


def test_drive_sync_runs_in_a_thread_of_its_own(server: str) -> None:
    results: list[LoadResult] = []
    thread = threading.Thread(
        target=lambda: results.append(drive_sync(f"{server}/ok", rate=20, duration=0.5, body=b""))
    )
    thread.start()
    thread.join(30)
    assert len(results) == 1 and results[0].ok == 10


def test_drive_with_poisson_arrivals_sends_the_seeded_schedule(server: str) -> None:
    result = asyncio.run(
        drive(f"{server}/ok", rate=40, duration=0.5, body=b"", arrival="poisson", seed=3)
    )
    assert result.scheduled == len(arrivals(40, 0.5, arrival="poisson", seed=3))
    assert result.arrival == "poisson" and result.ok == result.scheduled


def test_warmup_ignores_answers_but_says_when_nothing_listens(server: str) -> None:
    assert warmup_sync(f"{server}/fail", count=3, body=b"").answered == 3
    nobody = warmup_sync(f"http://127.0.0.1:{free_port()}/x", count=3, body=b"")
    assert nobody.sent == 1 and nobody.answered == 0 and nobody.unreachable
