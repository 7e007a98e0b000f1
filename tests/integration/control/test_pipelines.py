"""Pipeline runs through the real server and local executor: registration, runs, the
workflow controller's steps (artifacts, when, finally, stop, restart, foreach)."""

from __future__ import annotations

import json
import re
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.integration.control import processes
from tests.integration.control.serving import Api, database_url, running_server, wait_for
from tests.integration.control.test_cli import ok, phalanx, refused

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


@pytest.mark.parametrize("elsewhere", [False, True], ids=["default-workspace", "file-url"])
def test_tri_runs_to_success_with_its_artifacts_flowing(tmp_path: Path, elsewhere: bool) -> None:
    given = f"file://{tmp_path}/elsewhere" if elsewhere else None
    with running_server(tmp_path, workspace=given) as server:
        api = admin(server)
        api.post("/api/v1/pipelines", pipeline(TRI))
        run_id = run(api, "tri", lr="0.5")
        view = ended(api, run_id)
        assert view["phase"] == "Succeeded", json.dumps(view, indent=1)
        units = steps(view)
        assert [s["phase"] for s in view["steps"]] == ["Succeeded"] * 3
        root = tmp_path / "elsewhere" if elsewhere else tmp_path / "data" / "workspace"
        workspace = root / "runs" / run_id
        assert units["prep"]["outputs"] == {"rows": 3, "data": str(workspace / "prep" / "data")}
        model = workspace / "train" / "model"
        assert model.read_text() == "HELLO\nlr=0.5\n"
        for unit in units.values():  # every step ran as its own job of the run's user
            job = api.job(unit["job"])
            assert job["phase"] == "Succeeded" and job["user"] == "admin"
            assert unit["started_at"] <= unit["finished_at"]
        listed = api.get("/api/v1/runs")["items"]
        assert [(r["id"], r["pipeline"], r["phase"]) for r in listed] == [
            (run_id, "tri", "Succeeded")
        ]


BRANCHES = """\
apiVersion: phalanx/v1
kind: Pipeline
metadata: {name: branches}
spec:
  params: {promote: false}
  defaults: {queue: wf, resources: {cpu: 1, memory: 256Mi}}
  steps:
    train:
      command: "echo '{\\"accuracy\\": 0.9}' > {{outputs.metrics}}"
      outputs: {artifacts: [metrics], params: {accuracy: {fromArtifact: metrics, key: accuracy, type: float}}}
    flaky:
      retry: {maxAttempts: 3, on: [failed], backoff: {initial: 0.1}}
      command: "if [ -e {{outputs.mark}} ]; then exit 0; fi; touch {{outputs.mark}}; exit 1"
      outputs: {artifacts: [mark]}
    promote:
      dependsOn: [flaky]
      when: "{{params.promote}} == true and {{steps.train.outputs.accuracy}} > 0.5"
      command: "true"
  finally:
    always: {command: "true"}
"""

FAILING = """\
apiVersion: phalanx/v1
kind: Pipeline
metadata: {name: failing}
spec:
  defaults: {queue: wf, resources: {cpu: 1, memory: 256Mi}}
  steps:
    first: {command: "true"}
    broken: {dependsOn: [first], command: "exit 3"}
    after: {dependsOn: [broken], command: "true"}
  finally:
    cleanup:
      command: "echo cleaned > {{outputs.note}}"
      outputs: {artifacts: [note]}
"""

SLOW = """\
apiVersion: phalanx/v1
kind: Pipeline
metadata: {name: slow}
spec:
  defaults: {queue: wf, resources: {cpu: 1, memory: 256Mi}}
  steps:
    nap: {command: "sleep 120"}
    never: {dependsOn: [nap], command: "true"}
  finally:
    cleanup: {command: "true"}
"""


