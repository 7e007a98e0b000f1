"""Issue 37, "the second hour": watching and waiting, logs that are not where the server
looks, the last lines of a log, and deleting a pipeline, against a real server."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from phalanx.cli import watch
from phalanx.control.server import Server, ServerSettings
from tests.integration.control.serving import CLUSTER, FAST, Api, database_url, wait_for
from tests.integration.control.test_cli import QUEUE_AND_JOB, ok, phalanx, refused

QUEUE = QUEUE_AND_JOB.split("---\n")[0]

#: Two steps; ``first`` waits until the file ``gate`` exists, ``second`` exits ``code``.
TWO_STEPS = """\
apiVersion: phalanx/v1
kind: Queue
metadata: {name: wf}
spec: {weight: 1}
---
apiVersion: phalanx/v1
kind: Pipeline
metadata: {name: two}
spec:
  params: {code: 0, gate: /}
  defaults: {queue: wf, resources: {cpu: 1, memory: 256Mi}}
  steps:
    first:
      command: ["sh", "-c", "while [ ! -e '{{params.gate}}' ]; do sleep 0.1; done; echo first"]
    second:
      dependsOn: [first]
      command: ["sh", "-c", "echo second; exit {{params.code}}"]
"""


def admin(server: Server) -> Api:
    return Api(server.url, server.admin_token or "")


def between_reads(monkeypatch: pytest.MonkeyPatch, *steps: Callable[[], object]) -> None:
    """The watch's waits run ``steps``, one per wait; the wait after the last is Ctrl-C."""
    left = list(steps)

    def sleep(_: float) -> None:
        if not left:
            raise KeyboardInterrupt
        left.pop(0)()

    monkeypatch.setattr(watch, "sleep", sleep)


def test_pipeline_run_wait_ends_with_the_run_and_names_the_failed_step(server: Server) -> None:
    ok(phalanx(server, "apply", "-f", "-", stdin=TWO_STEPS))
    done = phalanx(server, "pipeline", "run", "two", "--wait", "--timeout", "60s")
    run_id = ok(done).strip()  # the id alone on stdout, as without --wait
    assert done.stderr == f"run/{run_id} Succeeded\n"
    assert ok(phalanx(server, "wait", "run", run_id)) == f"run/{run_id} condition met (Succeeded)\n"

    failed = phalanx(server, "pipeline", "run", "two", "-p", "code=3", "--wait")
    bad = failed.stdout.strip()
    error = refused(failed)
    assert error.startswith(f"error: run {bad} ended Failed: step second failed (")
    assert "it was waited for to be Succeeded" in error and error.count("\n") == 1
    assert "exited with code 3" in error and f"phalanx describe run {bad}" in error
    # A wait for a run that already ended otherwise ends at once, saying the same.
    again = refused(phalanx(server, "wait", "runs", bad, "--for", "phase=Succeeded"))
    assert again.startswith(f"error: run {bad} ended Failed: step second failed (")
    assert ok(phalanx(server, "wait", "run", bad, "--for", "phase=Succeeded,Failed")) == (
        f"run/{bad} condition met (Failed)\n"
    )


def test_wait_run_times_out_naming_the_run_and_its_phase(server: Server, tmp_path: Path) -> None:
    ok(phalanx(server, "apply", "-f", "-", stdin=TWO_STEPS))
    gate = tmp_path / "gate"
    run_id = ok(phalanx(server, "pipeline", "run", "two", "-p", f"gate={gate}")).strip()
    ok(phalanx(server, "wait", "run", run_id, "--for", "phase=Running"))
    error = refused(phalanx(server, "wait", "run", run_id, "--timeout", "1s"))
    assert error.startswith(
        f"error: timed out after 1s waiting for run {run_id} to be Succeeded; it is Running"
    )
    waited = phalanx(
        server, "pipeline", "run", "two", "-p", f"gate={gate}", "--wait", "--timeout", "1s"
    )
    assert "waiting for run two-" in refused(waited) and "it is " in waited.stderr
    assert "not a run phase" in refused(phalanx(server, "wait", "run", run_id, "--for", "phase=x"))
    assert "no run" in refused(phalanx(server, "wait", "run", "nope"))
    gate.touch()
    assert ok(phalanx(server, "wait", "run", run_id, "--timeout", "60s")) == (
        f"run/{run_id} condition met (Succeeded)\n"
    )


