"""``phalanx gateway`` in a process of its own beside a real server (issue 38): it routes
``/serve/NAME/`` to the replicas the server made Ready, admits callers as the server's
gateway does, wakes a predictor at ``minReplicas: 0`` with a request it holds (through
its reports), reports its answers to the store while it runs and removes them when it
stops."""

from __future__ import annotations

import signal
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx

from phalanx.control.server import Server
from phalanx.control.store import gateway_reports
from phalanx.executors.rendezvous import free_ports
from tests.integration.control.serving import wait_for
from tests.integration.control.test_inference import inference, predictor, ready, trained
from tests.integration.control.test_pipelines import admin


@contextmanager
def gateway_process(server: Server, tmp_path: Path) -> Iterator[str]:
    """A ``phalanx gateway`` reading ``server``'s store; its base URL."""
    (port,) = free_ports(1, "127.0.0.1")
    store = (
        ["--db", server.settings.db_url]
        if server.settings.db_url
        else ["--data-dir", str(server.settings.data_dir)]
    )
    log = (tmp_path / "gateway.log").open("wb")
    process = subprocess.Popen(
        [sys.executable, "-m", "phalanx.cli.main", "gateway", *store, "--port", str(port)],
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    url = f"http://127.0.0.1:{port}"
    try:

        def healthy() -> bool:
            assert process.poll() is None, (tmp_path / "gateway.log").read_text()
            try:
                return httpx.get(f"{url}/healthz", timeout=1).status_code == 200
            except httpx.TransportError:
                return False

        wait_for(healthy, "the gateway process answering")
        yield url
    finally:
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=30) in (0, -signal.SIGTERM)
        log.close()


def test_a_gateway_process_serves_wakes_and_reports(server: Server, tmp_path: Path) -> None:
    api = admin(server)
    trained(api, "train-1", "one")
    api.post("/api/v1/inferences", inference("always", predictor("main", "mnist:v1")))
    idle = predictor("main", "mnist:v1", minReplicas=0, maxReplicas=1)
    api.post("/api/v1/inferences", inference("lazy", idle))
    ready(api, "always")
    bob = api.user("bob")
    with gateway_process(server, tmp_path) as url:
        caller = httpx.Client(base_url=url, timeout=60)
        as_admin = {"Authorization": f"Bearer {api.token}"}
        answer = wait_for(
            lambda: (
                (
                    a := caller.post("/serve/always/predict", content=b"[1]", headers=as_admin)
                ).status_code
                == 200
                and a
            ),
            "an answer through the gateway process",
        )
        assert answer.text == "one /predict None [1]"  # the token stayed at the gateway
        assert caller.get("/serve/always/").status_code == 401
        as_bob = {"Authorization": f"Bearer {bob.token}"}
        assert caller.get("/serve/always/", headers=as_bob).status_code == 404

        # no replica of lazy: the request is held here, reported, and answered once the
        # server has started one
        woken = caller.get("/serve/lazy/hello", headers=as_admin)
        assert woken.status_code == 200 and woken.text.startswith("one /hello")

        def reported() -> set[tuple[str, str, int]]:
            with server.db.session() as session:
                rows = gateway_reports.fresh(session, 0.0)
                return {(r.service, r.predictor, r.requests) for r in rows}

        wait_for(
            lambda: {("always", "main", 1), ("lazy", "main", 1)} <= reported(),
            "the gateway's answers in the store",
        )
        caller.close()
    assert reported() == set()  # removed as it stopped