def test_when_false_is_skipped_retries_follow_the_policy_and_the_run_succeeds(
    tmp_path: Path,
) -> None:
    with running_server(tmp_path) as server:
        api = admin(server)
        api.post("/api/v1/pipelines", pipeline(BRANCHES))
        view = ended(api, run(api, "branches"))
        assert view["phase"] == "Succeeded", json.dumps(view, indent=1)
        units = steps(view)
        assert units["train"]["outputs"]["accuracy"] == 0.9
        assert units["promote"]["phase"] == "Skipped"
        assert units["promote"]["job"] == ""  # never ran
        assert "when is false" in units["promote"]["reason"]
        assert units["flaky"]["phase"] == "Succeeded" and units["flaky"]["attempt"] == 2
        assert units["always"]["phase"] == "Succeeded"  # finally runs after a success too
        first = units["flaky"]["job"].removesuffix("-2") + "-1"
        assert api.job(first)["phase"] == "Failed"  # one job per attempt
        promoted = ended(api, run(api, "branches", promote=True))
        assert steps(promoted)["promote"]["phase"] == "Succeeded"


def test_a_failing_step_fails_the_run_fast_and_its_finally_step_runs(tmp_path: Path) -> None:
    with running_server(tmp_path) as server:
        api = admin(server)
        api.post("/api/v1/pipelines", pipeline(FAILING))
        run_id = run(api, "failing")
        view = ended(api, run_id)
        assert view["phase"] == "Failed"
        units = steps(view)
        assert [units[s]["phase"] for s in ("first", "broken", "after", "cleanup")] == [
            "Succeeded",
            "Failed",
            "Skipped",
            "Succeeded",
        ]
        assert "failed" in units["broken"]["reason"]
        assert view["message"].startswith("step broken failed: job ")
        assert units["cleanup"]["started_at"] >= units["broken"]["finished_at"]
        note = tmp_path / "data" / "workspace" / "runs" / run_id / "cleanup" / "note"
        assert note.read_text() == "cleaned\n"


def test_deleting_a_run_cancels_its_jobs_then_runs_finally(tmp_path: Path) -> None:
    with running_server(tmp_path) as server:
        api = admin(server)
        api.post("/api/v1/pipelines", pipeline(SLOW))
        run_id = run(api, "slow")
        nap = wait_for(
            lambda: (
                (s := steps(api.get(f"/api/v1/runs/{run_id}"))["nap"])["job"]
                and api.job(s["job"])["phase"] == "Running"
                and s
            ),
            "the nap step running",
        )
        asked = time.monotonic()
        response = api.http.delete(f"/api/v1/runs/{run_id}")
        assert response.status_code == 200 and response.json()["stop_requested"]
        view = ended(api, run_id)
        assert time.monotonic() - asked < 10  # the grace is 1 s with FAST timing
        assert view["phase"] == "Cancelled" and view["message"] == "stopped by request"
        units = steps(view)
        assert units["nap"]["phase"] == "Cancelled"
        assert api.job(nap["job"])["phase"] == "Cancelled"
        assert units["never"]["phase"] == "Cancelled" and units["never"]["job"] == ""
        assert units["cleanup"]["phase"] == "Succeeded"
        gone = api.http.delete(f"/api/v1/runs/{run_id}")  # an ended run is forgotten
        assert gone.status_code == 200
        api.get(f"/api/v1/runs/{run_id}", expect=404)


FANOUT = """\
apiVersion: phalanx/v1
kind: Pipeline
metadata: {name: sweep}
spec:
  defaults: {queue: gpus, resources: {cpu: 100m, memory: 64Mi, gpu: 1}}
  steps:
    items:
      command: "python3 -c 'import json; print(json.dumps(list(range(200))))' > {{outputs.list}}"
      outputs: {params: {list: {type: list}}}
    each:
      foreach: {items: "{{steps.items.outputs.list}}", maxItems: 500, maxParallel: 8}
      command: "echo {{item}}"
"""


