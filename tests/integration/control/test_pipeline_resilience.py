"""Evidence 5 of the workflow issue, through the real server and local executor: a
preempted step is retried by its step's policy after the backoff (and fails, saying how
to retry it, when its policy does not retry preemptions); a plain non-zero exit is not
retried unless asked; a step past its timeout is killed and marked so."""

from __future__ import annotations

from pathlib import Path

from tests.integration.control.serving import role, running_server, wait_for
from tests.integration.control.test_cli import ok, phalanx
from tests.integration.control.test_pipelines import admin, ended, pipeline, run, steps

BUMPED = """\
apiVersion: phalanx/v1
kind: Pipeline
metadata: {name: bumped}
spec:
  defaults: {queue: wf}
  onFailure: continue
  steps:
    retried:
      retry: {maxAttempts: 2, backoff: {initial: 2s}}
      job:
        priority: 1
        roles:
        - name: main
          replicas: 1
          resources: {cpu: 1, memory: 1Gi, gpu: 4}
          command: ["sh", "-c", "echo $PHALANX_STEP >> MARKS; [ $(grep -cx $PHALANX_STEP MARKS) -ge 2 ] || sleep 120"]
    unretried:
      retry: {maxAttempts: 2, on: [failed]}
      job:
        priority: 1
        roles:
        - name: main
          replicas: 1
          resources: {cpu: 1, memory: 1Gi, gpu: 4}
          command: ["sh", "-c", "echo $PHALANX_STEP >> MARKS; [ $(grep -cx $PHALANX_STEP MARKS) -ge 2 ] || sleep 120"]
"""

ENDINGS = """\
apiVersion: phalanx/v1
kind: Pipeline
metadata: {name: endings}
spec:
  defaults: {queue: wf, resources: {cpu: 1, memory: 256Mi}}
  onFailure: continue
  steps:
    slow: {command: "sleep 60", timeout: 1s}
    broken: {command: "exit 3"}
"""


def test_a_preempted_step_is_retried_after_its_backoff_or_fails_saying_how(
    tmp_path: Path,
) -> None:
    marks = tmp_path / "marks"
    with running_server(tmp_path) as server:
        api = admin(server)
        api.post("/api/v1/pipelines", pipeline(BUMPED.replace("MARKS", str(marks))))
        run_id = run(api, "bumped")
        wait_for(
            lambda: marks.exists() and len(marks.read_text().split()) == 2, "both steps running"
        )
        first = {
            unit: view["job"] for unit, view in steps(api.get(f"/api/v1/runs/{run_id}")).items()
        }
        # A job of priority 100 needs the whole cluster (2 nodes x 4 GPUs): both steps' jobs
        # are preempted. (A step's first attempt would run for 2 minutes, a second one ends
        # at once.)
        api.submit("high", "wf", role(replicas=2, command="sleep 1", gpu=4), priority=100)
        view = ended(api, run_id)
        assert view["phase"] == "Failed"
        units = steps(view)

        retried = units["retried"]
        assert retried["phase"] == "Succeeded" and retried["attempt"] == 2
        assert retried["job"] != first["retried"]
        bumped = api.job(first["retried"])
        assert bumped["phase"] == "Cancelled" and bumped["preemptions"] >= 1
        evicted = min(
            e["time"]
            for e in api.get(f"/api/v1/jobs/{first['retried']}/events")
            if e["kind"] == "Evicted"
        )
        assert api.job(retried["job"])["created_at"] >= evicted + 2.0  # the backoff was kept

        unretried = units["unretried"]
        assert unretried["phase"] == "Failed" and unretried["attempt"] == 1
        assert f"job {first['unretried']} was preempted" in unretried["reason"]
        assert "fix: add preempted to the step's retry.on" in unretried["reason"]
        assert api.job(first["unretried"])["phase"] == "Cancelled"
        assert marks.read_text().split().count("retried") == 2
        assert marks.read_text().split().count("unretried") == 1


def test_a_plain_failure_is_not_retried_and_a_step_past_its_timeout_is_killed(
    tmp_path: Path,
) -> None:
    with running_server(tmp_path) as server:
        api = admin(server)
        api.post("/api/v1/pipelines", pipeline(ENDINGS))
        view = ended(api, run(api, "endings"))
        assert view["phase"] == "Failed"
        units = steps(view)

        slow = units["slow"]
        assert slow["phase"] == "Failed" and slow["attempt"] == 1
        assert slow["reason"].startswith(f"job {slow['job']} timed out")
        job = api.job(slow["job"])
        assert job["reason"] == "WalltimeExceeded"
        assert job["tasks"][0]["exit_code"] in (143, 137, -15)  # killed, not finished
        assert slow["finished_at"] - slow["started_at"] < 30  # well before its 60 s

        broken = units["broken"]
        assert broken["phase"] == "Failed" and broken["attempt"] == 1
        # Its own failure: a rerun would repeat it, so the fix is its log, not retry.on.
        fix = f"fix: see what it said: phalanx logs {broken['job']} --stderr"
        assert broken["reason"].endswith(fix) and "retry.on" not in broken["reason"]
        # describe run wraps each step's reason to the width of a pipe's 80 columns.
        described = ok(phalanx(server, "describe", "run", view["id"]))
        reasons = described.split("\nReasons\n", 1)[1].splitlines()
        assert reasons and all(len(line) <= 80 for line in reasons), described
        assert " ".join(" ".join(reasons).split()).count(fix) == 1
        kinds = [e["kind"] for e in api.get(f"/api/v1/jobs/{broken['job']}/events")]
        assert kinds.count("TaskFailed") == 1 and "Pending" not in kinds  # ran once
