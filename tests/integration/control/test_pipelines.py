"""Pipeline runs through the real server and local executor: registration, runs, the
workflow controller's steps (artifacts, when, finally, stop, restart, foreach)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml

from tests.integration.control.serving import Api, running_server, wait_for

TRI = """\
apiVersion: phalanx/v1
kind: Pipeline
metadata: {name: tri}
spec:
  params: {lr: 0.01}
  defaults: {queue: wf, resources: {cpu: 1, memory: 256Mi}}
  steps:
    prep:
      command: ["sh", "-c", "echo hello > {{outputs.data}}; echo 3 > {{outputs.rows}}"]
      outputs: {artifacts: [data], params: {rows: {type: int}}}
    train:
      dependsOn: [prep]
      inputs: {artifacts: {data: "{{steps.prep.outputs.data}}"}}
      command: ["sh", "-c", "tr a-z A-Z < {{inputs.data}} > {{outputs.model}}; echo lr={{params.lr}} >> {{outputs.model}}"]
      outputs: {artifacts: [model]}
    validate:
      inputs: {artifacts: {model: "{{steps.train.outputs.model}}"}}
      command: ["sh", "-c", "grep -q HELLO {{inputs.model}} && grep -q lr=0.5 {{inputs.model}}"]
"""


def pipeline(text: str) -> dict[str, Any]:
    loaded: dict[str, Any] = yaml.safe_load(text)
    return loaded


def admin(server: Any) -> Api:
    api = Api(server.url, server.admin_token or "")
    api.queue("wf")
    return api


def run(api: Api, name: str, **params: Any) -> str:
    view = api.post(f"/api/v1/pipelines/{name}/runs", {"params": params})
    assert view["phase"] == "Pending"
    run_id: str = view["id"]
    return run_id


def ended(api: Api, run_id: str, timeout: float = 60.0) -> dict[str, Any]:
    found: dict[str, Any] = wait_for(
        lambda: (
            (r := api.get(f"/api/v1/runs/{run_id}"))["phase"]
            in ("Succeeded", "Failed", "Cancelled")
            and r
        ),
        f"run {run_id} ended",
        timeout=timeout,
    )
    return found


def steps(view: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {step["unit"]: step for step in view["steps"]}


def test_tri_runs_to_success_with_its_artifacts_flowing(tmp_path: Path) -> None:
    with running_server(tmp_path) as server:
        api = admin(server)
        api.post("/api/v1/pipelines", pipeline(TRI))
        run_id = run(api, "tri", lr="0.5")
        view = ended(api, run_id)
        assert view["phase"] == "Succeeded", json.dumps(view, indent=1)
        units = steps(view)
        assert [s["phase"] for s in view["steps"]] == ["Succeeded"] * 3
        workspace = tmp_path / "data" / "workspace" / "runs" / run_id
        assert units["prep"]["outputs"] == {"rows": 3, "data": str(workspace / "prep" / "data")}
        model = workspace / "train" / "model"
        assert model.read_text() == "HELLO\nlr=0.5\n"
        for unit in units.values():  # every step ran as its own job of the run's user
            job = api.job(unit["job"])
            assert job["phase"] == "Succeeded" and job["user"] == "admin"
            assert unit["started_at"] <= unit["finished_at"]
        listed = api.get("/api/v1/runs")
        assert [(r["id"], r["pipeline"], r["phase"]) for r in listed] == [
            (run_id, "tri", "Succeeded")
        ]
