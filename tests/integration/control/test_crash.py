"""``kill -9`` of the server while jobs run, then a restart: nothing lost, nothing doubled."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import httpx

from phalanx.executors.local import LocalExecutor
from phalanx.executors.rendezvous import free_ports
from tests.integration.control.serving import CLUSTER, Api, database_url, role, wait_for

SERVE = textwrap.dedent(
    """
    import sys
    from pathlib import Path
    from phalanx.control.controllers.core import Timing
    from phalanx.control.server import Server, ServerSettings
    data, port, cluster, db = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4] or None
    timing = Timing(period=0.2, grace=1.0, backoff=0.2, max_backoff=1.0)
    settings = ServerSettings(data_dir=Path(data), port=port, cluster=Path(cluster), db_url=db, timing=timing)
    Server(settings).serve()
    """
)


def _serve(tmp_path: Path, port: int, db: str | None) -> subprocess.Popen[bytes]:
    cluster = tmp_path / "cluster.yaml"
    cluster.write_text(CLUSTER)
    args = [str(tmp_path / "data"), str(port), str(cluster), db or ""]
    process = subprocess.Popen([sys.executable, "-c", SERVE, *args])
    url = f"http://127.0.0.1:{port}"

    def up() -> bool:
        try:
            return httpx.get(f"{url}/healthz", timeout=1).status_code == 200
        except httpx.HTTPError:
            return False

    wait_for(up, "the server to answer")
    return process


def test_kill_nine_and_restart_loses_and_doubles_nothing(tmp_path: Path) -> None:
    (port,) = free_ports(1)
    starts = tmp_path / "starts.log"
    db = database_url(tmp_path)  # the restarted server opens the same one
    server = _serve(tmp_path, port, db)
    try:
        token = (tmp_path / "data" / "admin.token").read_text().strip()
        api = Api(f"http://127.0.0.1:{port}", token)
        api.queue("team-a")
        # Runs across the crash: it must be adopted, not started again.
        long = f'echo "$PHALANX_TASK $$" >> {starts}; sleep 3; echo done'
        api.submit("survivor", "team-a", role(replicas=2, command=long, gpu=4))
        # Waits for the GPUs the survivor holds: pending at the crash.
        for i in range(3):
            api.submit(
                f"queued-{i}", "team-a", role(command=f'echo "$PHALANX_TASK" >> {starts}', gpu=4)
            )
        wait_for(lambda: starts.exists() and starts.read_text().count("survivor") == 2, "survivor")
        survivor_pid = int(starts.read_text().split()[1])
        api.http.close()
        server.send_signal(signal.SIGKILL)
        server.wait(10)
        os.kill(survivor_pid, 0)  # the task outlived its server

        server = _serve(tmp_path, port, db)
        api = Api(f"http://127.0.0.1:{port}", token)
        names = sorted(j["name"] for j in api.get("/api/v1/jobs")["items"])
        assert names == ["queued-0", "queued-1", "queued-2", "survivor"]
        job = api.wait_phase("survivor", "Succeeded")
        assert [t["exit_code"] for t in job["tasks"]] == [0, 0]
        for i in range(3):
            api.wait_phase(f"queued-{i}", "Succeeded")
        lines = starts.read_text().splitlines()
        started = sorted(line.split()[0] for line in lines)
        assert started == [
            "queued-0-worker-0",
            "queued-1-worker-0",
            "queued-2-worker-0",
            "survivor-worker-0",
            "survivor-worker-1",
        ]
        logs = api.http.get("/api/v1/jobs/survivor/logs").text
        assert logs.strip() == "done"
        api.http.close()
    finally:
        server.send_signal(signal.SIGKILL)
        server.wait(10)


def test_a_task_whose_record_was_never_stored_is_adopted_from_its_workdir(tmp_path: Path) -> None:
    """The server died between starting a task and storing its record: the executor's own
    record in the task's directory lets the next server adopt it instead of starting it
    again."""
    from sqlalchemy import update

    from phalanx.control.server import Server, ServerSettings
    from phalanx.control.store.models import TaskRow
    from tests.integration.control.serving import FAST

    starts = tmp_path / "starts.log"
    (tmp_path / "cluster.yaml").write_text(CLUSTER)
    settings = ServerSettings(
        data_dir=tmp_path / "data",
        db_url=database_url(tmp_path),
        port=0,
        cluster=tmp_path / "cluster.yaml",
        timing=FAST,
    )
    first = Server(settings)
    first.start()
    api = Api(first.url, first.admin_token or "")
    api.queue("team-a")
    api.submit("once", "team-a", role(command=f'echo "$$" >> {starts}; sleep 2'))
    wait_for(lambda: starts.exists() and starts.read_text().strip(), "the task to start")
    wait_for(lambda: api.job("once")["tasks"][0]["phase"] == "Running", "Running stored")
    api.http.close()
    first.controller.shutdown()
    with first.db.session() as session:  # as if the record had never been stored
        session.execute(update(TaskRow).values(process=None))
    first.stop()

    second = Server(settings)
    second.start()
    try:
        api = Api(second.url, (tmp_path / "data" / "admin.token").read_text().strip())
        job = api.wait_phase("once", "Succeeded")
        assert job["attempts"] == 0
        assert len(starts.read_text().split()) == 1  # started once, adopted once
        api.http.close()
    finally:
        second.stop()
        # This process is still the task's parent through the first server's executor.
        executor = first.controller.core.executor
        assert isinstance(executor, LocalExecutor)
        wait_for(lambda: not executor.poll(now=time.time()) and not executor.running(), "reaped")
