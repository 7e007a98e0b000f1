"""An inference service's page, drawn from views the API could give: a rollout's steps
with the one it stands at marked, its history with the window's figures, the document
as YAML; what a tenant wrote is text, never markup. (The server gives no rollouts yet
in the integration tests; here the section is drawn from a view made by hand.)"""

from __future__ import annotations

import re
from typing import Any

import yaml

from phalanx.client import (
    InferenceView,
    PredictorView,
    ReplicaView,
    RolloutStepView,
    RolloutView,
)
from phalanx.web.console import Console
from phalanx.web.formatting import seconds, version
from phalanx.web.services import Step, document_text, steps_of

EVIL = "<script>alert(1)</script>"


def make_rollout(**fields: Any) -> RolloutView:
    values: dict[str, Any] = {
        "id": 7,
        "service": "mnist",
        "predictor": "main",
        "canary": "main-canary",
        "from_version": "mnist:v1@sha256:aaa",
        "to_version": "mnist:v2@sha256:bbb",
        "steps": [10, 50, 100],
        "step": 1,
        "traffic": 50,
        "phase": "Progressing",
        "reason": "waiting for 20 requests in the window",
        "user": "alice",
        "started_at": 1_700_000_000.0,
        "interval_seconds": 60.0,
        "max_error_rate": 0.01,
        "max_p99_seconds": 0.25,
        "min_requests": 20,
        "ready_timeout_seconds": 300.0,
        "history": [
            RolloutStepView(at=1_700_000_000.0, action="started", traffic=10, reason="begun"),
            RolloutStepView(
                at=1_700_000_060.0,
                action="promoted",
                traffic=50,
                reason=f"within the thresholds {EVIL}",
                requests=42,
                errors=1,
                p99_seconds=0.1234,
            ),
        ],
        **fields,
    }
    return RolloutView(**values)


def make_service(rollouts: list[RolloutView]) -> InferenceView:
    replica = ReplicaView(job="mnist-main-1", phase="Running", ready=True, port=40001)
    predictor = PredictorView(
        name="main",
        model_version="mnist:v1@sha256:aaa",
        traffic=100,
        min_replicas=1,
        max_replicas=3,
        ready=1,
        replicas=[replica],
    )
    document = {
        "apiVersion": "phalanx/v1",
        "kind": "Inference",
        "metadata": {"name": "mnist"},
        "spec": {"predictors": [{"name": "main", "env": {"NOTE": EVIL}}]},
    }
    return InferenceView(
        name="mnist",
        user="alice",
        created_at=1_700_000_000.0,
        updated_at=1_700_000_000.0,
        url="/serve/mnist/",
        ready=True,
        predictors=[predictor],
        document=document,
        rollouts=rollouts,
    )


def render(name: str, service: InferenceView, **more: Any) -> str:
    environment = Console(api_url=lambda: "http://api").templates.env
    context = {
        "service": service,
        "replicas": sum(len(p.replicas) for p in service.predictors),
        "steps": {r.id: steps_of(r) for r in service.rollouts},
        "quoted": service.name,
        "user": None,
        **more,
    }
    return environment.get_template(name).render(context)


def test_the_step_a_rollout_stands_at_is_the_one_current() -> None:
    assert steps_of(make_rollout()) == [
        Step(share=10, state="taken"),
        Step(share=50, state="current"),
        Step(share=100, state="ahead"),
    ]
    assert [s.state for s in steps_of(make_rollout(step=0))] == ["current", "ahead", "ahead"]
    assert [s.state for s in steps_of(make_rollout(step=9))] == ["taken", "taken", "current"]


def test_the_document_is_yaml_in_the_apis_key_order() -> None:
    document = make_service([]).document
    text = document_text(document)
    assert yaml.safe_load(text) == document
    assert text.splitlines()[:2] == ["apiVersion: phalanx/v1", "kind: Inference"]


def test_spans_of_seconds_and_versions_read_as_people_read_them() -> None:
    assert (seconds(0.1234), seconds(2.5), seconds(60.0), seconds(None)) == (
        "123.4 ms",
        "2.5 s",
        "60 s",
        "",
    )
    assert version("mnist:v1@sha256:aaa") == "mnist:v1"
    assert version("mnist:v1") == "mnist:v1"


def test_a_rollout_is_drawn_with_its_steps_history_and_figures() -> None:
    ended = make_rollout(
        id=3, phase="RolledBack", step=0, traffic=0, reason="errors 9% > 1%", history=[]
    )
    fragment = render("fragments/inference.html", make_service([make_rollout(), ended]))
    sections = re.findall(r'<section class="rollout[^"]*" data-rollout="(\d+)">', fragment)
    assert sections == ["7", "3"]  # the API's order: newest first
    current = re.findall(r'<span class="step current"[^>]*>(\d+)%</span>', fragment)
    assert current == ["50", "10"]
    assert 'data-phase="RolledBack"' in fragment and "errors 9% &gt; 1%" in fragment
    promoted = re.search(r'<tr data-action="promoted">(.*?)</tr>', fragment)
    assert promoted is not None
    cells = re.findall(r"<td[^>]*>(.*?)</td>", promoted.group(1))
    assert cells[1:6] == ["promoted", "50%", "42", "1", "123.4 ms"]
    assert cells[0] == "2023-11-14 22:14:20"  # UTC
    assert "nothing recorded yet" in fragment  # the rollout without history says so
    assert "p99 at most 250 ms" in fragment and "at most 1% errors" in fragment
    assert EVIL not in fragment and "&lt;script&gt;" in fragment


def test_a_service_without_rollouts_says_so_and_its_page_shows_the_document_as_text() -> None:
    service = make_service([])
    page = render(
        "inference.html",
        service,
        document=document_text(service.document),
        csrf="x",
        page="inferences",
    )
    assert 'id="no-rollouts"' in page
    assert '<a href="/ui/jobs/mnist-main-1">mnist-main-1</a>' in page
    assert 'data-replica="mnist-main-1" data-ready="true"' in page
    assert EVIL not in page
    assert "NOTE: &lt;script&gt;alert(1)&lt;/script&gt;" in page
