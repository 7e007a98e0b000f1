"""The server dies, or is stopped, while one tick launches a big gang; then it restarts.

The moment is found by watching the data dir, never by sleeping: the signal goes out
once some of the gang's task directories exist and others do not, so the store holds
every task Bound while only some of them have a process.
"""

from __future__ import annotations

import signal
from pathlib import Path

from phalanx.control.controllers.adoption import CUT_SHORT
from tests.integration.control import processes
from tests.integration.control.serving import DEADLINE, database_url, role, wait_for

#: Room for 600 small tasks: 4 nodes of 32 CPUs (each task asks for 100m and 64Mi).
WIDE = """\
apiVersion: phalanx/v1
kind: Cluster
metadata: {name: wide}
spec:
  nodeGroups:
  - name: node
    count: 4
    resources: {cpu: 32, memory: 128Gi}
"""


#: How long a restart may take: it adopts or ends hundreds of tasks, on a loaded machine.
RESTART = 4 * DEADLINE


def _gang(replicas: int, command: str = "true") -> dict[str, object]:
    return role(replicas=replicas, command=command, cpu="100m", memory="64Mi")


def _mid_launch(server: processes.ServerProcess, job: str, replicas: int) -> int:
    """Wait until some but not all of ``job``'s task directories exist; how many do."""

    def started_some() -> int:
        count = processes.count_dirs(server.data / "tasks" / job)
        assert count < replicas, f"all {replicas} tasks of {job} started before the signal"
        return count

    count: int = wait_for(started_some, f"the first tasks of {job}")
    return count


def test_kill_nine_during_a_gang_launch_then_the_server_starts_and_the_gang_restarts(
    tmp_path: Path,
) -> None:
    db = database_url(tmp_path)
    server = processes.start(tmp_path, db=db, cluster=WIDE)
    try:
        api = server.api()
        api.queue("team-a")
        api.submit("gang", "team-a", _gang(300), maxRetry=1)
        _mid_launch(server, "gang", 300)
        server.kill()
        api.http.close()

        server = processes.start(tmp_path, db=db, cluster=WIDE, deadline=RESTART)
        api = server.api()
        api.submit("after", "team-a", role(cpu="100m", memory="64Mi"))
        api.wait_phase("after", "Succeeded")
        gang = api.wait_phase("gang", "Succeeded", "Failed", timeout=60)
        # Tasks the dead server never started cannot be adopted: the gang restarted, and
        # at no retry's cost (the server's crash is not the job's failure).
        assert gang["phase"] == "Succeeded", gang["message"]
        assert gang["attempts"] == 0
        events = api.get("/api/v1/jobs/gang/events")
        assert not [e for e in events if e["kind"] == "TaskFailed"]
        assert any(CUT_SHORT in e["message"] for e in events if e["kind"] == "Evicted")
        api.http.close()
    finally:
        server.kill()


def test_sigterm_during_a_gang_launch_shuts_down_in_order_and_loses_nothing(
    tmp_path: Path,
) -> None:
    db = database_url(tmp_path)
    server = processes.start(tmp_path, db=db, cluster=WIDE, cli=True)
    try:
        api = server.api()
        api.queue("team-a")
        api.submit("gang", "team-a", _gang(600), maxRetry=0)
        _mid_launch(server, "gang", 600)
        api.http.close()
        code = server.signal_and_wait(signal.SIGTERM)
        assert code == 0, server.log()
        assert "stopped on SIGTERM" in server.log() and "database closed" in server.log()
        if db is None:  # SQLite removes its write-ahead log when the last connection closes
            assert not (server.data / "phalanx.db-wal").exists()

        server = processes.start(tmp_path, db=db, cluster=WIDE, cli=True, deadline=RESTART)
        api = server.api()
        api.submit("after", "team-a", role(cpu="100m", memory="64Mi"))
        # The launch finished before the database closed: every task was recorded, so
        # the restarted server adopts them all and nothing is retried.
        gang = api.wait_phase("gang", "Succeeded", "Failed", timeout=60)
        assert gang["phase"] == "Succeeded" and gang["attempts"] == 0, gang["message"]
        api.wait_phase("after", "Succeeded")
        api.http.close()

        code = server.signal_and_wait(signal.SIGINT)
        assert code == 0, server.log()
        assert "stopped on SIGINT" in server.log()
    finally:
        server.kill()
