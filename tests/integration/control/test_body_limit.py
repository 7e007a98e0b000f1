"""Request bodies over 10 MiB (the CLI's own limit) are refused with 413, before they are
read: on their declared length at once, and a chunked body as soon as it passes the limit.

The raw requests go over a socket, so that the body can be left unsent: an answer then
proves the server did not wait for it.
"""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator
from typing import Any
from urllib.parse import urlsplit

import pytest

from phalanx.control.body_limit import MAX_BODY
from phalanx.spec.limits import MAX_INPUT_SIZE
from tests.integration.control.serving import Api, role, running_server

#: Seconds a raw exchange may take; a server that waits for the body never answers.
TIMEOUT = 20.0


@pytest.fixture(scope="module")
def api(backend: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Api]:
    with running_server(tmp_path_factory.mktemp("body")) as server:
        api = Api(server.url, server.admin_token or "")
        api.queue("team-a")
        yield api


def exchange(api: Api, head: str, *parts: bytes) -> tuple[int, dict[str, Any]]:
    """Send ``head`` (request line and headers) and ``parts`` over one connection, then
    read the answer until the server closes it; its status and JSON body."""
    url = urlsplit(str(api.http.base_url))
    token = api.http.headers["Authorization"]
    with socket.create_connection((url.hostname, url.port), timeout=TIMEOUT) as connection:
        connection.sendall(
            f"{head}\r\nHost: {url.netloc}\r\nAuthorization: {token}\r\n"
            "Content-Type: application/json\r\n\r\n".encode()
        )
        for part in parts:
            connection.sendall(part)
        answer = b""
        while chunk := connection.recv(65536):
            answer += chunk
    status_line, _, rest = answer.partition(b"\r\n")
    _, _, body = rest.partition(b"\r\n\r\n")
    return int(status_line.split()[1]), json.loads(body)


def test_the_limit_is_the_clis() -> None:
    assert MAX_BODY == MAX_INPUT_SIZE == 10 * 2**20


def test_a_declared_length_over_the_limit_is_refused_before_the_body_is_sent(api: Api) -> None:
    status, answer = exchange(
        api, f"POST /api/v1/jobs HTTP/1.1\r\nContent-Length: {MAX_BODY + 1}"
    )  # and no body at all
    assert status == 413
    assert answer["field"] == "body"
    assert f"a body of {MAX_BODY + 1} bytes" in answer["detail"]
    assert f"limit of {MAX_BODY} bytes (10 MiB)" in answer["detail"]
    assert "split the documents" in answer["fix"]


def test_a_chunked_body_is_refused_once_it_passes_the_limit(api: Api) -> None:
    chunk = b" " * 2**20
    chunks = [b"%x\r\n%s\r\n" % (len(chunk), chunk)] * 10  # exactly the limit ...
    chunks.append(b"1\r\n \r\n")  # ... and one byte more; the body never ends
    status, answer = exchange(
        api, "POST /api/v1/queues HTTP/1.1\r\nTransfer-Encoding: chunked", *chunks
    )
    assert status == 413
    assert answer["field"] == "body" and "10 MiB" in answer["detail"] and answer["fix"]


def test_a_client_sending_too_much_hears_413(api: Api) -> None:
    response = api.http.post(
        "/api/v1/jobs", content=b" " * (MAX_BODY + 1), headers={"Content-Type": "application/json"}
    )
    assert response.status_code == 413
    assert response.json()["field"] == "body"


def test_a_body_at_the_limit_is_read(api: Api) -> None:
    document = {
        "apiVersion": "phalanx/v1",
        "kind": "Job",
        "metadata": {"name": "padded"},
        "spec": {"queue": "team-a", "roles": [role()]},
    }
    text = json.dumps(document).encode()
    padded = text + b" " * (MAX_BODY - len(text))
    response = api.http.post(
        "/api/v1/jobs", content=padded, headers={"Content-Type": "application/json"}
    )
    assert response.status_code == 201, response.text
    chunked = api.http.post(
        "/api/v1/jobs",
        content=iter([json.dumps({**document, "metadata": {"name": "chunked"}}).encode()]),
        headers={"Content-Type": "application/json"},
    )
    assert chunked.status_code == 201, chunked.text


def test_only_the_bodies_within_the_limit_were_stored(api: Api) -> None:
    names = [job["name"] for job in api.get("/api/v1/jobs")["items"]]
    assert names == ["padded", "chunked"]
