"""After a full workload on a root server (jobs, a pipeline run twice with a cache hit,
the console), every entry of the data dir, the tasks dir and the workspace has the mode
and owner its place in a table says: the server's own are 0600/0700, passages 0711, a
task's directory and a run's are their user's, 0700."""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.integration.control.console import signed_in
from tests.integration.tenancy import servers
from tests.integration.tenancy.servers import QUEUE, Up, job

pytestmark = pytest.mark.skipif(
    os.geteuid() != 0, reason="per-user identities need a server run as root"
)

SERVER = 0
#: (where, kind) -> (mode, owner): the owner "user" is the task's or the run's user.
#: A file a task wrote itself (its outputs, its exit code) is the task's to set: only
#: its owner is checked.
TABLE: dict[tuple[str, str], tuple[int | None, int | str]] = {
    ("data", "d"): (0o700, SERVER),
    ("data", "-"): (0o600, SERVER),
    ("tasks root", "d"): (0o711, SERVER),
    ("tasks job", "d"): (0o711, SERVER),
    ("task", "d"): (0o700, "user"),
    ("task", "-"): (None, "user"),
    ("task log", "-"): (0o600, "user"),
    ("workspace", "d"): (0o711, SERVER),
    ("run", "d"): (0o700, "user"),
    ("output", "d"): (None, "user"),
    ("output", "-"): (None, "user"),
}

PIPELINE: dict[str, Any] = {
    "apiVersion": "phalanx/v1",
    "kind": "Pipeline",
    "metadata": {"name": "counted"},
    "spec": {
        "defaults": {"queue": QUEUE, "resources": {"cpu": "250m", "memory": "128Mi"}},
        "steps": {
            "count": {
                "command": "echo 7 > {{outputs.n}}; mkdir {{outputs.model}}; "
                "echo w > {{outputs.model}}/weights",
                "outputs": {"params": {"n": {"type": "int"}}, "artifacts": ["model"]},
                "cache": {"enabled": True},
            },
        },
    },
}


@pytest.fixture
def up(world: Path, tmp_path: Path) -> Iterator[Up]:
    served = servers.start(world / "data", tmp_path)
    yield served
    served.stop()


def place_of(path: Path, world: Path) -> str:
    """Which row of ``TABLE`` ``path`` falls under."""
    relative = path.relative_to(world)
    top, depth = relative.parts[0], len(relative.parts)
    if top == "data":
        return "data"
    if top == "data-tasks":
        if depth <= 2:
            return "tasks root" if depth == 1 else "tasks job"
        return "task log" if path.name in ("stdout.log", "stderr.log") else "task"
    if depth <= 2:
        return "workspace"
    return "run" if depth <= 4 and path.is_dir() else "output"  # runs/RUN/STEP, then the step's


def test_every_entry_has_the_mode_and_owner_its_place_says(up: Up, world: Path) -> None:
    admin = up.admin()
    admin.queue(QUEUE)
    alice = up.user("alice")
    alice.post("/api/v1/jobs", job("hello", "echo hi > out.txt"))
    assert alice.wait_phase("hello", "Succeeded", "Failed")["phase"] == "Succeeded"
    alice.post("/api/v1/pipelines", PIPELINE)
    phases = []
    for _ in range(2):
        run_id = alice.post("/api/v1/pipelines/counted/runs", {})["id"]
        view = alice.wait_run(run_id)
        phases.append([unit["phase"] for unit in view["steps"]])
    assert phases == [["Succeeded"], ["Cached"]]
    console = signed_in(up.url, (up.data / "admin.token").read_text().strip())
    console.get("/jobs")
    console.get(f"/runs/{run_id}")

    uid = os.stat(world / "data-tasks" / "hello" / "hello-main-0").st_uid
    assert uid != SERVER
    checked, wrong = 0, []
    for top in ("data", "data-tasks", "data-workspace"):
        for path, _dirs, files in os.walk(world / top):
            for entry in [Path(path), *(Path(path) / name for name in files)]:
                info = os.lstat(entry)
                kind = "d" if stat.S_ISDIR(info.st_mode) else "-"
                mode, owner = TABLE[place_of(entry, world), kind]
                expected = uid if owner == "user" else owner
                actual = stat.S_IMODE(info.st_mode)
                if info.st_uid != expected or (mode is not None and actual != mode):
                    wrong.append(f"{entry}: {actual:04o} uid {info.st_uid}")
                checked += 1
    assert wrong == [], "\n".join(wrong)
    assert checked > 30  # the walk saw the workload
    assert {p.name for p in (world / "data").iterdir()} >= {
        "phalanx.db",
        "phalanx.db-wal",
        "phalanx.db-shm",
        "admin.token",
    }
