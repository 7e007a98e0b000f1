"""The rollout body and its document changes: steps rise to 100, ``vN`` names a version
of the predictor's own model, and splitting, rolling back and promoting keep a valid
Inference whose shares sum to 100."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from phalanx.control.controllers.rollouts import judge
from phalanx.gateway.tallies import Tallies
from phalanx.spec.diagnostics import problems_of
from phalanx.spec.inference import InferenceDocument
from phalanx.spec.rollout import RolloutSpec, canary_name, promoted, rolled_back, split

V1 = "mnist:v1@sha256:" + "1" * 64
V2 = "mnist:v2@sha256:" + "2" * 64


def service(*shares: int) -> InferenceDocument:
    names = ["main", "b", "c"]
    return InferenceDocument.model_validate(
        {
            "apiVersion": "phalanx/v1",
            "kind": "Inference",
            "metadata": {"name": "svc"},
            "spec": {
                "predictors": [
                    {
                        "name": names[i],
                        "modelVersion": V1,
                        "command": ["serve"],
                        "resources": {"cpu": 1},
                        "minReplicas": 0,
                        "maxReplicas": 4,
                        "traffic": share,
                    }
                    for i, share in enumerate(shares)
                ]
            },
        }
    )


def refused(body: dict[str, Any]) -> tuple[str, str]:
    with pytest.raises(ValidationError) as caught:
        RolloutSpec.model_validate(body)
    problem = problems_of(caught.value)[0]
    return problem.path, problem.detail


def test_defaults_and_versions_of_the_predictors_own_model() -> None:
    spec = RolloutSpec.model_validate({"to": "v2"})
    assert spec.steps == [10, 50, 100] and spec.interval == 60 and spec.max_p99 is None
    assert spec.reference("mnist") == "mnist:v2"
    assert RolloutSpec.model_validate({"to": "other:v3"}).reference("mnist") == "other:v3"
    timed = RolloutSpec.model_validate({"to": "v2", "interval": "30s", "maxP99": 0.25})
    assert (timed.interval, timed.max_p99) == (30.0, 0.25)


@pytest.mark.parametrize(
    ("body", "path", "said"),
    [
        ({"to": "v2", "steps": [10, 5, 100]}, "steps[1]", "does not rise"),
        ({"to": "v2", "steps": [0, 100]}, "steps[0]", "not a share"),
        ({"to": "v2", "steps": [10, 50]}, "steps", "not 100"),
        ({"to": "v2", "maxErrorRate": 2}, "maxErrorRate", "<= 1"),
        ({"to": "v2", "interval": "soon"}, "interval", "not a duration"),
        ({"steps": [100]}, "to", "required"),
        ({"to": "v2", "colour": "red"}, "colour", ""),
    ],
)
def test_bad_bodies_name_the_field(body: dict[str, Any], path: str, said: str) -> None:
    where, detail = refused(body)
    assert where == path and said in detail


def test_split_gives_the_canary_its_share_of_the_predictors_traffic_only() -> None:
    document = service(60, 40)
    canary = canary_name("main")
    first = split(document, "main", canary, V2, base=60, share=10)
    shares = {p.name: p.traffic for p in first.spec.predictors}
    assert shares == {"main": 54, "main-canary": 6, "b": 40}
    made = next(p for p in first.spec.predictors if p.name == canary)
    assert made.model_version == V2 and made.min_replicas == 1 and made.most_replicas == 4
    assert [p.name for p in first.spec.predictors] == ["main", "main-canary", "b"]
    half = split(first, "main", canary, V2, base=60, share=50)
    assert {p.name: p.traffic for p in half.spec.predictors} == {
        "main": 30,
        "main-canary": 30,
        "b": 40,
    }
    assert rolled_back(half, "main", canary, base=60) == document
    done = promoted(half, "main", canary, V2, base=60)
    assert [(p.name, p.model_version, p.traffic) for p in done.spec.predictors] == [
        ("main", V2, 60),
        ("b", V1, 40),
    ]
    assert canary_name("x" * 63) == "x" * 56 + "-canary"


def test_a_window_is_judged_only_with_enough_requests() -> None:
    spec = RolloutSpec.model_validate({"to": "v2", "minRequests": 10, "maxP99": 0.1})
    tallies = Tallies()
    for _ in range(9):
        tallies.record("s", "c", 500, 0.001)
    assert judge(tallies.read("s", "c"), spec) is None  # 9 errors, too few to judge
    tallies.record("s", "c", 200, 0.001)
    said = judge(tallies.read("s", "c"), spec)
    assert said is not None and said.startswith("error rate 90.0% is over the most 1.0%")
    slow = Tallies()
    for _ in range(20):
        slow.record("s", "c", 200, 0.4)
    late = judge(slow.read("s", "c"), spec)
    assert late is not None and "p99 latency" in late and "over the most 100 ms" in late
    fine = Tallies()
    for _ in range(20):
        fine.record("s", "c", 200, 0.004)
    assert judge(fine.read("s", "c"), spec) is None


def _predictor(**fields: Any) -> dict[str, Any]:
    return {"name": "main", "modelVersion": V1, "resources": {"cpu": 1}, **fields}


@pytest.mark.parametrize(
    ("fields", "path", "said"),
    [
        ({}, "spec.predictors[0].command", "it names neither"),
        (
            {"command": ["serve"], "runtime": "torchscript"},
            "spec.predictors[0].runtime",
            "not both",
        ),
        (
            {"runtime": "torchscript", "image": "localhost/x:1"},
            "spec.predictors[0].image",
            "on the host",
        ),
        ({"runtime": "onnx"}, "spec.predictors[0].runtime", "onnx"),
    ],
)
def test_a_predictor_runs_a_command_or_the_built_in_runtime(
    fields: dict[str, Any], path: str, said: str
) -> None:
    body = {
        "apiVersion": "phalanx/v1",
        "kind": "Inference",
        "metadata": {"name": "svc"},
        "spec": {"predictors": [_predictor(**fields)]},
    }
    with pytest.raises(ValidationError) as caught:
        InferenceDocument.model_validate(body)
    problem = problems_of(caught.value)[0]
    assert problem.path == path and said in problem.detail, problem


def test_the_built_in_runtime_runs_with_the_servers_python_under_the_models_name() -> None:
    document = InferenceDocument.model_validate(
        {
            "apiVersion": "phalanx/v1",
            "kind": "Inference",
            "metadata": {"name": "svc"},
            "spec": {"predictors": [_predictor(runtime="torchscript")]},
        }
    )
    (predictor,) = document.spec.predictors
    job = document.replica_job(predictor, "svc-main-1", python="/opt/py")
    (role,) = job.spec.roles
    assert role.command == ["/opt/py", "-m", "phalanx.runtimes.torchscript", "--name", "mnist"]
    # the executor reserves its port on the node it lands on: the document names none
    assert "PORT" not in role.env and role.model_version == V1


def test_a_predictor_may_not_set_its_own_port() -> None:
    with pytest.raises(ValidationError, match="PORT is set for each replica"):
        InferenceDocument.model_validate(
            {
                "apiVersion": "phalanx/v1",
                "kind": "Inference",
                "metadata": {"name": "svc"},
                "spec": {"predictors": [_predictor(runtime="torchscript", env={"PORT": "80"})]},
            }
        )
