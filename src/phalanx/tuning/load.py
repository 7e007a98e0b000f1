"""An open-loop HTTP load generator: requests go out on a schedule fixed before the first
one is sent, whatever the answers do, so that a slow server is measured as slow.

Guarantees:
- the schedule is ``arrivals(rate, duration)``: a request due every ``1/rate`` s from 0
  up to, not including, ``duration`` (or, with ``arrival="poisson"``, a Poisson process
  of that mean rate, the same for the same seed); each request is started at its due
  time, or at once when the client runs late;
- no coordinated omission: a request's latency counts from its due time, not from when
  it went out, so a server that stalls shows up as latency of every request that fell
  due during the stall, never as fewer requests;
- a request without its whole answer ``timeout`` s after its due time is a ``timeout``
  error; when the schedule ends, requests still in flight are waited for that long and
  no longer;
- at most ``concurrency_cap`` requests are in flight: one due beyond that is not sent,
  counts as a ``dropped`` error and never holds back the schedule;
- every scheduled request is counted once: ``ok`` (a 2xx answer) or one error kind of
  ``ERROR_KINDS``: ``status`` (any other answer, by status in ``statuses``), ``timeout``,
  ``connect`` (no connection could be made), ``disconnected`` (the connection broke
  before the whole answer), ``dropped``;
- the client is cheap: one pooled aiohttp session (up to ``concurrency_cap`` kept-alive
  connections) and one task per request; 500 requests/s against a trivial server take
  a fraction of one core.
"""

from __future__ import annotations

import asyncio
import math
import random
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any, Final, Literal, get_args
from urllib.parse import urlsplit

import aiohttp

from phalanx.domain.errors import InvalidInput

ErrorKind = Literal["status", "timeout", "connect", "disconnected", "dropped"]
ERROR_KINDS: Final[tuple[ErrorKind, ...]] = get_args(ErrorKind)
Outcome = Literal["ok", "status", "timeout", "connect", "disconnected", "dropped"]
Arrival = Literal["uniform", "poisson"]

#: A request sent: resolves to the answer's status once the whole answer is read.
Send = Callable[[], Awaitable[int]]

#: Failures to make a connection at all (refused, unreachable, no such host).
_CONNECT_FAILED: Final = (
    aiohttp.ClientConnectorError,
    aiohttp.ConnectionTimeoutError,
    ConnectionRefusedError,
)


@dataclass(frozen=True, slots=True, kw_only=True)
class Sample:
    """One scheduled request: when it was due and when it ended, in seconds after the
    schedule's start, and how it ended (``status`` is the answer's, when one came)."""

    due: float
    ended: float
    outcome: Outcome
    status: int | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class LoadResult:
    """What one run measured. Latencies are over the ok requests, in seconds, by the
    nearest rank (None without an ok request); ``window`` runs from the first due time
    to the later of ``duration`` and the last ok answer, and ``throughput`` is ok
    requests per second of it; ``error_rate`` is errors per scheduled request."""

    rate: float
    duration: float
    arrival: Arrival
    scheduled: int
    sent: int
    ok: int
    errors: Mapping[str, int]
    statuses: Mapping[int, int]
    window: float
    throughput: float
    p50: float | None
    p90: float | None
    p99: float | None
    max: float | None
    error_rate: float

    @property
    def failed(self) -> int:
        """Every request that was not ok."""
        return sum(self.errors.values())

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready form (status codes as strings); ``from_dict`` reads it back."""
        out = asdict(self)
        out["errors"] = dict(self.errors)
        out["statuses"] = {str(code): n for code, n in self.statuses.items()}
        return out

    @staticmethod
    def from_dict(data: Mapping[str, Any], *, field: str = "result") -> LoadResult:
        """Read ``to_dict``'s form; InvalidInput names the first missing or bad field."""
        names = [f for f in LoadResult.__dataclass_fields__ if f not in ("errors", "statuses")]
        missing = [name for name in names if name not in data]
        if missing:
            raise InvalidInput(
                f"missing {', '.join(missing)}",
                field=field,
                fix="write every field of LoadResult.to_dict()",
            )
        try:
            errors: dict[str, int] = {
                kind: int(data.get("errors", {}).get(kind, 0)) for kind in ERROR_KINDS
            }
            statuses = {int(code): int(n) for code, n in data.get("statuses", {}).items()}
            values = {name: data[name] for name in names}
            return LoadResult(**values, errors=errors, statuses=statuses)
        except (TypeError, ValueError, AttributeError) as bad:
            raise InvalidInput(
                f"not a load result ({bad})", field=field, fix="write LoadResult.to_dict()"
            ) from None


