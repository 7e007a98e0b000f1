"""Accepted jobs that cannot start: each fails alone, with the cause in its message.

A job that the kernel refuses to start (an environment over its limit), whose command
does not exist, or whose name is as long as validation allows never stops the server,
never holds up another job, and leaves a data dir that the server starts on again.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.integration.control import processes
from tests.integration.control.serving import Api, database_url, role

#: SQLite only: tasks that cannot start are the executor's; a restart on PostgreSQL is test_crash's.
BACKENDS = ("sqlite",)


def _restart_and_run_one(tmp_path: Path, db: str | None, old: processes.ServerProcess) -> None:
    """Kill ``old``, start again on its data dir: a new job runs there to success."""
    old.kill()
    again = processes.start(tmp_path, db=db)
    try:
        api = again.api()
        api.submit("after-restart", "team-a", role())
        api.wait_phase("after-restart", "Succeeded")
        api.http.close()
    finally:
        again.kill()


def _events(api: Api, job: str) -> list[dict[str, Any]]:
    events: list[dict[str, Any]] = api.get(f"/api/v1/jobs/{job}/events")
    return events


def test_an_environment_over_the_kernel_limit_fails_only_its_job(tmp_path: Path) -> None:
    db = database_url(tmp_path)
    # With a 1 MiB stack, ARG_MAX is 256 KiB: an environment of 300 KiB, within what a
    # job may ask for (512 KiB), is refused by execve with E2BIG.
    server = processes.start(tmp_path, db=db, stack_limit=2**20)
    try:
        api = server.api()
        api.queue("team-a")
        env = {f"BIG{i}": "x" * (60 * 1024) for i in range(5)}
        big = {**role(replicas=2), "env": env}
        api.submit("big-env", "team-a", big, maxRetry=1)
        api.submit("fine", "team-a", role(replicas=2))
        bad = api.wait_phase("big-env", "Failed")
        # No retry can shrink the environment: the job fails at once, its retry unspent.
        assert bad["attempts"] == 1 and bad["reason"] == "RetriesExhausted"
        assert "could not start" in bad["message"] and "ARG_MAX" in bad["message"]
        assert "pass large values in a file" in bad["message"]
        assert "not retried: a retry cannot fix this" in bad["message"]
        assert [t["phase"] for t in bad["tasks"]] == ["Failed", "Failed"]
        failed = [e for e in _events(api, "big-env") if e["kind"] == "TaskFailed"]
        assert len(failed) == 1
        api.wait_phase("fine", "Succeeded")
        api.http.close()
        _restart_and_run_one(tmp_path, db, server)
    finally:
        server.kill()


def test_a_name_as_long_as_validation_allows_runs_and_serves_its_logs(tmp_path: Path) -> None:
    db = database_url(tmp_path)
    name = "long-" + "n" * 240 + "-name"  # 250 characters; its task names are 259
    server = processes.start(tmp_path, db=db)
    try:
        api = server.api()
        api.queue("team-a")
        api.submit(name, "team-a", role(replicas=2, command="echo hello from $PHALANX_TASK"))
        api.submit("fine", "team-a", role())
        job = api.wait_phase(name, "Succeeded", "Failed")
        assert job["phase"] == "Succeeded", job["message"]
        assert [t["exit_code"] for t in job["tasks"]] == [0, 0]
        task = f"{name}-worker-1"
        logs = api.http.get(f"/api/v1/jobs/{name}/logs", params={"task": task}).text
        assert logs.strip() == f"hello from {task}"
        workdirs = [p for p in (server.data / "tasks").rglob("*") if p.is_dir()]
        assert workdirs and all(len(p.name.encode()) <= 255 for p in workdirs)
        api.wait_phase("fine", "Succeeded")
        api.http.close()
        _restart_and_run_one(tmp_path, db, server)
    finally:
        server.kill()


def test_a_missing_command_fails_its_job_saying_command_not_found(tmp_path: Path) -> None:
    db = database_url(tmp_path)
    server = processes.start(tmp_path, db=db)
    try:
        api = server.api()
        api.queue("team-a")
        # An argv whose program is nowhere on PATH, and a shell line running one.
        missing = "phalanx-test-no-such-program"
        api.submit("argv", "team-a", role(command=[missing, "--flag"]), maxRetry=0)
        api.submit("shell", "team-a", role(command=f"{missing} --flag"), maxRetry=0)
        api.submit("fine", "team-a", role())
        argv = api.wait_phase("argv", "Failed")
        assert "could not start" in argv["message"] and "command not found" in argv["message"]
        assert repr(missing) in argv["message"] and "PATH" in argv["message"]
        shell = api.wait_phase("shell", "Failed")
        assert "exited with code 127" in shell["message"]
        assert "command not found" in shell["message"]
        logs = api.http.get("/api/v1/jobs/shell/logs", params={"stream": "stderr"}).text
        assert missing in logs
        api.wait_phase("fine", "Succeeded")
        api.http.close()
        _restart_and_run_one(tmp_path, db, server)
    finally:
        server.kill()
