"""Failed sign-ins through the real server, from two loopback addresses (127.0.0.1 and
127.0.0.2: Linux routes all of 127/8 to the loopback): bad console logins and bad bearer
tokens lock their own address out (429, with ``Retry-After`` from the API, and a page
that says how long from the console) and never the other address, nor the console's
own connection to the API. The server's throttle runs on a clock the test moves."""

from __future__ import annotations

import httpx

from phalanx.control.server import Server
from phalanx.control.throttle import Throttle
from tests.integration.control.console import Visitor
from tests.integration.control.serving import _CLIENTS

OTHER = "127.0.0.2"


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def visitor_from(server: Server, address: str) -> Visitor:
    """A browser whose connections come from ``address``."""
    visitor = Visitor(server.url)
    visitor.http = httpx.Client(
        base_url=f"{server.url}/ui",
        follow_redirects=False,
        timeout=30,
        transport=httpx.HTTPTransport(local_address=address),
    )
    _CLIENTS.append(visitor.http)
    return visitor


def api_from(server: Server, address: str) -> httpx.Client:
    http = httpx.Client(
        base_url=server.url, timeout=30, transport=httpx.HTTPTransport(local_address=address)
    )
    _CLIENTS.append(http)
    return http


def whoami(http: httpx.Client, token: str) -> httpx.Response:
    return http.get("/api/v1/users/me", headers={"Authorization": f"Bearer {token}"})


def test_bad_console_logins_lock_out_the_visitors_address_only(server: Server) -> None:
    clock = Clock()
    server.app.state.throttle = Throttle(clock=clock)
    admin = server.admin_token
    assert admin is not None
    guesser = visitor_from(server, OTHER)
    for n in range(6):
        page = guesser.post("/login", {"token": f"phx_wrong{n}"}, page="/login", expect=401)
        assert "token: unknown or revoked token" in page.text
    # Locked out: even the right token is refused, with how long to wait.
    page = guesser.post("/login", {"token": admin}, page="/login", expect=429).text
    assert f"too many unknown or invalid tokens from {OTHER}" in page
    assert "1 s more" in page
    refused = whoami(api_from(server, OTHER), admin)  # the same address, at the API
    assert refused.status_code == 429 and refused.headers["Retry-After"] == "1"

    # Another address, and the console's own loopback connection, are not slowed.
    assert whoami(api_from(server, "127.0.0.1"), admin).status_code == 200
    neighbour = visitor_from(server, "127.0.0.1")
    neighbour.login(admin)
    assert 'id="user-name">admin<' in neighbour.get("/jobs").text

    clock.now += 1
    assert guesser.login(admin).headers["location"] == "/ui/"


def test_bad_bearer_tokens_lock_out_their_address_at_the_api_and_the_console(
    server: Server,
) -> None:
    clock = Clock()
    server.app.state.throttle = Throttle(clock=clock)
    admin = server.admin_token
    assert admin is not None
    signed_in = visitor_from(server, OTHER)
    signed_in.login(admin)
    guesser = api_from(server, OTHER)
    assert [whoami(guesser, f"phx_guess{n}").status_code for n in range(6)] == [401] * 6
    refused = whoami(guesser, "phx_guess")
    assert refused.status_code == 429 and refused.headers["Retry-After"] == "1"
    body = refused.json()
    assert body["field"] == "Authorization" and "Retry-After" in body["fix"]
    clock.now += 1
    assert whoami(guesser, "phx_guess").status_code == 401  # judged: the lock-out doubles
    refused = whoami(guesser, admin)  # every token from that address, valid ones too
    assert refused.status_code == 429 and refused.headers["Retry-After"] == "2"
    # The console's pages for a visitor at that address are refused too; the session stays.
    page = signed_in.get("/jobs", expect=429)
    assert "too many unknown or invalid tokens" in page.text
    # The rest of the world is not slowed.
    assert whoami(api_from(server, "127.0.0.1"), admin).status_code == 200
    clock.now += 2
    assert 'id="user-name">admin<' in signed_in.get("/jobs").text
