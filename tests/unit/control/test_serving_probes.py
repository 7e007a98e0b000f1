"""Readiness probes run at once: two replicas whose readiness path answers only once
both are asked are both found Ready (one after the other, the first would time out);
one that refuses the connection, or answers 503, is not Ready."""

from __future__ import annotations

import http.server
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from phalanx.control.controllers.serving import Serving, _Held, _Replica
from phalanx.control.store.database import Database, sqlite_url
from phalanx.control.store.models import ServiceReplicaRow
from phalanx.executors.rendezvous import free_ports
from phalanx.spec.inference import InferenceDocument


@contextmanager
def replica(status: int, barrier: threading.Barrier | None) -> Iterator[int]:
    """A replica answering ``status`` on every path, after ``barrier`` when given."""

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            if barrier is not None:
                barrier.wait(timeout=5)
            self.send_response(status)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server.server_address[1]
    finally:
        server.shutdown()
        server.server_close()


def at(job: str, port: int, phase: str = "Running") -> _Replica:
    """Replica ``job`` in ``phase``, its task's record saying it serves on ``port``."""
    row = ServiceReplicaRow(service="svc", predictor="main", job=job, ready=False)
    return _Replica(row, phase, f"127.0.0.1:{port}")


def test_probes_overlap_and_only_200_is_ready(tmp_path: Path) -> None:
    document = InferenceDocument.model_validate(
        {
            "apiVersion": "phalanx/v1",
            "kind": "Inference",
            "metadata": {"name": "svc"},
            "spec": {
                "predictors": [
                    {"name": "main", "modelVersion": "m:v1", "command": "x", "resources": {}}
                ]
            },
        }
    )
    serving = Serving(
        Database.open(sqlite_url(tmp_path)), publish=lambda _: None, on_stored=lambda _: None
    )
    both = threading.Barrier(2)
    (closed,) = free_ports(1, "127.0.0.1")
    with replica(200, both) as a, replica(200, both) as b, replica(503, None) as c:
        live = [
            at("svc-main-1", a),
            at("svc-main-2", b),
            at("svc-main-3", c),
            at("svc-main-4", closed),
            at("svc-main-5", a, "Pending"),  # not running: not asked
            _Replica(
                ServiceReplicaRow(service="svc", predictor="main", job="svc-main-6"), "Running"
            ),  # no endpoint recorded yet: not asked
        ]
        readiness = serving._probe_all({"svc": _Held("svc", "u", document)}, {"svc": live})
    serving.stop()
    assert readiness == {
        "svc-main-1": f"http://127.0.0.1:{a}",
        "svc-main-2": f"http://127.0.0.1:{b}",
        "svc-main-3": None,
        "svc-main-4": None,
        "svc-main-5": None,
        "svc-main-6": None,
    }