@dataclass(frozen=True, slots=True, kw_only=True)
class Warmup:
    """What ``warmup`` saw: requests sent, answers (any status) and, when a connection
    could not be made, why (the warmup stops at the first such failure)."""

    sent: int
    answered: int
    unreachable: str | None = None


def arrivals(
    rate: float, duration: float, *, arrival: Arrival = "uniform", seed: int = 0
) -> list[float]:
    """Due times in seconds after the start, ascending, all below ``duration``:
    ``ceil(rate * duration)`` of them ``1/rate`` apart from 0, or a seeded Poisson
    process of mean rate ``rate``."""
    _positive(rate, "rate", "requests per second, e.g. 100")
    _positive(duration, "duration", "seconds, e.g. 30")
    if arrival == "uniform":
        return [i / rate for i in range(math.ceil(rate * duration - 1e-9))]
    if arrival == "poisson":
        draw = random.Random(seed)
        due, out = draw.expovariate(rate), []
        while due < duration:
            out.append(due)
            due += draw.expovariate(rate)
        return out
    raise InvalidInput(
        f"unknown arrival process {arrival!r}", field="arrival", fix="uniform or poisson"
    )


async def run_schedule(
    offsets: Sequence[float], send: Send, *, timeout: float, concurrency_cap: int
) -> list[Sample]:
    """Start ``send`` at each offset (seconds after now) whatever earlier sends do, and
    return one sample per offset, in the order they ended (the module's guarantees)."""
    loop = asyncio.get_running_loop()
    start = loop.time()
    samples: list[Sample] = []
    in_flight = 0

    async def one(due: float) -> None:
        nonlocal in_flight
        status: int | None = None
        outcome: Outcome
        try:
            async with asyncio.timeout_at(start + due + timeout):
                status = await send()
            outcome = "ok" if 200 <= status < 300 else "status"
        except _CONNECT_FAILED:
            outcome = "connect"
        except TimeoutError:
            outcome = "timeout"
        except (aiohttp.ClientError, OSError):
            outcome = "disconnected"
        finally:
            in_flight -= 1
        samples.append(Sample(due=due, ended=loop.time() - start, outcome=outcome, status=status))

    async with asyncio.TaskGroup() as group:
        for due in offsets:
            wait = start + due - loop.time()
            if wait > 0:
                await asyncio.sleep(wait)
            if in_flight >= concurrency_cap:
                samples.append(Sample(due=due, ended=due, outcome="dropped"))
                continue
            in_flight += 1
            group.create_task(one(due))
    return samples


def summarize(
    samples: Sequence[Sample], *, rate: float, duration: float, arrival: Arrival = "uniform"
) -> LoadResult:
    """The LoadResult of a run's samples (pure: the same samples, the same result)."""
    latencies = sorted(s.ended - s.due for s in samples if s.outcome == "ok")
    errors: dict[str, int] = dict.fromkeys(ERROR_KINDS, 0)
    statuses: dict[int, int] = {}
    for sample in samples:
        if sample.outcome != "ok":
            errors[sample.outcome] += 1
        if sample.outcome == "status" and sample.status is not None:
            statuses[sample.status] = statuses.get(sample.status, 0) + 1
    last_ok = max((s.ended for s in samples if s.outcome == "ok"), default=0.0)
    window = max(duration, last_ok)
    return LoadResult(
        rate=rate,
        duration=duration,
        arrival=arrival,
        scheduled=len(samples),
        sent=len(samples) - errors["dropped"],
        ok=len(latencies),
        errors=errors,
        statuses=dict(sorted(statuses.items())),
        window=window,
        throughput=len(latencies) / window,
        p50=_rank(latencies, 0.50),
        p90=_rank(latencies, 0.90),
        p99=_rank(latencies, 0.99),
        max=latencies[-1] if latencies else None,
        error_rate=sum(errors.values()) / len(samples) if samples else 0.0,
    )


