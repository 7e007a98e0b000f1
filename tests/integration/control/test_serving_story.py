"""The serving story end to end on a real server (issue 38): the ``serve-model`` example
pipeline trains a small torch network and registers ``example:v1``; a service serves it
with the built-in TorchScript runtime and answers predictions equal to the model's own;
a second run registers ``v2`` and a rollout at 10/50/100 moves the service to it; a
deliberately broken ``v3`` (a model whose output is not one row per instance, so the
runtime answers 500) is rolled back by itself."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pytest

from phalanx.examples.pipelines.model import TRAIN_FILE, load_split
from tests.integration.control.serving import _CLIENTS, Api, running_server, wait_for
from tests.integration.control.test_pipeline_examples import _apply, _run
from tests.integration.control.test_pipelines import steps
from tests.integration.control.test_rollouts import Traffic, ended

pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("torch") is None,
    reason="torch is not installed (make test installs the CPU build)",
)

#: A job writing a TorchScript model that sums its whole batch: one number, not a row per
#: instance, which the runtime refuses to pass on (500).
BROKEN = r"""
import pathlib, torch, warnings
warnings.simplefilter("ignore", DeprecationWarning)
class Sum(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x.sum()
pathlib.Path("model").mkdir()
torch.jit.save(torch.jit.trace(Sum(), torch.zeros(2, 8)), "model/model.pt")
"""


def service(version: str) -> dict[str, Any]:
    return {
        "apiVersion": "phalanx/v1",
        "kind": "Inference",
        "metadata": {"name": "example"},
        "spec": {
            "queue": "examples",
            "predictors": [
                {
                    "name": "main",
                    "modelVersion": version,
                    "runtime": "torchscript",
                    "env": {"OMP_NUM_THREADS": "1"},
                    "resources": {"cpu": "1", "memory": "1Gi"},
                }
            ],
        },
    }


def predicted(gateway: httpx.Client, rows: list[list[float]]) -> list[float]:
    answer = gateway.post("/serve/example/v1/models/example:predict", json={"instances": rows})
    assert answer.status_code == 200, answer.text
    return answer.json()["predictions"]  # type: ignore[no-any-return]


@pytest.mark.filterwarnings("ignore:`torch.jit.load` is deprecated:DeprecationWarning")
def test_a_trained_model_is_served_rolled_forward_and_a_broken_one_back(tmp_path: Path) -> None:
    import torch

    with running_server(tmp_path) as server:
        api = Api(server.url, server.admin_token or "")
        _apply(server, "queue.yaml", "serve-model.yaml")
        first = steps(_run(server, api, "serve-model", "epochs=50"))
        assert first["train"]["phase"] == "Succeeded"
        wait_for(lambda: api.get("/api/v1/models"), "example:v1 registered", timeout=60)
        v1 = api.get("/api/v1/models/example/versions/1")
        assert [f["path"] for f in v1["contents"]] == ["model.pt"]

        api.post("/api/v1/inferences", service("example"))
        wait_for(lambda: api.get("/api/v1/inferences/example")["ready"], "served", timeout=60)
        gateway = httpx.Client(
            base_url=server.url, headers={"Authorization": f"Bearer {api.token}"}, timeout=30
        )
        _CLIENTS.append(gateway)
        data = Path(first["prep"]["outputs"]["data"])
        rows = load_split(data / TRAIN_FILE)[0][:5].tolist()
        answers = predicted(gateway, rows)
        assert len(answers) == 5 and all(0.0 < p < 1.0 for p in answers)
        # the same numbers as the registered model computes itself
        loaded = torch.jit.load(_stored_model(server, v1))
        expected = loaded(torch.tensor(rows, dtype=torch.float32)).tolist()
        assert np.allclose(answers, expected, atol=1e-6)
        refused = gateway.post(
            "/serve/example/v1/models/example:predict", json={"instances": [[1]]}
        )
        assert refused.status_code == 400 and refused.json()["field"] == "instances"

        _run(server, api, "serve-model", "epochs=50", "seed=1")
        wait_for(lambda: api.get("/api/v1/models")[0]["versions"] == 2, "example:v2", timeout=60)
        quick = {"steps": [10, 50, 100], "interval": 1, "minRequests": 5}
        predict = "v1/models/example:predict"
        with Traffic(
            server, api.token, "example", predict, {"instances": rows}
        ).flowing() as traffic:
            forward = api.post("/api/v1/inferences/example/rollouts", {"to": "v2", **quick})
            done = ended(api, "example", forward["id"], timeout=120)
            assert done["phase"] == "Succeeded", done

            broken = {
                "name": "m",
                "replicas": 1,
                "resources": {"cpu": 1, "memory": "1Gi"},
                "command": [sys.executable, "-c", BROKEN],
                "model": {"name": "example", "path": "model"},
            }
            api.submit("broken", "examples", broken)
            assert (
                api.wait_phase("broken", "Succeeded", "Failed", timeout=60)["phase"] == "Succeeded"
            )
            wait_for(
                lambda: api.get("/api/v1/models")[0]["versions"] == 3, "example:v3", timeout=60
            )
            back = api.post("/api/v1/inferences/example/rollouts", {"to": "v3", **quick})
            rolled = ended(api, "example", back["id"], timeout=120)
        assert rolled["phase"] == "RolledBack"
        assert rolled["history"][-1]["reason"].startswith("error rate 100.0%")
        (main,) = api.get("/api/v1/inferences/example")["predictors"]
        assert main["model_version"].startswith("example:v2@") and main["traffic"] == 100
        assert set(traffic.seen) - {"500"}, traffic.seen  # predictions came throughout
        assert traffic.seen["500"] <= 10 * rolled["history"][-1]["requests"]
        assert len(predicted(gateway, rows)) == 5


def _stored_model(server: Any, version: dict[str, Any]) -> str:
    """Where the server's model store keeps ``version``'s model.pt (local store)."""
    (entry,) = version["contents"]
    root = Path(server.settings.data_dir) / "models"
    found = [p for p in root.rglob("*") if p.is_file() and entry["digest"].split(":")[-1] in p.name]
    assert found, f"no blob of {entry['digest']} under {root}"
    return str(found[0])
