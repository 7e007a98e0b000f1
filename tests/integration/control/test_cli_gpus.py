"""GPUs at work through the command line, on a real server whose one node's eight H100s
are read through a recorded NVML every 0.2 s: ``top gpus`` shows a job's card busy with
its task, ``describe job`` the job's use of its cards, ``/metrics`` the DCGM names with
the job's labels; a card that raises a hardware XID is cordoned by itself (shown with
its reason, its job told), an admin cordons and uncordons a card with ``--gpu``, and a
user may not."""

from __future__ import annotations

import re

from phalanx.telemetry.recorded import MIB, RecordedNvml
from tests.integration.control.serving import DGX, DGX_NODE, Api, role, running_server, wait_for
from tests.integration.control.test_cli import ok, phalanx, refused

#: SQLite only: what is tested is the commands over the API's views.
BACKENDS = ("sqlite",)

NODE = DGX_NODE


def test_gpus_through_the_cli(tmp_path) -> None:  # type: ignore[no-untyped-def]
    nvml = RecordedNvml.load("h100-sxm-8")
    with running_server(tmp_path, cluster=DGX, nvml=nvml, gpu_interval=0.2) as server:
        api = Api(server.url, server.admin_token or "")
        api.queue("train")
        api.submit("busy", "train", role(command="sleep 120", gpu=2))
        api.wait_phase("busy", "Running")
        (task,) = api.get("/api/v1/jobs/busy")["tasks"]
        cards = task["gpus"]
        for card in cards:
            nvml.set(card, utilisation=88, memory_used=41_000 * MIB)

        def busy_read() -> bool:
            uses = api.get("/api/v1/jobs/busy/gpus")["tasks"]
            return bool(uses) and uses[0]["utilisation"] == 88

        wait_for(busy_read, "the job's cards read busy")

        top = ok(phalanx(server, "top", "gpus", "--once"))
        line = next(row for row in top.splitlines() if row.split()[:2] == [NODE, str(cards[0])])
        assert "88%" in line and "busy-worker-0" in line and "ok" in line

        described = ok(phalanx(server, "describe", "job", "busy"))
        assert re.search(r"utilisation \d+% mean, 88% peak", described), described
        assert f"{NODE} GPU {cards[0]},{cards[1]}: 88%" in described

        series = [
            _labels(line)
            for line in api.http.get("/metrics").text.splitlines()
            if line.startswith("DCGM_FI_DEV_GPU_UTIL{") and line.endswith(" 88.0")
        ]
        mine = {"job": "busy", "task": "busy-worker-0", "user": "admin", "queue": "train"}
        assert {s["gpu"] for s in series} == {str(card) for card in cards}
        assert all(s.items() >= mine.items() and s["Hostname"] == NODE for s in series)
        assert all(
            s["UUID"].startswith("GPU-") and s["device"] == f"nvidia{s['gpu']}" for s in series
        )

        # A hardware XID on one of the job's cards: out of scheduling, the job told.
        nvml.raise_xid(cards[0], 79)
        wait_for(
            lambda: api.get(f"/api/v1/nodes/{NODE}")["gpus"][cards[0]]["cordoned"],
            "the broken card cordoned",
        )
        gpu = api.get(f"/api/v1/nodes/{NODE}")["gpus"][cards[0]]
        assert gpu["cordoned_by"] == "health" and "XID 79" in gpu["cordoned"]
        events = api.get("/api/v1/jobs/busy/events")
        assert any(e["kind"] == "GpuUnhealthy" for e in events)
        said = " ".join(ok(phalanx(server, "describe", "node", NODE)).split())
        assert f"{NODE} GPU {cards[0]} cordoned (health): GPU {cards[0]} (GPU-" in said
        assert "XID 79" in said

        # An admin takes a free card out by hand, and brings both back.
        free = next(i for i in range(8) if i not in cards)
        said = ok(phalanx(server, "cordon", NODE, "--gpu", str(free), "--reason", "RMA"))
        assert said.strip() == f"node/{NODE} gpu {free} cordoned"
        wait_for(
            lambda: api.get(f"/api/v1/nodes/{NODE}")["gpus"][free]["cordoned"] == "RMA",
            "the admin's cordon shown",
        )
        assert ok(phalanx(server, "uncordon", NODE, "--gpu", str(free))).strip() == (
            f"node/{NODE} gpu {free} uncordoned"
        )
        assert "was not cordoned" in ok(phalanx(server, "uncordon", NODE, "--gpu", str(free)))
        ok(phalanx(server, "uncordon", NODE, "--gpu", str(cards[0])))
        wait_for(
            lambda: not any(g["cordoned"] for g in api.get(f"/api/v1/nodes/{NODE}")["gpus"]),
            "every card back",
        )
        assert "no GPU 9" in refused(phalanx(server, "cordon", NODE, "--gpu", "9"))

        token = api.post("/api/v1/users", {"name": "alice", "role": "user"})["token"]
        assert "admin" in refused(phalanx(server, "cordon", NODE, "--gpu", "1", token=token))


def _labels(line: str) -> dict[str, str]:
    """The labels of one Prometheus text line."""
    return dict(re.findall(r'(\w+)="([^"]*)"', line.partition("{")[2].rpartition("}")[0]))
