"""A real elastic training job through the real server and the local executor: the DDP
example under torchrun grows from 2 to 4 replicas when room frees up and shrinks back
to 2 when a higher-priority job arrives, resuming from its checkpoint each time: its
step count keeps rising and its loss keeps falling."""

from __future__ import annotations

import importlib.util
import re
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.integration.control.serving import Api, role, running_server, wait_for

#: SQLite only: a PyTorch job's rendezvous across rescales: torchrun's and the executor's.
BACKENDS = ("sqlite",)

#: One node of 8 GPUs: which replicas a job gives back does not depend on where they are.
ONE_NODE = """\
apiVersion: phalanx/v1
kind: Cluster
metadata: {name: lab}
spec:
  nodeGroups:
  - name: node
    count: 1
    resources: {cpu: 16, memory: 64Gi}
    gpus: {count: 8, model: virtual, memory: 16Gi}
"""

pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("torch") is None,
    reason="PyTorch is not installed (make test and make demo install its CPU build)",
)

_STEP = re.compile(r"step +(\d+)  loss ([0-9.]+)  \(mean of (\d+) ranks\)")
SLOW = 120.0


class Progress:
    """Every progress line of a job's tasks, in the order they were first seen.

    torchrun gives rank 0 (which prints) to any replica, and a grown replica's task
    leaves the job, its log with it, once it is shrunk away: the lines are gathered
    while the job runs, so none is lost and their order is the order they appeared.
    """

    def __init__(self, api: Api, job: str) -> None:
        self.api, self.job = api, job
        self.seen: dict[tuple[int, float, int], None] = {}

    def __call__(self) -> list[tuple[int, float, int]]:
        """(step, loss, world size) of every line seen so far."""
        logs = f"/api/v1/jobs/{self.job}/logs"
        text = self.api.http.get(logs, params={"all": "true"}).text
        for s, loss, w in _STEP.findall(text):
            self.seen.setdefault((int(s), float(loss), int(w)), None)
        return list(self.seen)


def _placed(api: Api, job: str) -> int:
    tasks = api.get(f"/api/v1/jobs/{job}/tasks")["items"]
    return sum(t["phase"] in ("Bound", "Running") for t in tasks)


def _elastic_role(checkpoint: Path) -> dict[str, Any]:
    command = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "-m",
        "phalanx.examples.ddp_train",
        "--steps",
        "400",
        "--step-seconds",
        "0.05",
        "--checkpoint",
        str(checkpoint),
    ]
    spec = role(replicas=2, command=command, gpu=1)
    spec["elastic"] = {
        "minReplicas": 2,
        "maxReplicas": 4,
        "rescaleInterval": 1,
        "rescaleCost": 0,
    }
    return spec


def test_an_elastic_ddp_job_grows_and_shrinks_without_starting_over(tmp_path: Path) -> None:
    with running_server(tmp_path, cluster=ONE_NODE) as server:
        api = Api(server.url, server.admin_token or "")
        api.queue("vision")
        api.submit("blocker", "vision", role(command="sleep 600", gpu=6))
        api.wait_phase("blocker", "Running")
        api.submit("el", "vision", _elastic_role(tmp_path / "ckpt.pt"))
        progress = Progress(api, "el")
        wait_for(lambda: any(s >= 20 for s, _, _ in progress()), "20 steps at 2", timeout=SLOW)

        api.post("/api/v1/jobs/blocker/cancel", expect=200)
        wait_for(lambda: any(w == 4 for _, _, w in progress()), "4 ranks", timeout=SLOW)
        assert _placed(api, "el") == 4

        grown = max(s for s, _, w in progress() if w == 4)
        api.submit("hi", "vision", role(command="sleep 600", gpu=6), priority=100)
        api.wait_phase("hi", "Running", timeout=SLOW)

        def shrunk() -> bool:
            return any(s > grown and w == 2 for s, _, w in progress())

        wait_for(shrunk, "2 ranks again after the growth", timeout=SLOW)
        job = api.wait_phase("el", "Succeeded", "Failed", timeout=SLOW * 2)
        seen = progress()
        assert job["phase"] == "Succeeded", seen[-5:]
        assert job["attempts"] == 0 and job["preemptions"] == 0

        worlds = [w for _, _, w in seen]
        assert worlds.index(4) < len(worlds) - 1 - worlds[::-1].index(2)  # 2 -> 4 -> 2
        steps = [s for s, _, _ in seen]
        restarts = [i for i in range(1, len(steps)) if steps[i] < steps[i - 1]]
        for i in restarts:  # a restart resumes within a checkpoint of where it was
            assert steps[i - 1] - steps[i] <= 10, (steps[i - 1], steps[i])
        assert steps[-1] == 399
        losses = [loss for _, loss, _ in seen]
        assert losses[-1] < losses[0] / 10

        events = api.get("/api/v1/jobs/el/events")
        sizes = [e["message"] for e in events if e["kind"] == "Resized"]
        assert any("2 -> 4" in m for m in sizes), sizes
        assert any(re.search(r"4 -> 3|3 -> 2", m) for m in sizes), sizes
