"""Unknown and invalid bearer tokens through the app, from chosen client addresses, on a
clock the test moves: 401 while failures are free, then 429 with ``Retry-After`` for
every token from that address (valid ones too); other addresses are never slowed."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi import FastAPI

from phalanx.control.api.deps import VISITOR_HEADER, visitor_headers
from phalanx.control.app import create_app
from phalanx.control.auth import TokenCache, bootstrap_admin
from phalanx.control.metrics import Metrics
from phalanx.control.store.database import Database, sqlite_url
from phalanx.control.throttle import Throttle
from tests.unit.control.plane import Clock, FakeExecutor, controller_on

GUESSER = "203.0.113.7"
NEIGHBOUR = "198.51.100.9"
METRICS_TOKEN = "phm_scraper"


@dataclass
class Served:
    app: FastAPI
    admin: str
    clock: Clock

    def get(
        self,
        path: str,
        *,
        token: str | None,
        address: str,
        headers: dict[str, str] | None = None,
        method: str = "GET",
        body: Any = None,
    ) -> httpx.Response:
        sent = dict(headers or {})
        if token is not None:
            sent["Authorization"] = f"Bearer {token}"

        async def call() -> httpx.Response:
            transport = httpx.ASGITransport(app=self.app, client=(address, 40000))
            async with httpx.AsyncClient(transport=transport, base_url="http://phalanx") as http:
                return await http.request(method, path, headers=sent, json=body)

        return asyncio.run(call())

    def whoami(self, token: str | None, address: str = GUESSER, **headers: str) -> httpx.Response:
        return self.get("/api/v1/users/me", token=token, address=address, headers=headers)


@pytest.fixture
def served(tmp_path: Path) -> Iterator[Served]:
    db = Database.open(sqlite_url(tmp_path))
    token = bootstrap_admin(db, tmp_path)
    assert token is not None
    clock = Clock()
    app = create_app(
        db,
        controller_on(db, FakeExecutor(), clock),
        Metrics(),
        metrics_token=METRICS_TOKEN,
        throttle=Throttle(clock=clock),
    )
    app.state.tokens = TokenCache(db, clock=clock)  # expiries by the test's clock too
    yield Served(app, token, clock)
    app.state.submissions.close()
    db.close()


def guess(served: Served, times: int, address: str = GUESSER) -> list[int]:
    return [served.whoami(f"phx_guess{n}", address).status_code for n in range(times)]


def refused_for(answer: httpx.Response) -> int:
    assert answer.status_code == 429, answer.text
    body: dict[str, Any] = answer.json()
    assert body["field"] == "Authorization"
    assert "too many unknown or invalid tokens" in body["detail"]
    assert "Retry-After" in body["fix"]
    return int(answer.headers["Retry-After"])


def test_bad_tokens_are_refused_then_the_address_is_locked_out_with_back_off(
    served: Served,
) -> None:
    assert guess(served, 6) == [401] * 6  # five free failures, and the sixth locks
    locked = served.whoami("phx_another")
    assert refused_for(locked) == 1
    assert GUESSER in locked.json()["detail"]
    served.clock.now += 1
    assert guess(served, 1) == [401]  # judged again: its own failure doubles the lock-out
    assert refused_for(served.whoami("phx_another")) == 2
    served.clock.now += 1.5
    assert refused_for(served.whoami("phx_another")) == 1  # 0.5 s left, rounded up
    served.clock.now += 0.5
    assert guess(served, 1) == [401]
    assert refused_for(served.whoami("phx_another")) == 4


def test_a_valid_token_is_refused_from_a_locked_address_and_clears_it_after(
    served: Served,
) -> None:
    assert guess(served, 8) == [401] * 6 + [429] * 2  # the refused ones count for nothing
    assert refused_for(served.whoami(served.admin)) == 1  # checked before the token
    served.clock.now += 1
    assert served.whoami(served.admin).status_code == 200
    assert guess(served, 5) == [401] * 5  # the success cleared the address: free again
    assert guess(served, 1) == [401]
    assert refused_for(served.whoami(served.admin)) == 1


def test_other_addresses_are_never_slowed(served: Served) -> None:
    guess(served, 20)
    assert served.whoami("phx_another").status_code == 429
    assert served.whoami(served.admin, NEIGHBOUR).status_code == 200
    assert guess(served, 5, NEIGHBOUR) == [401] * 5
    assert served.whoami(served.admin, "2001:db8::1").status_code == 200


def test_no_token_at_all_counts_for_nothing(served: Served) -> None:
    for _ in range(20):
        assert served.whoami(None).status_code == 401
    assert served.whoami(served.admin).status_code == 200


def test_an_expired_or_a_revoked_token_counts_as_a_failure(served: Served) -> None:
    def made(**body: Any) -> dict[str, Any]:
        answer = served.get(
            "/api/v1/users/admin/tokens",
            token=served.admin,
            address=NEIGHBOUR,
            method="POST",
            body=body,
        )
        assert answer.status_code == 201, answer.text
        return dict(answer.json())

    revoked, expiring = made(label="old"), made(label="ci", expires=60)
    gone = served.get(
        f"/api/v1/tokens/{revoked['id']}", token=served.admin, address=NEIGHBOUR, method="DELETE"
    )
    assert gone.status_code == 204
    # the expiry has passed (stored by the wall clock, which a loaded machine moves on)
    served.clock.now = expiring["expires_at"] + 1
    assert [served.whoami(revoked["token"]).status_code for _ in range(3)] == [401] * 3
    expired = [served.whoami(expiring["token"]) for _ in range(3)]
    assert [answer.status_code for answer in expired] == [401] * 3
    assert "expired at" in expired[0].json()["detail"]
    assert refused_for(served.whoami(served.admin)) == 1


def test_only_the_console_names_a_visitors_address(served: Served) -> None:
    """A visitor's address sent without the app's key is ignored (no caller can move its
    failures onto another address); with the key, failures count against the visitor."""
    forged = {VISITOR_HEADER: NEIGHBOUR, "X-Phalanx-Visitor-Key": "guessed"}
    assert [served.whoami(f"phx_{n}", **forged).status_code for n in range(6)] == [401] * 6
    assert served.whoami("phx_another", **forged).status_code == 429  # the guesser's own
    assert served.whoami(served.admin, NEIGHBOUR).status_code == 200

    console = visitor_headers(served.app.state.visitor_key, NEIGHBOUR)
    loopback = "127.0.0.1"
    statuses = [served.whoami(f"phx_{n}", loopback, **console).status_code for n in range(7)]
    assert statuses == [401] * 6 + [429]  # counted against the visitor ...
    assert served.whoami(served.admin, NEIGHBOUR).status_code == 429
    assert served.whoami(served.admin, loopback).status_code == 200  # ... not the console


def test_metrics_scrapes_are_limited_like_any_token(served: Served) -> None:
    def scrape(token: str, address: str = GUESSER) -> httpx.Response:
        return served.get("/metrics", token=token, address=address)

    assert [scrape(f"phm_{n}").status_code for n in range(6)] == [401] * 6
    locked = scrape(METRICS_TOKEN)  # the right one, from a locked-out address
    assert refused_for(locked) == 1
    assert scrape(METRICS_TOKEN, NEIGHBOUR).status_code == 200
    served.clock.now += 1
    assert scrape(METRICS_TOKEN).status_code == 200


def test_the_schema_documents_429(served: Served) -> None:
    schema = served.get("/openapi.json", token=None, address=GUESSER).json()
    answers = schema["paths"]["/api/v1/users/me"]["get"]["responses"]
    assert "429" in answers
    assert "Retry-After" in answers["429"]["description"]
