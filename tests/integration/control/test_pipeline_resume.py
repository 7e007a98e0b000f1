"""Resuming a pipeline run through the real server, local executor and CLI (issue 19,
evidence 1): a failed run is fixed and resumed without running its successful steps
again, and ``--from`` with a new param reruns only that step and its downstream."""

from __future__ import annotations

import json
from pathlib import Path

from tests.integration.control.serving import Api, running_server
from tests.integration.control.test_cli import ok, phalanx, refused
from tests.integration.control.test_pipelines import admin, ended, pipeline, run, steps

# Each step appends a line to a counter file (its side effect), so a step that is not
# run again leaves its counter as it was; validate runs a script the test rewrites.
RESUMABLE = """\
apiVersion: phalanx/v1
kind: Pipeline
metadata: {name: fixme}
spec:
  params: {lr: 0.01}
  defaults: {queue: wf, resources: {cpu: 1, memory: 256Mi}}
  steps:
    prep:
      command: ["sh", "-c", "echo x >> DIR/prep.count; echo hello > {{outputs.data}}"]
      outputs: {artifacts: [data]}
    train:
      dependsOn: [prep]
      inputs: {artifacts: {data: "{{steps.prep.outputs.data}}"}}
      command: ["sh", "-c", "echo x >> DIR/train.count; tr a-z A-Z < {{inputs.data}} > {{outputs.model}}; echo lr={{params.lr}} >> {{outputs.model}}"]
      outputs: {artifacts: [model]}
    validate:
      inputs: {artifacts: {model: "{{steps.train.outputs.model}}"}}
      command: ["sh", "DIR/validate.sh", "{{inputs.model}}"]
"""


def counts(directory: Path, step: str) -> int:
    path = directory / f"{step}.count"
    return len(path.read_text().splitlines()) if path.exists() else 0


def step_jobs(api: Api, run_id: str) -> list[str]:
    """The jobs submitted for the run's steps (each named after its run)."""
    jobs = api.get("/api/v1/jobs", limit=1000)["items"]
    return sorted(j["name"] for j in jobs if j["name"].startswith(f"{run_id}-"))


def test_a_fixed_run_resumes_without_rerunning_its_successful_steps(tmp_path: Path) -> None:
    scripts = tmp_path / "scripts"
    scripts.mkdir()
    (scripts / "validate.sh").write_text("echo broken >&2; exit 1\n")
    with running_server(tmp_path) as server:
        api = admin(server)
        api.post("/api/v1/pipelines", pipeline(RESUMABLE.replace("DIR", str(scripts))))
        first = run(api, "fixme")
        failed = ended(api, first)
        assert failed["phase"] == "Failed", json.dumps(failed, indent=1)
        assert [s["phase"] for s in failed["steps"]] == ["Succeeded", "Succeeded", "Failed"]
        model = str(tmp_path / "data" / "workspace" / "runs" / first / "train" / "model")
        assert steps(failed)["train"]["outputs"] == {"model": model}

        # An active run, an unknown run and an unknown step are refused.
        assert "no run" in refused(phalanx(server, "pipeline", "resume", "nope"))
        unknown = refused(phalanx(server, "pipeline", "resume", first, "--from", "tune"))
        assert "'tune' is not a step of this pipeline" in unknown

        # Fix the script (it records the model it was given), and resume.
        (scripts / "validate.sh").write_text(f'grep -q HELLO "$1" && echo "$1" > {scripts}/seen\n')
        second = ok(phalanx(server, "pipeline", "resume", first)).strip()
        view = ended(api, second)
        assert view["phase"] == "Succeeded", json.dumps(view, indent=1)
        assert view["resumed_from"] == first
        units = steps(view)
        assert [units[s]["phase"] for s in ("prep", "train", "validate")] == [
            "Cached",
            "Cached",
            "Succeeded",
        ]
        assert units["train"]["reason"] == f"reused from run {first}"
        assert units["train"]["outputs"] == {"model": model}
        assert (counts(scripts, "prep"), counts(scripts, "train")) == (1, 1)  # not run again
        assert (scripts / "seen").read_text().strip() == model  # the original model
        assert step_jobs(api, second) == [units["validate"]["job"]]  # its only job

        # get runs and describe run show the link and the reuse.
        listed = json.loads(ok(phalanx(server, "get", "runs", "-o", "json")))
        assert {r["id"]: r["resumed_from"] for r in listed} == {first: None, second: first}
        assert first in ok(phalanx(server, "get", "runs"))
        described = ok(phalanx(server, "describe", "run", second))
        assert "Resumes" in described and "Cached" in described

        # From train with a new lr: prep is reused, train and validate run again.
        third = ok(
            phalanx(server, "pipeline", "resume", second, "--from", "train", "-p", "lr=0.7")
        ).strip()
        view = ended(api, third)
        assert view["phase"] == "Succeeded", json.dumps(view, indent=1)
        assert view["params"] == {"lr": 0.7} and view["resumed_from"] == second
        units = steps(view)
        assert [units[s]["phase"] for s in ("prep", "train", "validate")] == [
            "Cached",
            "Succeeded",
            "Succeeded",
        ]
        assert units["prep"]["reason"] == f"reused from run {second}"
        assert (counts(scripts, "prep"), counts(scripts, "train")) == (1, 2)
        new_model = tmp_path / "data" / "workspace" / "runs" / third / "train" / "model"
        assert new_model.read_text() == "HELLO\nlr=0.7\n"
        assert (scripts / "seen").read_text().strip() == str(new_model)
        assert step_jobs(api, third) == sorted([units["train"]["job"], units["validate"]["job"]])


def test_the_api_refuses_to_resume_an_active_run_or_with_bad_input(tmp_path: Path) -> None:
    scripts = tmp_path / "scripts"
    scripts.mkdir()
    (scripts / "validate.sh").write_text("sleep 1\n")
    with running_server(tmp_path) as server:
        api = admin(server)
        api.post("/api/v1/pipelines", pipeline(RESUMABLE.replace("DIR", str(scripts))))
        first = run(api, "fixme")
        busy = api.post(f"/api/v1/runs/{first}/resume", {}, expect=409)
        assert "still" in json.dumps(busy)
        assert ended(api, first)["phase"] == "Succeeded"
        typed = api.post(f"/api/v1/runs/{first}/resume", {"params": {"lr": "x"}}, expect=422)
        assert "params.lr" in json.dumps(typed)
        step = api.post(f"/api/v1/runs/{first}/resume", {"from": "tune"}, expect=422)
        assert "not a step" in json.dumps(step)
        api.post("/api/v1/runs/nope/resume", {}, expect=404)
        # A finished run resumed as it is reuses every step: nothing runs again.
        again = api.post(f"/api/v1/runs/{first}/resume", {})["id"]
        view = ended(api, again)
        assert view["phase"] == "Succeeded"
        assert [s["phase"] for s in view["steps"]] == ["Cached"] * 3
        assert step_jobs(api, again) == []
        assert counts(scripts, "prep") == counts(scripts, "train") == 1
