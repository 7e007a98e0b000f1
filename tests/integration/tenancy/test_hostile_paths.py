"""A hostile tenant plants, at every place the root server reads from a path its task
can write, what would make it read elsewhere or hang: links to the database's WAL, to a
root-only file and to another tenant's output, a link in the middle of the path, a
FIFO, a directory where a file belongs, a 100 MB file, and cache files it cannot read.
Each is refused with its reason; no byte of a target comes back; another user's run
started at the same time succeeds; the server stops promptly on SIGTERM."""

from __future__ import annotations

import json
import os
import signal
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.integration.tenancy import servers
from tests.integration.tenancy.servers import QUEUE, Up, job

pytestmark = pytest.mark.skipif(
    os.geteuid() != 0, reason="a hostile tenant of a root server needs a server run as root"
)

ROOT_SECRET = "root-only-secret-0xC0FFEE"
ALICE_ENV = "hf_alice_env_secret_value"
ALICE_VALUE = 424242
SIZE_100MB = 100 * 2**20


def pipeline(name: str, steps: dict[str, Any], **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "phalanx/v1",
        "kind": "Pipeline",
        "metadata": {"name": name},
        "spec": {
            "defaults": {"queue": QUEUE, "resources": {"cpu": "250m", "memory": "128Mi"}},
            "steps": steps,
            **spec,
        },
    }


def param_step(command: str, kind: str = "int") -> dict[str, Any]:
    return {"command": command, "outputs": {"params": {"r": {"type": kind}}}}


def plants(data: Path, root_only: Path, alices: Path) -> dict[str, tuple[dict[str, Any], str]]:
    """bob's steps, each with the words its refusal must hold."""
    wal = data / "phalanx.db-wal"
    return {
        "wal": (param_step(f"ln -s {wal} {{{{outputs.r}}}}", "json"), f"a symbolic link to {wal}"),
        "rootonly": (
            param_step(f"ln -s {root_only} {{{{outputs.r}}}}"),
            f"a symbolic link to {root_only}",
        ),
        "alice": (param_step(f"ln -s {alices} {{{{outputs.r}}}}", "json"), "a symbolic link to"),
        "midway": (
            param_step(
                f'd=$(dirname {{{{outputs.r}}}}); mv "$d" "$d.moved" && ln -s {alices.parent} "$d"'
            ),
            "midway is a symbolic link",
        ),
        "fifo": (param_step("mkfifo {{outputs.r}}"), "a FIFO"),
        "folder": (param_step("mkdir {{outputs.r}}"), "a directory, not a file"),
        "big": (
            param_step(
                f"dd if=/dev/zero of={{{{outputs.r}}}} bs=1 count=0 seek={SIZE_100MB} 2>/dev/null"
            ),
            "over the",
        ),
        "artifact": (
            {
                "command": f"ln -s {data / 'admin.token'} {{{{outputs.m}}}}",
                "outputs": {"artifacts": ["m"]},
            },
            f"a symbolic link to {data / 'admin.token'}",
        ),
        "cachefiles": (
            {
                "command": "true",
                "cache": {"enabled": True, "files": [str(data / "admin.token"), str(root_only)]},
            },
            "cache:",
        ),
    }


@pytest.fixture
def up(world: Path, tmp_path: Path) -> Iterator[Up]:
    served = servers.start(world / "data", tmp_path)
    yield served
    served.stop()


def test_every_plant_is_refused_with_its_reason_and_nothing_of_its_target_comes_back(
    up: Up, world: Path
) -> None:
    root_only = world / "root-only"
    root_only.write_text(ROOT_SECRET)
    root_only.chmod(0o600)
    admin = up.admin()
    admin.queue(QUEUE)
    alice, bob = up.user("alice"), up.user("bob")
    # alice's secrets: an env value (in the database's WAL) and an output of her own run.
    diary = job("diary", "true")
    diary["spec"]["roles"][0]["env"] = {"TOKEN": ALICE_ENV}
    alice.post("/api/v1/jobs", diary)
    alice.post(
        "/api/v1/pipelines",
        pipeline("prep", {"prep": param_step(f"echo {ALICE_VALUE} > {{{{outputs.r}}}}")}),
    )
    first = alice.post("/api/v1/pipelines/prep/runs", {})["id"]
    assert alice.wait_run(first)["phase"] == "Succeeded"
    alices = world / "data-workspace" / "runs" / first / "prep" / "r"

    planted = plants(up.data, root_only, alices)
    bob.post(
        "/api/v1/pipelines",
        pipeline("plants", {k: v[0] for k, v in planted.items()}, onFailure="continue"),
    )
    hostile = bob.post("/api/v1/pipelines/plants/runs", {})["id"]
    again = alice.post("/api/v1/pipelines/prep/runs", {"cache": "off"})["id"]

    assert alice.wait_run(again)["phase"] == "Succeeded"  # the FIFO held no one up
    run = bob.wait_run(hostile)
    assert run["phase"] == "Failed"
    reasons = {unit["unit"]: unit["reason"] for unit in run["steps"]}
    for step, (_, words) in planted.items():
        assert words in reasons[step], (step, reasons[step])
        assert "fix:" in reasons[step] or "write" in reasons[step], reasons[step]

    # Not one byte of any target in what bob can see: the run, its jobs, events, logs.
    token = (up.data / "admin.token").read_text().strip()
    seen = [json.dumps(bob.get(f"/api/v1/runs/{hostile}")), json.dumps(bob.get("/api/v1/runs"))]
    for name in {unit["job"] for unit in run["steps"] if unit["job"]}:
        seen.append(json.dumps(bob.get(f"/api/v1/jobs/{name}/events")))
        seen.append(bob.http.get(f"/api/v1/jobs/{name}/logs").text)
    seen.append(json.dumps(bob.get("/api/v1/cache")))
    text = "\n".join(seen)
    for secret in (ROOT_SECRET, ALICE_ENV, str(ALICE_VALUE), token, "SQLite format"):
        assert secret not in text, secret
    assert "phalanx.db-wal" in text  # the refusal names the link's target, not its content

    # SIGTERM ends the server, FIFO or not (waiting past the deadline raises).
    up.process.send_signal(signal.SIGTERM)
    assert up.process.wait(servers.DEADLINE) == 0


def test_a_mount_through_a_link_to_the_database_fails_to_start_saying_so(
    up: Up, world: Path, busybox_image: str
) -> None:
    """bob links his task's directory to the WAL, then mounts the link in an image job:
    rootful podman would resolve it as root. The job fails to start, naming the link."""
    up.admin().queue(QUEUE)
    bob = up.user("bob")
    wal = up.data / "phalanx.db-wal"
    bob.post("/api/v1/jobs", job("plant", f"ln -sfn {wal} wal"))
    assert bob.wait_phase("plant", "Succeeded", "Failed")["phase"] == "Succeeded"
    link = world / "data-tasks" / "plant" / "plant-main-0" / "wal"
    assert link.is_symlink()
    mounted = job("peek", "grep -a hf_ /mnt/wal || true")
    mounted["spec"]["maxRetry"] = 0
    mounted["spec"]["roles"][0].update(image=busybox_image, mounts=[str(link)])
    bob.post("/api/v1/jobs", mounted)
    view = bob.wait_phase("peek", "Succeeded", "Failed")
    assert view["phase"] == "Failed", view
    assert f"is a symbolic link to {wal}" in view["message"], view["message"]
    assert "hf_" not in servers.output(bob, "peek")
