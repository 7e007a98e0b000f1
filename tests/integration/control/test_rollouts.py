"""Rollouts through the real server, gateway and local executor (issue 38, rollouts):
a predictor moves to a new model version at 10/50/100 while requests flow and ends
serving it from the canary's own replicas; a version that answers 5xx, and one whose
replicas never become Ready, are rolled back by themselves; ``--abort`` rolls back; the
refusals name their field; ``phalanx rollout --wait`` follows one to its end."""

from __future__ import annotations

import sys
import threading
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import httpx

from phalanx.control.server import Server
from tests.integration.control.serving import Api, wait_for
from tests.integration.control.test_cli import ok, phalanx
from tests.integration.control.test_inference import inference, trained
from tests.integration.control.test_pipelines import admin

#: A replica answering every request with its model's config; 500 when that config is
#: "broken"; one whose config is "crash" exits at once (never Ready).
SERVER = r"""
import http.server, os, pathlib, sys
model = pathlib.Path(os.environ["PHALANX_MODEL_PATH"], "sub", "c").read_text()
if model == "crash":
    sys.exit(3)
class Handler(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        status = 500 if model == "broken" and self.path != "/healthz" else 200
        self.send_response(status)
        self.send_header("Content-Length", str(len(model)))
        self.end_headers()
        self.wfile.write(model.encode())
    def log_message(self, *args):
        pass
http.server.ThreadingHTTPServer(("127.0.0.1", int(os.environ["PORT"])), Handler).serve_forever()
"""


def main(version: str) -> dict[str, Any]:
    return {
        "name": "main",
        "modelVersion": version,
        "command": [sys.executable, "-c", SERVER],
        "resources": {"cpu": "100m", "memory": "128Mi"},
    }


class Traffic:
    """Requests to a service's ``path`` from a thread (GET, or POST of ``body`` as JSON),
    as fast as they are answered, until stopped; the answers' bodies (or status, for
    those that are not 200) are counted."""

    def __init__(
        self, server: Server, token: str, service: str, path: str = "", body: Any = None
    ) -> None:
        self._http = httpx.Client(
            base_url=server.url, headers={"Authorization": f"Bearer {token}"}, timeout=30
        )
        self._path = f"/serve/{service}/{path}"
        self._body = body  # None: GET; else POSTed as JSON
        self.seen: Counter[str] = Counter()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            if self._body is None:
                answer = self._http.get(self._path)
            else:
                answer = self._http.post(self._path, json=self._body)
            self.seen[answer.text if answer.status_code == 200 else str(answer.status_code)] += 1

    @contextmanager
    def flowing(self) -> Iterator[Traffic]:
        self._thread.start()
        try:
            yield self
        finally:
            self._stop.set()
            self._thread.join()
            self._http.close()


def served(api: Api, name: str) -> Any:
    return wait_for(
        lambda: (view := api.get(f"/api/v1/inferences/{name}"))["ready"] and view,
        f"inference {name} Ready",
    )


def ended(api: Api, name: str, rollout: int, *, timeout: float = 60) -> Any:
    def found() -> Any:
        for item in api.get(f"/api/v1/inferences/{name}")["rollouts"]:
            if item["id"] == rollout and item["phase"] != "Progressing":
                return item
        return None

    return wait_for(found, f"rollout {rollout} of {name} ended", timeout=timeout)


def predictors(api: Api, name: str) -> list[tuple[str, str, int]]:
    view = api.get(f"/api/v1/inferences/{name}")
    return [
        (p["name"], p["model_version"].partition("@")[0], p["traffic"]) for p in view["predictors"]
    ]


