"""Idle GPUs on a real server: its one node's eight H100s read through a recorded NVML
every 0.5 s. Two queues watch their jobs' cards with the shortest window (a minute):
``stop`` ends a job whose cards sat idle that long as Failed (IdleGpus) with the reason,
while ``mark`` leaves its job running with an ``Idle`` event and the mark on its GPU
view; a job whose card stays busy is left alone. About 70 s of wall time: the window
is the queue's, and a minute is the shortest a queue may ask."""

from __future__ import annotations

from pathlib import Path

from phalanx.telemetry.recorded import RecordedNvml
from tests.integration.control.serving import DGX, Api, role, running_server, wait_for

#: SQLite only: the rule is the lifecycle's, tested on both stores through its effects.
BACKENDS = ("sqlite",)


def test_idle_jobs_are_stopped_or_marked_as_their_queue_asks(tmp_path: Path) -> None:
    nvml = RecordedNvml.load("h100-sxm-8")  # idle cards: 0% busy
    with running_server(tmp_path, cluster=DGX, nvml=nvml, gpu_interval=0.5) as server:
        api = Api(server.url, server.admin_token or "")
        api.queue("strict", idleGpus={"threshold": "5%", "window": "1m", "action": "stop"})
        api.queue("lenient", idleGpus={"window": "1m"})
        api.submit("notebook", "strict", role(command="sleep 600", gpu=1))
        api.submit("training", "strict", role(command="sleep 600", gpu=1))
        api.submit("left-open", "lenient", role(command="sleep 600", gpu=1))
        for name in ("notebook", "training", "left-open"):
            api.wait_phase(name, "Running")
        (busy,) = api.get("/api/v1/jobs/training")["tasks"][0]["gpus"]
        nvml.set(busy, utilisation=70)

        stopped = api.wait_phase("notebook", "Failed", timeout=120)
        assert stopped["reason"] == "IdleGpus"
        assert (
            "below 5% utilisation for 1m (queue strict's idleGpus): stopped" in (stopped["message"])
        )
        wait_for(
            lambda: any(e["kind"] == "Idle" for e in api.get("/api/v1/jobs/left-open/events")),
            "the lenient queue's job marked",
        )
        assert api.job("left-open")["phase"] == "Running"
        assert api.get("/api/v1/jobs/left-open/gpus")["idle_since"] is not None
        assert api.job("training")["phase"] == "Running"
        assert not any(e["kind"] == "Idle" for e in api.get("/api/v1/jobs/training/events"))
