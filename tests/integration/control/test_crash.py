"""``kill -9`` of the server while jobs run, then a restart: nothing lost, nothing doubled."""

from __future__ import annotations

import os
import time
from pathlib import Path

from phalanx.executors.local import LocalExecutor
from tests.integration.control import processes
from tests.integration.control.serving import CLUSTER, Api, database_url, role, wait_for


def test_kill_nine_and_restart_loses_and_doubles_nothing(tmp_path: Path) -> None:
    starts = tmp_path / "starts.log"
    db = database_url(tmp_path)  # the restarted server opens the same one
    server = processes.start(tmp_path, db=db)
    try:
        token = (tmp_path / "data" / "admin.token").read_text().strip()
        api = Api(server.url, token)
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
        server.kill()
        os.kill(survivor_pid, 0)  # the task outlived its server

        server = processes.start(tmp_path, db=db)
        api = Api(server.url, token)
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
        server.kill()


def test_a_task_whose_record_was_never_stored_is_adopted_from_the_executors_record(
    tmp_path: Path,
) -> None:
    """The server died between starting a task and storing its record: the executor's own
    record in the data dir lets the next server adopt it instead of starting it again."""
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
        shared_identity=True,  # the task writes into the test's directory
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