def test_a_200_item_foreach_keeps_to_max_parallel_and_its_gpu_queue_capability(
    tmp_path: Path,
) -> None:
    with running_server(tmp_path) as server:
        api = admin(server)
        api.queue("gpus", capability={"gpu": 6})  # of the cluster's 8
        api.post("/api/v1/pipelines", pipeline(FANOUT))
        run_id = run(api, "sweep")
        view = ended(api, run_id, timeout=240)
        assert view["phase"] == "Succeeded", view["message"]
        units = [s for s in view["steps"] if s["unit"].startswith("each[")]
        assert len(units) == 200 and all(s["phase"] == "Succeeded" for s in units)
        jobs = [
            j
            for j in api.get("/api/v1/jobs", limit=1000)["items"]
            if j["name"].startswith(f"{run_id}-each-")
        ]
        assert len(jobs) == 200  # one job per item, none twice
        # The most jobs live at any instant: from submission to end, not only running.
        edges = sorted(
            [(j["created_at"], 1) for j in jobs] + [(j["finished_at"], -1) for j in jobs],
            key=lambda edge: (edge[0], edge[1]),
        )
        assert 4 <= _peak(edges) <= 8  # in parallel, never above maxParallel
        # The most GPUs held at any instant (each item's job holds 1 from its placement to
        # its end): never above the queue's capability.
        held = sorted(
            [(j["started_at"], 1) for j in jobs] + [(j["finished_at"], -1) for j in jobs],
            key=lambda edge: (edge[0], edge[1]),
        )
        assert _peak(held) <= 6


def _peak(edges: list[tuple[float, int]]) -> int:
    """The most intervals open at once, given their sorted (time, +1 open / -1 close)."""
    live = peak = 0
    for _, change in edges:
        live += change
        peak = max(peak, live)
    return peak


def test_a_server_killed_mid_run_finishes_it_after_a_restart_without_duplicates(
    tmp_path: Path,
) -> None:
    chain = """\
apiVersion: phalanx/v1
kind: Pipeline
metadata: {name: chain}
spec:
  defaults: {queue: wf, resources: {cpu: 1, memory: 256Mi}}
  steps:
    one: {command: "sleep 3; echo 1 > {{outputs.n}}", outputs: {artifacts: [n]}}
    two:
      inputs: {artifacts: {n: "{{steps.one.outputs.n}}"}}
      command: "sleep 1; cat {{inputs.n}} > {{outputs.n}}; echo 2 >> {{outputs.n}}"
      outputs: {artifacts: [n]}
    three:
      inputs: {artifacts: {n: "{{steps.two.outputs.n}}"}}
      command: "cat {{inputs.n}} > {{outputs.n}}; echo 3 >> {{outputs.n}}"
      outputs: {artifacts: [n]}
"""
    db = database_url(tmp_path)
    server = processes.start(tmp_path, db=db)
    try:
        api = server.api()
        api.queue("wf")
        api.post("/api/v1/pipelines", pipeline(chain))
        run_id = run(api, "chain")
        wait_for(
            lambda: (
                (s := steps(api.get(f"/api/v1/runs/{run_id}"))["one"])["job"]
                and api.job(s["job"])["phase"] == "Running"
            ),
            "step one running",
        )
        # The tick that started the task records its process; a kill before that leaves
        # a task the next start cannot adopt (lost: the step fails, no retry asked for).
        time.sleep(0.5)
        server.kill()  # SIGKILL: the step's task keeps running
        server = processes.start(tmp_path, db=db)
        api = server.api()
        view = ended(api, run_id)
        assert view["phase"] == "Succeeded", json.dumps(view, indent=1)
        jobs = [j["name"] for j in api.get("/api/v1/jobs")["items"]]
        assert sorted(jobs) == sorted(f"{run_id}-{s}-1" for s in ("one", "two", "three"))
        out = tmp_path / "data" / "workspace" / "runs" / run_id / "three" / "n"
        assert out.read_text() == "1\n2\n3\n"
    finally:
        server.kill()


