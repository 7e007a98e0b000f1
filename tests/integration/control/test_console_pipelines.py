"""The console's pipeline pages on a real server, driven over HTTP as a browser would:
a user's runs are theirs alone (by list, page, fragment and form); a run's page draws
its DAG with every step, its edges, phases, jobs and artifacts; resume and stop are
forms that need the session's CSRF token, a refused resume shows the API's message at
the form, and a resumed run shows the reused step as Cached."""

from __future__ import annotations

import re
from pathlib import Path

from tests.integration.control.console import altered, csrf_of, signed_in
from tests.integration.control.serving import running_server, wait_for
from tests.integration.control.test_pipeline_resume import RESUMABLE
from tests.integration.control.test_pipelines import admin, ended, pipeline, run, steps

SLEEPY = """\
apiVersion: phalanx/v1
kind: Pipeline
metadata: {name: sleepy}
spec:
  defaults: {queue: wf, resources: {cpu: 1, memory: 256Mi}}
  steps:
    nap:
      command: ["sleep", "600"]
"""


def step_phase(page: str, step: str) -> str:
    """The phase the DAG's box of ``step`` shows."""
    found = re.search(rf'<g class="step [^"]*" data-step="{step}" data-phase="(\w+)"', page)
    assert found is not None, f"no box for step {step} on the page: {page[:3000]}"
    return found.group(1)


def test_runs_are_the_users_own_and_a_run_page_draws_its_dag_and_resumes(
    tmp_path: Path,
) -> None:
    scripts = tmp_path / "scripts"
    scripts.mkdir()
    (scripts / "validate.sh").write_text("echo broken >&2; exit 1\n")
    with running_server(tmp_path) as server:
        api = admin(server)
        alice, bob = api.user("alice"), api.user("bob")
        alice.post("/api/v1/pipelines", pipeline(RESUMABLE.replace("DIR", str(scripts))))
        first = run(alice, "fixme")
        failed = ended(alice, first)
        assert failed["phase"] == "Failed"
        units = steps(failed)

        as_alice = signed_in(server.url, alice.token)
        listed = as_alice.get("/runs").text
        assert f'href="/ui/runs/{first}"' in listed and "fixme" in listed
        page = as_alice.get(f"/runs/{first}").text
        assert [step_phase(page, s) for s in ("prep", "train", "validate")] == [
            "Succeeded",
            "Succeeded",
            "Failed",
        ]
        edges = re.findall(r'<line class="edge" data-from="(\w+)" data-to="(\w+)"', page)
        assert edges == [("prep", "train"), ("train", "validate")]
        for step in ("prep", "train", "validate"):  # each box links to its job's page
            assert f'<a href="/ui/jobs/{units[step]["job"]}">' in page
        assert str(units["train"]["outputs"]["model"]) in page  # the artifact's URI
        fragment = as_alice.get(f"/fragments/runs/{first}")
        assert fragment.headers["X-Phalanx-Final"] == "1"  # ended: no more refreshes
        assert 'data-step="validate"' in fragment.text

        # bob sees nothing of it: not listed, not found by URL, his forms refused
        as_bob = signed_in(server.url, bob.token)
        assert first not in as_bob.get("/runs").text
        assert first not in as_bob.get("/fragments/runs").text
        for path in (f"/runs/{first}", f"/fragments/runs/{first}"):
            assert "no run" in as_bob.get(path, expect=404).text
        as_bob.post(f"/runs/{first}/resume", {}, page="/runs", expect=404)
        as_bob.post(f"/runs/{first}/stop", {}, page="/runs", expect=404)

        # resume needs the session's CSRF token, sent from here
        good = csrf_of(page)
        other = csrf_of(as_bob.get("/runs").text)
        for form in ({}, {"csrf": ""}, {"csrf": other}, {"csrf": altered(good)}):
            as_alice.post(f"/runs/{first}/resume", form, expect=403)
        forged = as_alice.http.post(
            f"/runs/{first}/resume", data={"csrf": good}, headers={"Origin": "http://evil.example"}
        )
        assert forged.status_code == 403
        assert [r["id"] for r in alice.get("/api/v1/runs")["items"]] == [first]

        # the API's refusal is shown at the form
        refused = as_alice.post(
            f"/runs/{first}/resume", {"csrf": good, "from": "tune"}, expect=422
        ).text
        error = re.search(r'<div class="field-error" id="resume-error".*?</div>', refused, re.S)
        assert error is not None, refused
        assert "not a step of this pipeline" in error.group(0).replace("&#39;", "'")

        # fixed, and resumed from validate: prep and train are reused, shown Cached
        (scripts / "validate.sh").write_text('grep -q HELLO "$1"\n')
        answer = as_alice.post(f"/runs/{first}/resume", {"csrf": good, "from": "validate"})
        second = answer.headers["location"].removeprefix("/ui/runs/")
        assert ended(alice, second)["phase"] == "Succeeded"
        page = as_alice.get(f"/runs/{second}").text
        assert [step_phase(page, s) for s in ("prep", "train", "validate")] == [
            "Cached",
            "Cached",
            "Succeeded",
        ]
        assert page.count('class="badge"') == 2 and f"reused from run {first}" in page
        assert f'href="/ui/runs/{first}"' in page  # the run it resumes

        # the admin sees both runs, with their user
        as_admin = signed_in(server.url, server.admin_token or "")
        everyone = as_admin.get("/runs").text
        assert first in everyone and second in everyone and "<td>alice</td>" in everyone


def test_an_active_run_refreshes_until_stopped_by_its_form(tmp_path: Path) -> None:
    with running_server(tmp_path) as server:
        api = admin(server)
        alice = api.user("alice")
        alice.post("/api/v1/pipelines", pipeline(SLEEPY))
        run_id = run(alice, "sleepy")
        wait_for(
            lambda: alice.get(f"/api/v1/runs/{run_id}")["steps"][0]["phase"] == "Running",
            "the nap step runs",
        )
        as_alice = signed_in(server.url, alice.token)
        page = as_alice.get(f"/runs/{run_id}").text
        assert f'data-refresh="/ui/fragments/runs/{run_id}"' in page
        assert step_phase(page, "nap") == "Running" and "Resume" not in page
        assert "X-Phalanx-Final" not in as_alice.get(f"/fragments/runs/{run_id}").headers
        as_alice.post(f"/runs/{run_id}/stop", {}, expect=403)  # no CSRF token: nothing done
        assert alice.get(f"/api/v1/runs/{run_id}")["stop_requested"] is False
        as_alice.post(f"/runs/{run_id}/stop", {"csrf": csrf_of(page)})
        assert ended(alice, run_id)["phase"] == "Cancelled"
        page = as_alice.get(f"/runs/{run_id}").text
        assert "data-refresh" not in page.split('id="run"')[1].split(">")[0]
        assert 'action="/ui/runs/' + run_id + '/resume"' in page
