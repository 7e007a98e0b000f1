"""Elastic jobs through the real server's API: progress reports reach the engine and
the job's view (a malformed one is said, not swallowed); only a job's owner scales it."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from tests.integration.control.serving import Api, role, running_server, wait_for

REPORTER = """\
import sys, time
from phalanx.client import progress
progress.report(step=40, samples=2560, total_samples=64000, samples_per_second=256.0,
                batch_size=64, grad_sqr=0.5, grad_var=2.0,
                timings=[progress.Timing(nodes=1, replicas=2, local_batch=32, step_seconds=0.25)])
time.sleep(600)
"""

MALFORMED = """\
import os, time
open(os.environ["PHALANX_PROGRESS_FILE"], "w").write('{"step": -3}')
time.sleep(600)
"""


def _elastic(code: str) -> dict[str, Any]:
    spec = role(replicas=2, command=[sys.executable, "-c", code])
    spec["elastic"] = {"minReplicas": 1, "maxReplicas": 2}
    return spec


def test_a_report_reaches_the_engine_and_the_jobs_view(tmp_path: Path) -> None:
    with running_server(tmp_path) as server:
        api = Api(server.url, server.admin_token or "")
        api.queue("vision")
        api.submit("rep", "vision", _elastic(REPORTER))
        job = wait_for(lambda: (j := api.job("rep"))["progress"] and j, "a progress report")
        assert job["progress"]["step"] == 40
        assert job["progress"]["samplesPerSecond"] == 256.0
        assert job["progress"]["timings"][0]["localBatch"] == 32
        engine = server.controller.core.state.snapshot.jobs["rep"].spec.progress
        assert engine is not None and engine.grad_var == 2.0 and engine.batch_size == 64
        assert (engine.samples, engine.total_samples) == (2560, 64000)
        # the timing did not say its GPU type: it is the type of the node it ran on
        assert [t.gpu_model for t in engine.timings] == ["virtual"]


def test_a_malformed_report_is_said_on_the_job_naming_the_field(tmp_path: Path) -> None:
    with running_server(tmp_path) as server:
        api = Api(server.url, server.admin_token or "")
        api.queue("vision")
        api.submit("bad", "vision", _elastic(MALFORMED))

        def said() -> list[str]:
            events = api.get("/api/v1/jobs/bad/events")
            return [e["message"] for e in events if e["kind"] == "ProgressIgnored"]

        (message,) = wait_for(said, "the report refused")
        assert message == "progress report: step: must be >= 0, got -3; fix: use a value >= 0"
        assert api.job("bad")["progress"] is None


def test_only_the_jobs_owner_or_an_admin_scales_it_within_its_range(tmp_path: Path) -> None:
    with running_server(tmp_path) as server:
        admin = Api(server.url, server.admin_token or "")
        admin.queue("vision")
        alice, bob = admin.user("alice"), admin.user("bob")
        alice.submit("mine", "vision", _elastic("import time; time.sleep(600)"))
        alice.wait_phase("mine", "Running")
        assert bob.post("/api/v1/jobs/mine/scale", {"replicas": 1}, expect=404)["field"] == "name"
        refused = alice.post("/api/v1/jobs/mine/scale", {"replicas": 3}, expect=400)
        assert refused["fix"] == "give 1..2"
        assert alice.post("/api/v1/jobs/mine/scale", {"replicas": 1}, expect=200)["name"] == "mine"
        wait_for(lambda: len(alice.get("/api/v1/jobs/mine/tasks")["items"]) == 1, "one replica")
        fixed = role(command="sleep 600")
        alice.submit("fixed", "vision", fixed)
        answer = alice.post("/api/v1/jobs/fixed/scale", {"replicas": 2}, expect=400)
        assert answer["detail"] == "job 'fixed' has no elastic role"