def test_the_cli_registers_runs_lists_describes_and_refuses_bad_input(tmp_path: Path) -> None:
    queue = "apiVersion: phalanx/v1\nkind: Queue\nmetadata: {name: wf}\nspec: {}\n---\n"
    path = tmp_path / "tri.yaml"
    path.write_text(queue + TRI)
    alone = tmp_path / "alone.yaml"
    alone.write_text(TRI)
    with running_server(tmp_path) as server:
        # Its queue does not exist yet: refused at apply, not failed at its first step.
        missing = refused(phalanx(server, "apply", "-f", str(alone)))
        assert "spec.defaults.queue" in missing and "queue 'wf', which does not exist" in missing
        assert "fix: create the queue first" in missing
        own = tmp_path / "own.yaml"
        own.write_text(TRI.replace("    prep:\n", "    prep:\n      queue: gone\n"))
        assert "spec.steps.prep.queue" in refused(phalanx(server, "apply", "-f", str(own)))
        assert ok(phalanx(server, "apply", "-f", str(path))).splitlines() == [
            "queue/wf created",
            "pipeline/tri created",
        ]
        again = ok(phalanx(server, "apply", "-f", str(path))).splitlines()
        assert again == ["queue/wf unchanged", "pipeline/tri unchanged"]
        path.write_text(TRI.replace("lr: 0.01", "lr: 0.5"))
        assert ok(phalanx(server, "apply", "-f", str(path))) == "pipeline/tri configured\n"

        run_id = ok(phalanx(server, "pipeline", "run", "tri")).strip()
        api = Api(server.url, server.admin_token or "")
        assert ended(api, run_id)["phase"] == "Succeeded"
        listed = json.loads(ok(phalanx(server, "get", "runs", "-o", "json")))
        assert [(r["id"], r["pipeline"], r["phase"]) for r in listed] == [
            (run_id, "tri", "Succeeded")
        ]
        described = ok(phalanx(server, "describe", "run", run_id))
        for unit in ("prep", "train", "validate"):
            assert f"{run_id}-{unit}-1" in described
        assert "Succeeded" in described and "lr=0.5" in described
        assert "Outputs" in described and "rows" in described  # prep's output param, 3
        train = next(line for line in described.splitlines() if line.startswith("train "))
        assert train.split()[1] == "prep"  # the DAG: train runs after prep
        assert api.get(f"/api/v1/runs/{run_id}")["steps"][2]["after"] == ["train"]

        # Bad input: one error line naming the field and the fix, and nothing made.
        unknown = refused(phalanx(server, "pipeline", "run", "nope"))
        assert "no pipeline named 'nope'" in unknown and "phalanx get pipelines" in unknown
        typed = refused(phalanx(server, "pipeline", "run", "tri", "-p", "lr=fast"))
        assert "params.lr" in typed and "'fast' is not a float" in typed and "fix:" in typed
        undeclared = refused(phalanx(server, "pipeline", "run", "tri", "-p", "epochs=3"))
        assert "params.epochs" in undeclared and "use one of: lr" in undeclared
        shape = refused(phalanx(server, "pipeline", "run", "tri", "-p", "lr"))
        assert "is not key=value" in shape and "-p name=value" in shape
        broken = tmp_path / "broken.yaml"
        broken.write_text(TRI.replace("dependsOn: [prep]", "dependsOn: [prepp]"))
        document = refused(phalanx(server, "apply", "-f", str(broken)))
        assert "spec.steps.train.dependsOn" in document and "fix:" in document
        for result in (missing, unknown, typed, undeclared, shape, document):
            assert len(result.strip().splitlines()) == 1, result
        assert len(json.loads(ok(phalanx(server, "get", "runs", "-o", "json")))) == 1
        assert ok(phalanx(server, "delete", "run", run_id)) == f"run/{run_id} deleted\n"
        assert json.loads(ok(phalanx(server, "get", "runs", "-o", "json"))) == []


def test_the_readme_pipeline_runs_as_printed(tmp_path: Path) -> None:
    page = Path(__file__).resolve().parents[3] / "docs" / "tasks" / "pipelines.md"
    section = page.read_text().split("## Register and run\n", 1)[1].split("\n## ", 1)[0]
    [text] = re.findall(r"```yaml\n(.*?)```", section, flags=re.DOTALL)
    queue, document = yaml.safe_load_all(text)  # the queue its steps use, then the pipeline
    with running_server(tmp_path) as server:
        api = Api(server.url, server.admin_token or "")
        api.post("/api/v1/queues", queue)
        api.post("/api/v1/pipelines", document)
        run_id = run(api, "tri", lr="0.5")
        assert ended(api, run_id)["phase"] == "Succeeded"
        model = tmp_path / "data" / "workspace" / "runs" / run_id / "train" / "model"
        assert model.read_text() == "HELLO\nlr=0.5\n"


