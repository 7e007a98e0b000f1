"""How many replicas a predictor wants: its minReplicas; at minReplicas 0, one while
the gateway saw demand within the idle grace, none after."""

from __future__ import annotations

from pathlib import Path

from phalanx.control.controllers.serving import Serving
from phalanx.control.store.database import Database, sqlite_url
from phalanx.spec.inference import PredictorSpec


def predictor(**fields: object) -> PredictorSpec:
    return PredictorSpec.model_validate(
        {
            "name": "main",
            "modelVersion": "m:v1",
            "command": ["serve"],
            "resources": {"cpu": 1},
            **fields,
        }
    )


def test_a_predictor_at_zero_wants_one_replica_while_requests_come(tmp_path: Path) -> None:
    now = [100.0]
    serving = Serving(
        Database.open(sqlite_url(tmp_path)),
        publish=lambda _: None,
        on_stored=lambda _: None,
        idle_grace=30.0,
        clock=lambda: now[0],
    )
    assert serving.wanted("svc", predictor(minReplicas=2, maxReplicas=5)) == 2
    cold = predictor(minReplicas=0, maxReplicas=3)
    assert serving.wanted("svc", cold) == 0
    serving.demand("svc")  # a request found no replica
    assert serving.wanted("svc", cold) == 1
    now[0] += 29.0
    serving.saw_request("svc")  # served: still busy
    now[0] += 29.0
    assert serving.wanted("svc", cold) == 1
    now[0] += 1.5
    assert serving.wanted("svc", cold) == 0  # 30 s without a request
    assert serving.wanted("other", cold) == 0


def test_new_demand_starts_a_pass_at_once_even_right_after_an_admitted_call(
    tmp_path: Path,
) -> None:
    now = [100.0]
    serving = Serving(
        Database.open(sqlite_url(tmp_path)),
        publish=lambda _: None,
        on_stored=lambda _: None,
        period=1.0,
        clock=lambda: now[0],
    )
    poked = serving._ticker._poked
    serving.saw_request("svc")  # the gateway admitted the call first
    serving.demand("svc")  # then found no replica
    assert poked.is_set()
    poked.clear()
    now[0] += 0.5
    serving.demand("svc")  # the same demand again within a period: the passes come anyway
    assert not poked.is_set()
    now[0] += 0.6
    serving.demand("svc")
    assert poked.is_set()
