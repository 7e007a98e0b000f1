"""Sub-pipelines through the real server: a step that runs a registered pipeline as a
child run, with params from upstream outputs; its failure, a stop, and a pipeline that
would run itself."""

from __future__ import annotations

from pathlib import Path

from tests.integration.control.serving import running_server, wait_for
from tests.integration.control.test_pipelines import admin, ended, pipeline, run, steps

CHILD = """\
apiVersion: phalanx/v1
kind: Pipeline
metadata: {name: child}
spec:
  params: {word: x, nap: 0}
  defaults: {queue: wf, resources: {cpu: 1, memory: 256Mi}}
  steps:
    say:
      command: "sleep {{params.nap}}; echo {{params.word}} > {{outputs.said}}; [ {{params.word}} != bad ]"
      outputs: {artifacts: [said]}
"""

PARENT = """\
apiVersion: phalanx/v1
kind: Pipeline
metadata: {name: parent}
spec:
  params: {word: hello, nap: 0}
  defaults: {queue: wf, resources: {cpu: 1, memory: 256Mi}}
  steps:
    pick:
      command: "echo '{\\"w\\": \\"{{params.word}}\\"}' > {{outputs.m}}"
      outputs: {artifacts: [m], params: {word: {fromArtifact: m, key: w}}}
    sub:
      pipeline: {name: child, params: {word: "{{steps.pick.outputs.word}}", nap: "{{params.nap}}"}}
    after: {dependsOn: [sub], command: "true"}
"""

LOOP = """\
apiVersion: phalanx/v1
kind: Pipeline
metadata: {name: loop}
spec:
  steps:
    again: {pipeline: {name: loop}}
"""


def test_a_sub_pipeline_step_runs_a_child_run_and_ends_as_it_ends(tmp_path: Path) -> None:
    with running_server(tmp_path) as server:
        api = admin(server)
        for text in (CHILD, PARENT, LOOP):
            api.post("/api/v1/pipelines", pipeline(text))

        parent_id = run(api, "parent")
        view = ended(api, parent_id)
        assert view["phase"] == "Succeeded"
        sub = steps(view)["sub"]
        assert sub["phase"] == "Succeeded" and sub["job"] == f"{parent_id}-sub-1"
        child = api.get(f"/api/v1/runs/{sub['job']}")
        assert (child["pipeline"], child["parent"], child["user"]) == ("child", parent_id, "admin")
        assert child["params"] == {"word": "hello", "nap": 0} and child["phase"] == "Succeeded"
        said = tmp_path / "data" / "workspace" / "runs" / child["id"] / "say" / "said"
        assert said.read_text() == "hello\n"
        assert steps(view)["after"]["phase"] == "Succeeded"

        # The child fails: the step fails with the child's reason, and so does the run.
        failing = ended(api, run(api, "parent", word="bad"))
        assert failing["phase"] == "Failed"
        reason = steps(failing)["sub"]["reason"]
        assert reason.startswith(f"run {failing['id']}-sub-1 failed: step say failed")
        assert steps(failing)["after"]["phase"] == "Skipped"

        # A stop of the parent stops its child.
        slow = run(api, "parent", nap=120)
        wait_for(
            lambda: steps(api.get(f"/api/v1/runs/{slow}"))["sub"]["phase"] == "Running",
            "the sub-pipeline step running",
        )
        api.post(f"/api/v1/runs/{slow}/stop", expect=200)
        assert ended(api, slow)["phase"] == "Cancelled"
        assert api.get(f"/api/v1/runs/{slow}-sub-1")["phase"] == "Cancelled"

        # A pipeline that would run itself fails its step, naming the cycle.
        looped = ended(api, run(api, "loop"))
        assert looped["phase"] == "Failed"
        assert "pipeline loop would run itself (loop -> loop)" in steps(looped)["again"]["reason"]
