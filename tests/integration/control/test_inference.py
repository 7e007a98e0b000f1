"""Inference services through the real server, local executor and gateway (issue 38,
services): a trained model version is served by a predictor whose replicas are jobs the
engine places; the gateway routes ``/serve/NAME/...`` to Ready replicas by the
predictors' traffic shares, only for callers the service admits, and never hands the
caller's token to a replica; applying again changes the predictors; a predictor at
``minReplicas: 0`` starts a replica for the first request and answers it; deleting the
service stops its replicas."""

from __future__ import annotations

import asyncio
import sys
from collections import Counter
from typing import Any

import httpx

from phalanx.control.server import Server
from tests.integration.control.serving import _CLIENTS, Api, wait_for
from tests.integration.control.test_cli import ok, phalanx
from tests.integration.control.test_models import events, train
from tests.integration.control.test_pipelines import admin

#: A replica: answers GET and POST with the model's config, the path and what it was
#: sent (the Authorization header included, which must never arrive), on
#: $PHALANX_HOST:$PORT (its node's address and the port reserved for it there).
SERVER = r"""
import http.server, os, pathlib, time
model = pathlib.Path(os.environ["PHALANX_MODEL_PATH"], "sub", "c").read_text()
class Handler(http.server.BaseHTTPRequestHandler):
    def answer(self, body):
        time.sleep(float(os.environ.get("DELAY", "0")))
        said = f"{model} {self.path} {self.headers.get('Authorization')} {body}".encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(said)))
        self.end_headers()
        self.wfile.write(said)
    def do_GET(self):
        self.answer("")
    def do_POST(self):
        self.answer(self.rfile.read(int(self.headers["Content-Length"])).decode())
    def log_message(self, *args):
        pass
http.server.ThreadingHTTPServer((os.environ["PHALANX_HOST"], int(os.environ["PORT"])), Handler).serve_forever()
"""


def predictor(name: str, version: str, traffic: int = 100, **fields: Any) -> dict[str, Any]:
    return {
        "name": name,
        "modelVersion": version,
        "command": [sys.executable, "-c", SERVER],
        "resources": {"cpu": "100m", "memory": "256Mi"},
        "traffic": traffic,
        **fields,
    }


def inference(name: str, *predictors: dict[str, Any], **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "phalanx/v1",
        "kind": "Inference",
        "metadata": {"name": name},
        "spec": {"queue": "wf", "predictors": list(predictors), **spec},
    }


def trained(api: Api, job: str, content: str) -> None:
    assert train(api, job, "mnist", content)["phase"] == "Succeeded"
    events(api, job, "ModelRegistered")


def ready(api: Api, name: str) -> Any:
    """The service's view once every predictor has a Ready replica."""
    return wait_for(
        lambda: (view := api.get(f"/api/v1/inferences/{name}"))["ready"] and view,
        f"inference {name} Ready",
    )