def test_get_jobs_watch_prints_the_table_then_each_change(
    server: Server, monkeypatch: pytest.MonkeyPatch
) -> None:
    api = admin(server)
    ok(phalanx(server, "apply", "-f", "-", stdin=QUEUE))

    def submit_and_finish() -> None:
        ok(phalanx(server, "apply", "-f", "-", stdin=QUEUE_AND_JOB))
        api.wait_phase("hello", "Succeeded")

    def delete() -> None:
        assert api.http.delete("/api/v1/jobs/hello").status_code == 200
        wait_for(lambda: api.http.get("/api/v1/jobs/hello").status_code == 404, "hello gone")

    between_reads(monkeypatch, submit_and_finish, lambda: None, delete)
    watched = phalanx(server, "get", "jobs", "-w")
    assert watched.exit_code == 130, watched.output
    assert watched.stderr == "no jobs: watching for changes (Ctrl-C to stop)\n"
    rows = [line.split() for line in watched.stdout.splitlines()]
    # No header (nothing to list at first), a row once it succeeded, none while nothing
    # changed (its AGE is no change), one when it was deleted.
    assert [(row[0], row[3], row[5]) for row in rows] == [
        ("hello", "Succeeded", "2/2"),
        ("hello", "Deleted", "2/2"),
    ]


def test_get_runs_watch_prints_json_lines(server: Server, monkeypatch: pytest.MonkeyPatch) -> None:
    api = admin(server)
    ok(phalanx(server, "apply", "-f", "-", stdin=TWO_STEPS))
    run_id = ok(phalanx(server, "pipeline", "run", "two", "--wait")).strip()

    def second_run() -> None:
        made = ok(phalanx(server, "pipeline", "run", "two", "--wait")).strip()
        api.wait_run(made)

    between_reads(monkeypatch, second_run)
    watched = phalanx(server, "get", "runs", "-w", "-o", "json")
    assert watched.exit_code == 130, watched.output
    lines = [json.loads(line) for line in watched.stdout.splitlines()]
    assert [view["phase"] for view in lines] == ["Succeeded", "Succeeded"]
    assert lines[0]["id"] == run_id and lines[1]["id"] != run_id
    shown = phalanx(server, "get", "run", run_id, "-w")
    assert shown.exit_code == 130 and run_id in shown.stdout and "PHASE" in shown.stdout


def test_delete_pipeline_leaves_its_runs_going(server: Server, tmp_path: Path) -> None:
    ok(phalanx(server, "apply", "-f", "-", stdin=TWO_STEPS))
    gate = tmp_path / "gate"
    run_id = ok(phalanx(server, "pipeline", "run", "two", "-p", f"gate={gate}")).strip()
    ok(phalanx(server, "wait", "run", run_id, "--for", "phase=Running"))
    assert ok(phalanx(server, "delete", "pipeline", "two")) == (
        f"pipeline/two deleted; its 1 active run(s) go on (stop them with "
        f"phalanx delete run {run_id})\n"
    )
    assert "no pipeline named 'two'" in refused(phalanx(server, "get", "pipeline", "two"))
    assert "no pipeline named 'two'" in refused(phalanx(server, "pipeline", "run", "two"))
    gate.touch()  # the run goes on with the document it was started with
    ok(phalanx(server, "wait", "run", run_id, "--timeout", "60s"))
    assert "no pipeline named 'two'" in refused(phalanx(server, "delete", "pipelines", "two"))
    ok(phalanx(server, "apply", "-f", "-", stdin=TWO_STEPS))
    assert ok(phalanx(server, "delete", "pipelines", "two")) == "pipeline/two deleted\n"


@contextmanager
def serving(tmp_path: Path, tasks: Path, db: str | None) -> Iterator[tuple[Server, str]]:
    """A server over ``tmp_path/data`` (the same every time) running tasks in ``tasks``,
    and its admin's token; stopped afterwards."""
    (tmp_path / "cluster.yaml").write_text(CLUSTER)
    settings = ServerSettings(
        data_dir=tmp_path / "data",
        db_url=db,
        port=0,
        cluster=tmp_path / "cluster.yaml",
        timing=FAST,
        tasks_dir=tasks,
        shared_identity=True,  # the tasks write into the test's directory
    )
    server = Server(settings)
    server.start()
    try:
        yield server, (tmp_path / "data" / "admin.token").read_text().strip()
    finally:
        server.stop()


