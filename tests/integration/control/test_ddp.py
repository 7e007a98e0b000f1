"""The demo's training job through the real server: two ranks of torch.distributed (gloo)
find each other through the injected rendezvous variables and agree on the weights."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

from tests.integration.control.serving import Api, role, running_server

#: SQLite only: a PyTorch job's rendezvous and its GPUs: the executor's.
BACKENDS = ("sqlite",)

pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("torch") is None,
    reason="PyTorch is not installed (make test and make demo install its CPU build)",
)


def test_a_two_worker_ddp_job_trains_and_its_ranks_agree(tmp_path: Path) -> None:
    command = [sys.executable, "-m", "phalanx.examples.ddp_train", "--steps", "60"]
    with running_server(tmp_path) as server:
        api = Api(server.url, server.admin_token or "")
        api.queue("vision")
        api.submit("ddp", "vision", role(replicas=2, command=command, gpu=1))
        job = api.wait_phase("ddp", "Succeeded", "Failed", timeout=120)
        log = api.http.get("/api/v1/jobs/ddp/logs", params={"task": "ddp-worker-0"}).text
        assert job["phase"] == "Succeeded", log
        assert "ranks agree on the weights: True" in log
        assert "(mean of 2 ranks)" in log