def test_a_version_rolls_out_in_steps_and_a_broken_one_rolls_back(server: Server) -> None:
    api = admin(server)
    for job, content in (("t1", "one"), ("t2", "two"), ("t3", "broken")):
        trained(api, job, content)
    api.post("/api/v1/inferences", inference("mnist", main("mnist:v1")))
    served(api, "mnist")
    (old,) = [r["job"] for r in api.get("/api/v1/inferences/mnist")["predictors"][0]["replicas"]]

    quick = {"steps": [10, 50, 100], "interval": 1, "minRequests": 5}
    with Traffic(server, api.token, "mnist").flowing() as traffic:
        started = api.post("/api/v1/inferences/mnist/rollouts", {"to": "v2", **quick})
        assert started["phase"] == "Progressing" and started["traffic"] == 10
        assert started["to_version"].startswith("mnist:v2@sha256:")
        assert predictors(api, "mnist") == [
            ("main", "mnist:v1", 90),
            ("main-canary", "mnist:v2", 10),
        ]
        # one rollout at a time, and the document stays as the rollout has it meanwhile
        again = api.http.post("/api/v1/inferences/mnist/rollouts", json={"to": "v3"})
        assert again.status_code == 409 and "is under way" in again.json()["detail"]
        replaced = api.http.put(
            "/api/v1/inferences/mnist", json=inference("mnist", main("mnist:v3"))
        )
        assert replaced.status_code == 409 and replaced.json()["fix"].endswith("--abort")

        wait_for(
            lambda: (
                'phalanx_serving_replicas{predictor="main-canary",service="mnist",state="ready"} 1.0'
                in api.http.get("/metrics").text
            ),
            "the canary's Ready replica in /metrics",
        )
        done = ended(api, "mnist", started["id"])
        assert done["phase"] == "Succeeded", done
        assert [e["action"] for e in done["history"]] == [
            "started",
            "promoted",
            "promoted",
            "completed",
        ]
        assert [e["traffic"] for e in done["history"]] == [10, 50, 100, 100]
        assert all(e["requests"] >= 5 and e["errors"] == 0 for e in done["history"][1:])
        assert predictors(api, "mnist") == [("main", "mnist:v2", 100)]
        # the canary's replica now serves as main's; main's old one is gone
        view = api.get("/api/v1/inferences/mnist")
        assert [r["job"] for r in view["predictors"][0]["replicas"]] == ["mnist-main-canary-2"]
        wait_for(lambda: api.http.get(f"/api/v1/jobs/{old}").status_code == 404, f"{old} gone")
        before = traffic.seen["two"]
        wait_for(lambda: traffic.seen["two"] > before + 20, "requests answered by v2")

        broken = api.post("/api/v1/inferences/mnist/rollouts", {"to": "v3", **quick})
        back = ended(api, "mnist", broken["id"])
        assert back["phase"] == "RolledBack" and back["traffic"] == 0
        last = back["history"][-1]
        assert last["action"] == "rolled-back" and last["reason"].startswith("error rate 100.0%")
        assert last["errors"] == last["requests"] >= 5
        assert predictors(api, "mnist") == [("main", "mnist:v2", 100)]
        wait_for(
            lambda: api.http.get("/api/v1/jobs/mnist-main-canary-3").status_code == 404,
            "the broken canary's replica gone",
        )
        before = traffic.seen["two"]
        wait_for(lambda: traffic.seen["two"] > before + 20, "v2 answering again")
    assert set(traffic.seen) <= {"one", "two", "500"}, traffic.seen
    # the 5xx answers came only from the broken canary, judged in its first window
    assert traffic.seen["500"] <= 10 * back["history"][-1]["requests"]

    metrics = api.http.get("/metrics").text
    assert (
        'phalanx_serving_replicas{predictor="main",service="mnist",state="desired"} 1.0' in metrics
    )
    assert 'phalanx_serving_requests_total{code="500",predictor="main-canary"' in metrics
    shown = ok(phalanx(server, "describe", "inference", "mnist"))
    assert f"Rollout {broken['id']}: main" in shown and "rolled-back" in shown
    assert "completed" in shown and "RolledBack at 0%" in shown


def test_a_canary_never_ready_is_rolled_back_and_abort_rolls_back(server: Server) -> None:
    api = admin(server)
    for job, content in (("t1", "one"), ("t2", "crash"), ("t3", "three")):
        trained(api, job, content)
    api.post("/api/v1/inferences", inference("svc", main("mnist:v1")))
    served(api, "svc")

    started = api.post("/api/v1/inferences/svc/rollouts", {"to": "v2", "readyTimeout": 3})
    back = ended(api, "svc", started["id"])
    assert back["phase"] == "RolledBack"
    assert "had no Ready replica for" in back["reason"], back
    assert predictors(api, "svc") == [("main", "mnist:v1", 100)]

    answer = phalanx(server, "rollout", "svc", "--to", "v3", "--interval", "1h")
    assert ok(answer).startswith("inference/svc rollout "), answer
    stopped = ok(phalanx(server, "rollout", "svc", "--abort"))
    assert "stopping: rolled back to mnist:v1@sha256:" in stopped
    (latest, *_) = api.get("/api/v1/inferences/svc")["rollouts"]
    aborted = ended(api, "svc", latest["id"])
    assert aborted["history"][-1]["action"] == "aborted"
    assert aborted["reason"].endswith("stopped by admin")
    assert predictors(api, "svc") == [("main", "mnist:v1", 100)]

    # refusals name their field
    nothing = api.http.post("/api/v1/inferences/svc/rollouts/abort")
    assert nothing.status_code == 404 and nothing.json()["field"] == "name"
    same = api.http.post("/api/v1/inferences/svc/rollouts", json={"to": "v1"})
    assert same.status_code == 409 and same.json()["field"] == "to"
    missing = api.http.post("/api/v1/inferences/svc/rollouts", json={"to": "v9"})
    assert missing.status_code == 404 and missing.json()["field"] == "to"
    steps = api.http.post("/api/v1/inferences/svc/rollouts", json={"to": "v3", "steps": [50, 10]})
    assert steps.status_code == 422 and steps.json()["field"] == "steps[1]"
    other = api.http.post("/api/v1/inferences/svc/rollouts", json={"to": "v3", "predictor": "x"})
    assert other.status_code == 404 and other.json()["field"] == "predictor"
    bad = phalanx(server, "rollout", "svc", "--to", "v3", "--max-error-rate", "lots")
    assert bad.exit_code == 1 and "--max-error-rate" in bad.output
    bob = api.user("bob")
    bob.post("/api/v1/inferences/svc/rollouts", {"to": "v3"}, expect=404)


def test_the_cli_follows_a_rollout_to_its_end(server: Server) -> None:
    api = admin(server)
    for job, content in (("t1", "one"), ("t2", "two")):
        trained(api, job, content)
    api.post("/api/v1/inferences", inference("cli", main("mnist:v1")))
    served(api, "cli")
    with Traffic(server, api.token, "cli").flowing():
        answer = phalanx(
            server,
            "rollout",
            "cli",
            "--to",
            "mnist:v2",
            "--steps",
            "50,100",
            "--interval",
            "1s",
            "--min-requests",
            "3",
            "--max-p99",
            "5",
            "--wait",
        )
    said = ok(answer)
    assert "started: main to mnist:v2@sha256:" in said
    assert "promoted" in said and "completed" in said
    assert (
        said.strip().splitlines()[-1].startswith("inference/cli rollout 1 Succeeded: main serves")
    )
    assert predictors(api, "cli") == [("main", "mnist:v2", 100)]
