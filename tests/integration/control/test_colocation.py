"""Colocation on a real server (issue 38): a training job (``serviceClass: offline``)
on the host of a busy inference service is paused while the service's replicas load the
host over the watermark, and goes on to succeed once the requests stop; each change is
an event of the job naming the load and the watermark."""

from __future__ import annotations

import sys
from pathlib import Path

from phalanx.control.server import Server
from tests.integration.control.serving import Api, role, running_server, wait_for
from tests.integration.control.test_inference import inference, trained
from tests.integration.control.test_pipelines import admin
from tests.integration.control.test_rollouts import Traffic

#: A replica that spins a CPU for as long as requests keep coming (until 0.5 s after the
#: last): the spinning is runnable all the while, not only while a request is in flight,
#: so its share of a contended host (the suite runs alongside) does not hang on how fast
#: the gateway and the traffic thread get their turns.
BUSY = r"""
import http.server, os, threading, time
last = [0.0]
def spin():
    while True:
        if time.monotonic() - last[0] > 0.5:
            time.sleep(0.05)
class Handler(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        if self.path != "/healthz":
            last[0] = time.monotonic()
        self.send_response(200)
        self.send_header("Content-Length", "2")
        self.end_headers()
        self.wfile.write(b"ok")
    def log_message(self, *args):
        pass
threading.Thread(target=spin, daemon=True).start()
http.server.ThreadingHTTPServer(("127.0.0.1", int(os.environ["PORT"])), Handler).serve_forever()
"""


def kinds(api: Api, job: str) -> list[str]:
    return [e["kind"] for e in api.get(f"/api/v1/jobs/{job}/events")]


def test_training_pauses_while_the_service_is_busy_and_resumes_after(tmp_path: Path) -> None:
    with running_server(tmp_path, colocation=0.15) as server:
        run(server)


def run(server: Server) -> None:
    api = admin(server)
    trained(api, "t1", "one")
    busy = {
        "name": "main",
        "modelVersion": "mnist:v1",
        "command": [sys.executable, "-c", BUSY],
        "resources": {"cpu": "1", "memory": "128Mi"},  # its CPU limit: a whole core
    }
    api.post("/api/v1/inferences", inference("busy", busy))
    wait_for(lambda: api.get("/api/v1/inferences/busy")["ready"], "the service Ready")
    # an offline job that counts to 100 in 10 s of its own run time
    counter = role("trainer", command=["sh", "-c", "for i in $(seq 100); do sleep 0.1; done"])
    job = {
        "apiVersion": "phalanx/v1",
        "kind": "Job",
        "metadata": {"name": "train"},
        "spec": {"queue": "wf", "serviceClass": "offline", "roles": [counter]},
    }
    api.post("/api/v1/jobs", job)
    api.wait_phase("train", "Running")
    with Traffic(server, api.token, "busy").flowing():
        wait_for(lambda: "Throttled" in kinds(api, "train"), "the training paused", timeout=60)
        assert api.job("train")["phase"] == "Running"
    wait_for(lambda: "Resumed" in kinds(api, "train"), "the training resumed", timeout=60)
    events = {e["kind"]: e["message"] for e in api.get("/api/v1/jobs/train/events")}
    assert "is over the colocation watermark (15%)" in events["Throttled"]
    assert "fell below the watermark" in events["Resumed"]
    assert api.wait_phase("train", "Succeeded", "Failed")["phase"] == "Succeeded"