def test_logs_written_under_another_tasks_dir_say_where_they_are(tmp_path: Path) -> None:
    old, new = tmp_path / "old-tasks", tmp_path / "new-tasks"
    db = database_url(tmp_path)  # the restarted server opens the same one
    with serving(tmp_path, old, db) as (first, token):
        ok(phalanx(first, "apply", "-f", "-", stdin=QUEUE_AND_JOB, token=token))
        ok(phalanx(first, "wait", "job", "hello", token=token))
        assert ok(phalanx(first, "logs", "hello", token=token)) == "rank=0\n"
        removed = old / "hello" / "hello-worker-1" / "stdout.log"
        removed.unlink()  # a log removed from under the server
        error = refused(phalanx(first, "logs", "hello", "hello-worker-1", token=token))
        assert error.startswith(
            f"error: no stdout of task hello-worker-1 to show: no log file at {removed}"
        )
        shown = phalanx(first, "logs", "hello", "--all", token=token)
        assert ok(shown) == "hello-worker-0 | rank=0\n"  # the other task's output, and why not
        assert shown.stderr.startswith(
            f"warning: no stdout of task hello-worker-1 to show: no log file at {removed}"
        )
    with serving(tmp_path, new, db) as (second, token):
        moved = (
            f"the log is not in the tasks dir {new} (it was written under {old}, which this "
            "server no longer uses)"
        )
        for args in ((), ("-f",), ("hello-worker-0", "--stderr"), ("--all", "-f")):
            error = refused(phalanx(second, "logs", "hello", *args, token=token))
            assert moved in error, (args, error)
            assert f"restart phalanx up with --tasks-dir {old}" in error
        assert "(and 1 more task(s) of job hello alike)" in refused(
            phalanx(second, "logs", "hello", "--all", token=token)
        )
        # A job that ran under the new tasks dir is served as ever.
        ok(
            phalanx(
                second,
                "apply",
                "-f",
                "-",
                stdin=QUEUE_AND_JOB.replace("hello", "again"),
                token=token,
            )
        )
        ok(phalanx(second, "wait", "job", "again", token=token))
        assert ok(phalanx(second, "logs", "again", token=token)) == "rank=0\n"


COUNTER = QUEUE_AND_JOB.replace(
    '"echo rank=$RANK; echo warn-$RANK >&2"', '"for i in 1 2 3 4 5; do echo $i-$RANK; done"'
)


def test_logs_tail_gives_the_last_lines_and_since_counts_from_each_tasks_start(
    server: Server,
) -> None:
    ok(phalanx(server, "apply", "-f", "-", stdin=COUNTER))
    ok(phalanx(server, "wait", "job", "hello"))
    assert ok(phalanx(server, "logs", "hello", "--tail", "2")) == "4-0\n5-0\n"
    assert ok(phalanx(server, "logs", "hello", "--all", "--tail", "1")) == (
        "hello-worker-0 | 5-0\nhello-worker-1 | 5-1\n"
    )
    assert ok(phalanx(server, "logs", "hello", "-f", "--tail", "1")) == "5-0\n"
    assert ok(phalanx(server, "logs", "hello", "--tail", "-1")).count("\n") == 5
    nothing = phalanx(server, "logs", "hello", "--tail", "0")
    assert (ok(nothing), nothing.stderr) == ("", "")  # nothing asked for, nothing said
    assert ok(phalanx(server, "logs", "hello", "--since", "1h")).count("\n") == 5
    started = max(task["started_at"] for task in admin(server).job("hello")["tasks"])
    wait_for(lambda: time.time() > started + 1.5, "both tasks to have started over 1s ago")
    earlier = phalanx(server, "logs", "hello", "--all", "--since", "1s")
    assert ok(earlier) == ""
    assert earlier.stderr.startswith(
        "warning: since=1s leaves out the output so far of 2 task(s) whose current run "
        "started earlier or has not started: hello-worker-0, hello-worker-1 (a log's lines "
        "carry no time stamps"
    )
    assert "--since: " in refused(phalanx(server, "logs", "hello", "--since", "soon"))
    quiet = phalanx(server, "logs", "hello", "--stderr")
    assert (ok(quiet), quiet.stderr) == (
        "",
        "note: task hello-worker-0 has written nothing to its stderr\n",
    )
