"""The client's handling of answers, through ``httpx.MockTransport`` (no sockets)."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator

import httpx
import pytest

from phalanx.client import Client, ClientError
from phalanx.domain.errors import DocumentError
from phalanx.spec.loader import build_document

Handler = Callable[[httpx.Request], httpx.Response]


def client(handler: Handler, token: str | None = "phx_t") -> Client:
    return Client("http://phalanx.test", token, transport=httpx.MockTransport(handler))


def job(name: str) -> dict[str, object]:
    return {"name": name, "queue": "q", "user": "u", "phase": "Pending", "created_at": 1.0}


def test_the_token_is_sent_as_a_bearer() -> None:
    seen: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(200, json={"name": "u", "role": "user", "extra": "ignored"})

    assert client(handler).whoami().name == "u"
    assert seen[0].headers["Authorization"] == "Bearer phx_t"
    assert seen[0].url.path == "/api/v1/users/me"


def test_every_page_is_fetched_in_order() -> None:
    pages = {None: ([job("a"), job("b")], 2), "2": ([job("c")], None)}

    def handler(request: httpx.Request) -> httpx.Response:
        items, following = pages[request.url.params.get("after")]
        assert request.url.params.get_list("phase") == ["Running", "Pending"]
        return httpx.Response(200, json={"items": items, "next": following})

    names = [j.name for j in client(handler).jobs(phase=["Running", "Pending"])]
    assert names == ["a", "b", "c"]


def test_an_api_error_keeps_detail_field_and_fix() -> None:
    body = {"detail": "queue 'x' does not exist", "field": "spec.queue", "fix": "name one"}

    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(422, json=body)

    with pytest.raises(ClientError) as error:
        client(handler).job("j")
    assert (error.value.status, error.value.field, error.value.fix) == (
        422,
        "spec.queue",
        "name one",
    )
    assert str(error.value) == "queue 'x' does not exist; field: spec.queue; fix: name one"


def test_a_server_failure_and_a_foreign_server_are_told_apart() -> None:
    def broken(request: httpx.Request) -> httpx.Response:
        return httpx.Response(500, text="Internal Server Error")

    with pytest.raises(ClientError) as failure:
        client(broken).nodes()
    assert failure.value.status == 500 and "server's log" in str(failure.value)

    def foreign(request: httpx.Request) -> httpx.Response:
        return httpx.Response(404, json={"detail": "Not Found"})

    with pytest.raises(ClientError) as missing:
        client(foreign).nodes()
    assert "points at a phalanx server" in str(missing.value)

    def nonsense(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, text="<html>hello</html>")

    with pytest.raises(ClientError) as odd:
        client(nonsense).nodes()
    assert "not a list of NodeView" in str(odd.value)


def test_without_a_token_a_401_says_where_tokens_come_from() -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        assert "Authorization" not in request.headers
        return httpx.Response(401, json={"detail": "no bearer token", "field": "Authorization"})

    with pytest.raises(ClientError) as error:
        client(handler, token=None).queues()
    assert "PHALANX_TOKEN" in str(error.value) and "admin.token" in str(error.value)


def test_logs_stream_text_chunks_and_fail_early() -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        if request.url.path.endswith("/missing/logs"):
            return httpx.Response(404, json={"detail": "no job named 'missing'"})
        assert request.url.params["stream"] == "stderr" and request.url.params["task"] == "t1"
        return httpx.Response(200, content=iter([b"one\n", "tw\u00f6\n".encode()]))

    with client(handler) as phalanx:
        assert "".join(phalanx.logs("j", "t1", stream="stderr", follow=True)) == "one\ntw\u00f6\n"
        with pytest.raises(ClientError):
            phalanx.logs("missing")  # raises at the call, before any iteration


def test_a_connection_failure_names_the_server_and_the_fix() -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("[Errno 111] Connection refused", request=request)

    with pytest.raises(ClientError) as error:
        client(handler).health()
    message = str(error.value)
    assert "cannot connect to the phalanx server at http://phalanx.test" in message
    assert "connection refused" in message and "phalanx up" in message


@pytest.mark.parametrize("server", ["localhost:8080", "ftp://x", "http://"])
def test_an_unusable_url_is_refused_at_once(server: str) -> None:
    with pytest.raises(ClientError) as error:
        Client(server, "t")
    assert error.value.field == "server" and "http://127.0.0.1:8080" in str(error.value)


def test_apply_puts_a_queue_that_exists_unless_it_holds_this_very_document() -> None:
    calls: list[tuple[str, str]] = []
    written = {"apiVersion": "phalanx/v1", "kind": "Queue", "metadata": {"name": "q"}}
    stored = build_document({**written, "spec": {"weight": 2}}).model_dump(
        mode="json", by_alias=True, exclude_none=True
    )  # as the server stores it: defaults spelled out
    queue = {"name": "q", "parent": "root", "weight": 1, "guarantee": {}, "deserved": {}}
    queue |= {"capability": {}, "allocated": {}, "document": stored}

    def handler(request: httpx.Request) -> httpx.Response:
        calls.append((request.method, request.url.path))
        if request.method == "POST":
            assert json.loads(request.content)["metadata"]["name"] == "q"
            return httpx.Response(409, json={"detail": "queue 'q' already exists"})
        return httpx.Response(200, json=queue)

    applied = client(handler).apply("apiVersion: phalanx/v1\nkind: Queue\nmetadata: {name: q}\n")
    assert [a.action for a in applied] == ["configured"]
    assert calls == [
        ("POST", "/api/v1/queues"),
        ("GET", "/api/v1/queues/q"),
        ("PUT", "/api/v1/queues/q"),
    ]
    calls.clear()
    again = "apiVersion: phalanx/v1\nkind: Queue\nmetadata: {name: q}\nspec: {weight: 2}\n"
    assert [a.action for a in client(handler).apply(again)] == ["unchanged"]
    assert calls == [("POST", "/api/v1/queues"), ("GET", "/api/v1/queues/q")]


class Recorded(httpx.SyncByteStream):
    """A response body that remembers being closed."""

    def __init__(self) -> None:
        self.closed = False

    def __iter__(self) -> Iterator[bytes]:
        yield b"never read\n"

    def close(self) -> None:
        self.closed = True


def test_closing_an_unread_log_frees_the_connection() -> None:
    body = Recorded()

    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, stream=body)

    with client(handler).logs("j", follow=True):
        pass
    assert body.closed


def test_a_document_past_a_limit_is_refused_before_anything_is_sent() -> None:
    sent: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        sent.append(request)
        return httpx.Response(201, json=job("big"))

    document = {
        "apiVersion": "phalanx/v1",
        "kind": "Job",
        "metadata": {"name": "big"},
        "spec": {
            "priority": 2**70,
            "roles": [{"name": "w", "replicas": 100_000, "resources": {}, "command": "true"}],
        },
    }
    with pytest.raises(DocumentError) as refused:
        client(handler).apply(document)
    assert refused.value.field == "spec.priority" and refused.value.fix
    assert "spec.roles[0].replicas: must be <= 10000" in str(refused.value)
    assert sent == []


def test_a_document_whose_body_is_over_the_apis_limit_is_refused_before_sending() -> None:
    sent: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        sent.append(request)
        return httpx.Response(201, json=job("big"))

    argument = "x" * (60 * 2**10)  # 8 of them per role, 24 roles: within every other limit
    roles = [
        {"name": f"r{i}", "replicas": 1, "resources": {}, "command": [argument] * 8}
        for i in range(24)
    ]
    document = {
        "apiVersion": "phalanx/v1",
        "kind": "Job",
        "metadata": {"name": "big"},
        "spec": {"roles": roles},
    }
    with pytest.raises(DocumentError) as refused:
        client(handler).apply(document)
    assert "over the API's limit of 10485760 bytes (10 MiB)" in str(refused.value)
    assert refused.value.fix and sent == []