ONE_STEP = """\
apiVersion: phalanx/v1
kind: Pipeline
metadata: {name: one}
spec:
  defaults: {queue: wf, resources: {cpu: 1, memory: 256Mi}}
  steps:
    only: {command: "true"}
"""


def test_runs_are_listed_a_page_at_a_time_and_only_to_their_users(tmp_path: Path) -> None:
    with running_server(tmp_path) as server:
        api = admin(server)
        api.post("/api/v1/pipelines", pipeline(ONE_STEP))
        made = [run(api, "one") for _ in range(5)]
        seen: list[str] = []
        after: str | None = None
        while True:
            page = api.get("/api/v1/runs", limit=2, **({"after": after} if after else {}))
            assert len(page["items"]) <= 2
            seen += [r["id"] for r in page["items"]]
            if page["next"] is None:
                break
            after = page["next"]
        assert seen == made  # oldest first, none repeated or skipped
        assert api.user("bob").get("/api/v1/runs")["items"] == []
        refused = api.get("/api/v1/runs", expect=404, after="no-such-run")
        assert refused["field"] == "after"
        runs = json.loads(ok(phalanx(server, "get", "runs", "-o", "json")))
        assert [r["id"] for r in runs] == made


EVERY_MINUTE = """\
apiVersion: phalanx/v1
kind: Pipeline
metadata: {name: minutely}
spec:
  params: {word: tick}
  schedule: {cron: "* * * * *", concurrencyPolicy: skip}
  defaults: {queue: wf, resources: {cpu: 1, memory: 256Mi}}
  steps:
    say: {command: "echo {{params.word}}"}
"""


def test_a_schedule_starts_runs_of_the_owner_by_the_clock(tmp_path: Path) -> None:
    with running_server(tmp_path) as server:
        alice = admin(server).user("alice")
        alice.post("/api/v1/pipelines", pipeline(EVERY_MINUTE))
        listed = ok(phalanx(server, "get", "pipelines", token=alice.token))
        assert "* * * * * skip" in listed and "in " in listed
        # The workflow controller's clock a minute ahead: the next firing is due at once
        # (the schedule fires by the controller's clock; waiting for the wall's would
        # take up to a minute).
        server.workflows.clock = lambda: time.time() + 60
        started = wait_for(
            lambda: alice.get("/api/v1/runs")["items"], "the schedule's first run", timeout=75
        )
        run_id = started[0]["id"]
        assert re.fullmatch(r"minutely-\d{12}", run_id)
        view = ended(alice, run_id)
        assert view["phase"] == "Succeeded" and view["user"] == "alice"
        assert view["params"] == {"word": "tick"}
        firing = datetime.strptime(run_id[-12:], "%Y%m%d%H%M").replace(tzinfo=UTC)
        assert view["scheduled_at"] == firing.timestamp()  # the id names its firing
        assert "by the pipeline's schedule" in ok(phalanx(server, "describe", "run", run_id))


DSL = """\
from phalanx.workflow import PipelineBuilder

p = PipelineBuilder("built", params={"word": "hi"},
                    defaults={"queue": "wf", "resources": {"cpu": 1, "memory": "256Mi"}})
say = p.step("say", command=f"echo {p.params.word} > {{{{outputs.text}}}}", outputs=["text"])
p.step("shout", inputs={"artifacts": {"text": say.outputs.text}},
       command="tr a-z A-Z < {{inputs.text}} > {{outputs.loud}}", outputs=["loud"])
"""


def test_a_pipeline_built_with_the_python_dsl_is_applied_and_run_from_its_file(
    tmp_path: Path,
) -> None:
    script = tmp_path / "flow.py"
    script.write_text(DSL)
    with running_server(tmp_path) as server:
        admin(server)
        assert ok(phalanx(server, "apply", "-f", str(script))).strip() == "pipeline/built created"
        run_id = ok(phalanx(server, "pipeline", "run", "built", "-p", "word=hello")).strip()
        view = ended(Api(server.url, server.admin_token or ""), run_id)
        assert view["phase"] == "Succeeded"
        loud = tmp_path / "data" / "workspace" / "runs" / run_id / "shout" / "loud"
        assert loud.read_text() == "HELLO\n"