def test_a_trained_version_is_served_behind_the_gateway_to_those_it_admits(
    server: Server,
) -> None:
    api = admin(server)
    trained(api, "train-1", "one")
    trained(api, "train-2", "two")
    created = api.post("/api/v1/inferences", inference("mnist", predictor("main", "mnist:v1")))
    assert created["url"] == "/serve/mnist/"
    (main,) = created["document"]["spec"]["predictors"]
    assert main["modelVersion"].startswith("mnist:v1@sha256:")
    view = ready(api, "mnist")
    ((replica,),) = [p["replicas"] for p in view["predictors"]]
    assert replica["job"] == "mnist-main-1" and replica["ready"]

    gateway = httpx.Client(base_url=server.url, timeout=30)
    _CLIENTS.append(gateway)
    answer = gateway.post(
        "/serve/mnist/predict?x=1",
        content=b"[1, 2]",
        headers={"Authorization": f"Bearer {api.token}"},
    )
    assert answer.status_code == 200, answer.text
    assert answer.text == "one /predict?x=1 None [1, 2]"  # the token stayed at the gateway

    assert gateway.get("/serve/mnist/predict").status_code == 401
    bob = api.user("bob")
    as_bob = {"Authorization": f"Bearer {bob.token}"}
    assert gateway.get("/serve/mnist/predict", headers=as_bob).status_code == 404
    assert gateway.get("/serve/nothing/predict", headers=as_bob).status_code == 404
    bob.get("/api/v1/inferences/mnist", expect=404)

    # applied again: half the traffic to v2, and bob may call it
    both = inference(
        "mnist",
        predictor("main", "mnist:v1", 50),
        predictor("canary", "mnist:v2", 50),
        callers=["bob"],
    )
    api.http.put("/api/v1/inferences/mnist", json=both).raise_for_status()
    wait_for(
        lambda: all(p["ready"] for p in api.get("/api/v1/inferences/mnist")["predictors"]),
        "both predictors Ready",
    )
    seen = Counter(gateway.get("/serve/mnist/", headers=as_bob).text.split()[0] for _ in range(60))
    assert set(seen) == {"one", "two"} and min(seen.values()) >= 10, seen

    table = ok(phalanx(server, "get", "inferences"))
    assert "mnist" in table and "canary mnist:v2 50% 1/1" in table, table
    assert "mnist-canary-2" in ok(phalanx(server, "describe", "inference", "mnist"))

    # a version a service serves cannot be deleted
    refused = api.http.delete("/api/v1/models/mnist/versions/2")
    assert refused.status_code == 409 and "mnist:v2 is read by" in refused.json()["detail"]

    assert ok(phalanx(server, "delete", "inference", "mnist")).strip() == "inference/mnist deleted"
    assert gateway.get("/serve/mnist/", headers=as_bob).status_code == 404
    for job in ("mnist-main-1", "mnist-canary-2"):
        wait_for(lambda job=job: api.http.get(f"/api/v1/jobs/{job}").status_code == 404, job)


def test_a_predictor_at_zero_replicas_starts_one_for_the_first_request(server: Server) -> None:
    api = admin(server)
    trained(api, "train", "one")
    api.post("/api/v1/inferences", inference("cold", predictor("main", "mnist", minReplicas=0)))
    view = api.get("/api/v1/inferences/cold")
    assert view["predictors"][0]["replicas"] == [] and not view["ready"]
    gateway = httpx.Client(base_url=server.url, timeout=60)
    _CLIENTS.append(gateway)
    answer = gateway.get("/serve/cold/hello", headers={"Authorization": f"Bearer {api.token}"})
    assert answer.status_code == 200, answer.text
    assert answer.text.startswith("one /hello")
    assert api.get("/api/v1/inferences/cold")["predictors"][0]["ready"] == 1


def test_a_bad_service_is_refused_naming_the_field(server: Server) -> None:
    api = admin(server)
    trained(api, "train", "one")
    for document, status, field in (
        (
            inference("x", predictor("a", "mnist", 60), predictor("b", "mnist", 30)),
            422,
            "spec.predictors",
        ),
        (inference("x", predictor("a", "mnist:v9")), 404, "spec.predictors[0].modelVersion"),
        (inference("x", predictor("a", "mnist", minReplicas=3, maxReplicas=2)), 422, "minReplicas"),
        (inference("x", predictor("a", "mnist"), queue="nowhere"), 422, "spec.queue"),
        (inference("x.y", predictor("a", "mnist")), 422, "metadata.name"),
    ):
        answer = api.post("/api/v1/inferences", document, expect=status)
        assert field in answer["field"], answer
        assert answer["fix"], answer


def test_a_burst_scales_a_predictor_out_within_its_bounds(server: Server) -> None:
    api = admin(server)
    trained(api, "train", "one")
    slow = predictor("main", "mnist", minReplicas=1, maxReplicas=3, concurrency=1)
    slow["env"] = {"DELAY": "0.4"}
    api.post("/api/v1/inferences", inference("busy", slow))
    ready(api, "busy")
    token = {"Authorization": f"Bearer {api.token}"}

    async def burst() -> list[int]:
        async with httpx.AsyncClient(base_url=server.url, timeout=120) as client:
            answers = await asyncio.gather(
                *(client.get(f"/serve/busy/{i}", headers=token) for i in range(24))
            )
        return [answer.status_code for answer in answers]

    assert asyncio.run(burst()) == [200] * 24  # held while the replicas were busy
    replicas = api.get("/api/v1/inferences/busy")["predictors"][0]["replicas"]
    assert len(replicas) == 3, replicas  # panic: twelve times the demand one replica carries
