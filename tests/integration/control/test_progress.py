"""Progress reports through the real server: a task reports with the SDK, the engine's
state and the job's view carry it; a malformed report is said, not swallowed."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from tests.integration.control.serving import Api, role, running_server, wait_for

REPORTER = """\
import sys, time
from phalanx.client import progress
progress.report(step=40, samples_per_second=256.0, batch_size=64, grad_sqr=0.5, grad_var=2.0,
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