async def drive(
    url: str,
    *,
    rate: float,
    duration: float,
    body: bytes,
    headers: Mapping[str, str] | None = None,
    method: str = "POST",
    timeout: float = 10.0,
    concurrency_cap: int = 1024,
    arrival: Arrival = "uniform",
    seed: int = 0,
) -> LoadResult:
    """Send ``method url`` with ``body`` at ``rate`` requests/s for ``duration`` s and
    measure the answers (the module's guarantees)."""
    _url(url)
    _positive(timeout, "timeout", "seconds, e.g. 10")
    if concurrency_cap < 1:
        raise InvalidInput(
            f"{concurrency_cap} requests in flight at most", field="concurrency_cap", fix=">= 1"
        )
    offsets = arrivals(rate, duration, arrival=arrival, seed=seed)
    sent_headers = dict(headers or {})
    async with _session(concurrency_cap) as session:

        async def send() -> int:
            async with session.request(method, url, data=body, headers=sent_headers) as answer:
                await answer.read()
                return answer.status

        samples = await run_schedule(
            offsets, send, timeout=timeout, concurrency_cap=concurrency_cap
        )
    return summarize(samples, rate=rate, duration=duration, arrival=arrival)


def drive_sync(
    url: str,
    *,
    rate: float,
    duration: float,
    body: bytes,
    headers: Mapping[str, str] | None = None,
    method: str = "POST",
    timeout: float = 10.0,
    concurrency_cap: int = 1024,
    arrival: Arrival = "uniform",
    seed: int = 0,
) -> LoadResult:
    """``drive`` in an event loop of its own (for a thread without one)."""
    return asyncio.run(
        drive(
            url,
            rate=rate,
            duration=duration,
            body=body,
            headers=headers,
            method=method,
            timeout=timeout,
            concurrency_cap=concurrency_cap,
            arrival=arrival,
            seed=seed,
        )
    )


async def warmup(
    url: str,
    *,
    count: int,
    body: bytes,
    headers: Mapping[str, str] | None = None,
    method: str = "POST",
    timeout: float = 10.0,
) -> Warmup:
    """Send ``count`` requests one after another on one connection, ignoring answers and
    timeouts; stop at the first failure to connect and say why."""
    _url(url)
    _positive(timeout, "timeout", "seconds, e.g. 10")
    sent = answered = 0
    async with _session(1) as session:
        for _ in range(count):
            sent += 1
            try:
                async with asyncio.timeout(timeout):
                    async with session.request(
                        method, url, data=body, headers=dict(headers or {})
                    ) as answer:
                        await answer.read()
                answered += 1
            except _CONNECT_FAILED as failure:
                return Warmup(sent=sent, answered=answered, unreachable=str(failure))
            except (TimeoutError, aiohttp.ClientError, OSError):
                continue
    return Warmup(sent=sent, answered=answered)


def warmup_sync(
    url: str,
    *,
    count: int,
    body: bytes,
    headers: Mapping[str, str] | None = None,
    method: str = "POST",
    timeout: float = 10.0,
) -> Warmup:
    """``warmup`` in an event loop of its own."""
    return asyncio.run(
        warmup(url, count=count, body=body, headers=headers, method=method, timeout=timeout)
    )


def _session(connections: int) -> aiohttp.ClientSession:
    # no aiohttp timeout: run_schedule's (from each request's due time) is the one that counts
    return aiohttp.ClientSession(
        connector=aiohttp.TCPConnector(limit=connections, limit_per_host=0),
        timeout=aiohttp.ClientTimeout(total=None),
    )


def _rank(ordered: Sequence[float], q: float) -> float | None:
    """The nearest-rank ``q`` quantile of an ascending sequence."""
    if not ordered:
        return None
    return ordered[max(0, math.ceil(q * len(ordered)) - 1)]


def _positive(value: float, field: str, unit: str) -> None:
    if not (isinstance(value, int | float) and math.isfinite(value) and value > 0):
        raise InvalidInput(f"{value!r} is not a positive number", field=field, fix=unit)


def _url(url: str) -> None:
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise InvalidInput(
            f"{url[:80]!r} is not an http(s) URL",
            field="url",
            fix="write the whole URL, e.g. http://127.0.0.1:8000/predict",
        )
