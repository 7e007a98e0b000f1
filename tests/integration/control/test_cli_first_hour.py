"""Issue 23, "the first hour": what a new user meets on the command line, against a
real server (kinds singular or plural, several names, waits, notes instead of silence)."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import yaml

from phalanx.control.server import Server
from tests.integration.control.serving import wait_for
from tests.integration.control.test_cli import QUEUE_AND_JOB, ok, phalanx, refused

SLEEPER = QUEUE_AND_JOB.replace("echo rank=$RANK; echo warn-$RANK >&2", "exec sleep 60")


def jobs(name: str, *more: str) -> str:
    """``QUEUE_AND_JOB``'s job once under each name (the queue once)."""
    queue, job = QUEUE_AND_JOB.split("---\n")
    return "---\n".join([queue, *(job.replace("hello", n) for n in (name, *more))])


def test_kinds_are_singular_or_plural_and_delete_takes_several_names(server: Server) -> None:
    ok(phalanx(server, "apply", "-f", "-", stdin=jobs("a", "b", "c")))
    for name in ("a", "b", "c"):
        assert ok(phalanx(server, "wait", "job", name, "--for", "phase=Succeeded")) == (
            f"job/{name} condition met (Succeeded)\n"
        )
    # the same answer by either kind (as JSON: the table's AGE may tick between the two)
    singular = json.loads(ok(phalanx(server, "get", "job", "a", "-o", "json")))
    assert singular == json.loads(ok(phalanx(server, "get", "jobs", "a", "-o", "json")))
    assert singular and "NAME" in ok(phalanx(server, "get", "job", "a"))
    assert "a" in ok(phalanx(server, "get", "job"))
    assert "Events" in ok(phalanx(server, "describe", "jobs", "a"))
    assert "team-a" in ok(phalanx(server, "get", "queue"))
    assert "GUARANTEE" in ok(phalanx(server, "describe", "queues", "team-a"))
    assert "node-0" in ok(phalanx(server, "get", "node"))
    assert "a-worker-1" in ok(phalanx(server, "get", "task", "a"))
    assert ok(phalanx(server, "delete", "job", "a", "b", "c")).splitlines() == [
        "job/a deleted",
        "job/b deleted",
        "job/c deleted",
    ]
    assert json.loads(ok(phalanx(server, "get", "jobs", "-o", "json"))) == []
    assert ok(phalanx(server, "delete", "queues", "team-a")) == "queue/team-a deleted\n"


def test_deleting_a_running_job_cancels_it_and_deletes_it_once_ended(server: Server) -> None:
    ok(phalanx(server, "apply", "-f", "-", stdin=jobs("a", "b")))
    for name in ("a", "b"):
        ok(phalanx(server, "wait", "job", name, "--for", "phase=Succeeded"))
    ok(phalanx(server, "apply", "-f", "-", stdin=SLEEPER))
    ok(phalanx(server, "wait", "job", "hello", "--for", "phase=Running", "--timeout", "30s"))
    said = ok(phalanx(server, "delete", "job", "hello"))
    assert said == (
        "job/hello is Running: cancelled; it is deleted once its tasks have stopped "
        "(--wait waits for that)\n"
    )
    shown = phalanx(server, "get", "job", "hello", "-o", "json")
    # Marked for deletion while its tasks stop; or, when they stopped at once, gone already.
    assert (shown.exit_code == 0 and json.loads(shown.stdout)["delete_requested"]) or (
        "no job named 'hello'" in shown.stderr
    )
    wait_for(
        lambda: "no job named 'hello'" in phalanx(server, "get", "job", "hello").stderr,
        "hello to be deleted once cancelled",
    )
    assert [j["name"] for j in json.loads(ok(phalanx(server, "get", "jobs", "-o", "json")))] == [
        "a",
        "b",
    ]  # the ended jobs were left alone
    ok(phalanx(server, "apply", "-f", "-", stdin=SLEEPER))  # the name is free again
    ok(phalanx(server, "wait", "job", "hello", "--for", "phase=Running", "--timeout", "30s"))
    assert ok(phalanx(server, "delete", "jobs", "hello", "a", "--wait")).splitlines() == [
        "job/hello cancelled and deleted",
        "job/a deleted",
    ]
    assert "no job named 'hello'" in refused(phalanx(server, "get", "job", "hello"))
    assert "no job named 'zz'" in refused(phalanx(server, "delete", "job", "zz"))


def test_wait_names_the_job_its_phase_and_the_phases_waited_for(server: Server) -> None:
    never = SLEEPER.replace("gpu: 1}", "gpu: 9}")  # 9 GPUs on 4-GPU nodes: never placed
    ok(phalanx(server, "apply", "-f", "-", stdin=never))
    error = refused(
        phalanx(server, "wait", "job", "hello", "--for", "phase=Running", "--timeout", "1s")
    )
    assert error.startswith("error: timed out after 1s waiting for job hello to be Running; ")
    assert "it is Pending" in error or "it is Queued" in error
    assert error.count("\n") == 1
    assert "not a job phase" in refused(phalanx(server, "wait", "job", "hello", "--for", "phase=x"))
    assert "not a condition" in refused(phalanx(server, "wait", "job", "hello", "--for", "ready"))
    assert "--timeout" in refused(phalanx(server, "wait", "job", "hello", "--timeout", "soon"))
    assert "no job named 'nope'" in refused(phalanx(server, "wait", "job", "nope"))
    ok(phalanx(server, "cancel", "hello"))
    ended = refused(phalanx(server, "wait", "job", "hello", "--for", "phase=Succeeded"))
    assert "job hello ended Cancelled" in ended and "waited for to be Succeeded" in ended


def test_a_users_all_users_says_it_shows_their_jobs_only(server: Server) -> None:
    ok(phalanx(server, "apply", "-f", "-", stdin=SLEEPER.replace("gpu: 1}", "gpu: 9}")))
    alice = ok(phalanx(server, "users", "create", "alice")).strip()
    wait_for(lambda: phalanx(server, "get", "jobs", token=alice).exit_code == 0, "the token")
    mine = phalanx(server, "get", "jobs", "--all-users", "-o", "json", token=alice)
    assert json.loads(ok(mine)) == []  # admin's job "hello" is not hers
    assert mine.stderr == ("note: --all-users is for admins; you (alice) see your own jobs only\n")
    other = phalanx(server, "get", "jobs", "--user", "admin", token=alice)
    assert "--user admin is for admins" in other.stderr
    everyone = phalanx(server, "get", "jobs", "--all-users", "-o", "json")
    assert [j["name"] for j in json.loads(ok(everyone))] == ["hello"] and not everyone.stderr


def test_top_into_a_pipe_prints_frames(server: Server) -> None:
    two = ok(phalanx(server, "top", "nodes", "--frames", "2", "--interval", "0.2"))
    assert two.count("node(s), GPUs 0/8 in use") == 2 and two.count("node-1") == 2
    once = ok(phalanx(server, "top", "node", "--once"))
    assert once.count("node(s), GPUs") == 1
    assert ok(phalanx(server, "top", "queues", "-n", "2", "--interval", "0.2")).count("QUEUE") == 2


def test_apply_again_is_unchanged_and_a_changed_job_says_what_differs(
    server: Server, tmp_path: Path
) -> None:
    path = tmp_path / "hello.yaml"
    path.write_text(SLEEPER)
    ok(phalanx(server, "apply", "-f", str(path)))
    assert ok(phalanx(server, "apply", "-f", str(path))).splitlines() == [
        "queue/team-a unchanged",
        "job/hello unchanged",
    ]
    path.write_text(SLEEPER.replace("guarantee: {gpu: 2}", "guarantee: {gpu: 1}"))
    assert ok(phalanx(server, "apply", "-f", str(path))).splitlines() == [
        "queue/team-a configured",
        "job/hello unchanged",
    ]
    path.write_text(SLEEPER.replace("replicas: 2", "replicas: 1").replace("gpu: 1}", "gpu: 2}"))
    error = refused(phalanx(server, "apply", "-f", str(path)))
    assert error.count("\n") == 1, error
    assert (
        f"{path} document 2: job hello exists and differs in spec.roles[0].replicas, "
        "spec.roles[0].resources.gpu; a job cannot be changed in place"
    ) in error
    assert "phalanx delete job hello --wait" in error and "another metadata.name" in error
    # Another user's job of that name: the name is not available, nothing more is said.
    alice = ok(phalanx(server, "users", "create", "alice")).strip()
    wait_for(lambda: phalanx(server, "get", "jobs", token=alice).exit_code == 0, "the token")
    job_only = SLEEPER.split("---\n")[1]
    error = refused(phalanx(server, "apply", "-f", "-", stdin=job_only, token=alice))
    assert "the job name 'hello' is not available" in error and "differs" not in error


def test_machine_output_writes_quantities_and_times_as_people_do(server: Server) -> None:
    big = SLEEPER.replace("{cpu: 1, memory: 1Gi, gpu: 1}", '{cpu: "2", memory: 3Gi, gpu: 0.5}')
    ok(phalanx(server, "apply", "-f", "-", stdin=big))
    ok(phalanx(server, "wait", "job", "hello", "--for", "phase=Running"))
    job = yaml.safe_load(ok(phalanx(server, "get", "job", "hello", "-o", "yaml")))
    assert job["requests"] == {"cpu": "4", "memory": "6Gi", "gpu": "1"}
    assert job["canonical"]["requests"] == {"cpu": 4000.0, "memory": 6 * 2**30, "gpu": 1.0}
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", job["created_at"])
    assert isinstance(job["canonical"]["created_at"], float)
    assert job["document"]["spec"]["roles"][0]["resources"] == {
        "cpu": "2",
        "memory": "3Gi",
        "gpu": 0.5,
    }
    listed = json.loads(ok(phalanx(server, "get", "jobs", "-o", "json")))
    assert listed[0]["requests"] == job["requests"] and "canonical" in listed[0]
    node = json.loads(ok(phalanx(server, "get", "node", "node-0", "-o", "json")))
    assert node["capacity"]["memory"] == "32Gi" and node["capacity"]["cpu"] == "8"
    assert "cpu=4, gpu=1, memory=6Gi" in ok(phalanx(server, "get", "jobs", "-o", "wide"))
    ok(phalanx(server, "delete", "job", "hello", "--wait"))


def test_logs_of_a_job_not_started_says_so_and_follow_waits_for_the_start(
    server: Server,
) -> None:
    hog = SLEEPER.replace("hello", "hog").replace("replicas: 2", "replicas: 8")
    ok(phalanx(server, "apply", "-f", "-", stdin=hog))  # every GPU of both nodes
    ok(phalanx(server, "wait", "job", "hog", "--for", "phase=Running"))
    ok(phalanx(server, "apply", "-f", "-", stdin=QUEUE_AND_JOB))
    shown = phalanx(server, "logs", "hello")
    assert ok(shown) == ""
    assert shown.stderr.startswith("note: job hello has not started yet: it is ")
    assert "phalanx logs -f hello waits for the start" in shown.stderr
    follower = subprocess.Popen(
        [sys.executable, "-m", "phalanx.cli.main", "--server", server.url,
         "--token", server.admin_token or "", "logs", "hello", "-f"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )  # fmt: skip
    try:
        assert follower.stderr is not None
        note = follower.stderr.readline().decode()
        assert note.startswith("note: job hello has not started yet"), note
        assert "waiting for it to start, then following its output" in note
        ok(phalanx(server, "delete", "job", "hog", "--wait"))
        out, err = follower.communicate(timeout=60)
        assert (follower.returncode, out, err) == (0, b"rank=0\n", b"")
    finally:  # its pipes closed even when it has exited
        if follower.poll() is None:
            follower.kill()
        follower.communicate()


def test_a_job_no_retry_can_start_fails_at_once_and_its_follower_says_so(
    server: Server,
) -> None:
    """A program that is not there: no retry can fix it, so the job fails at once (not
    after maxRetry back-offs), and ``logs -f`` ends saying how the job ended."""
    missing = QUEUE_AND_JOB.replace(
        '"echo rank=$RANK; echo warn-$RANK >&2"', "[no-such-program-anywhere]"
    ).replace("name: hello", "name: nowhere")
    ok(phalanx(server, "apply", "-f", "-", stdin=missing))
    followed = phalanx(server, "logs", "nowhere", "--all", "-f")
    assert followed.exit_code == 1, followed.stderr
    assert "error: job nowhere ended Failed (RetriesExhausted)" in followed.stderr
    assert "not retried: a retry cannot fix this" in followed.stderr
    shown = json.loads(ok(phalanx(server, "get", "job", "nowhere", "-o", "json")))
    assert shown["attempts"] == 1, shown  # maxRetry 3 left unspent
    ok(phalanx(server, "delete", "job", "nowhere", "--wait"))


FLAKY = """\
apiVersion: phalanx/v1
kind: Job
metadata: {name: flaky}
spec:
  queue: team-a
  maxRetry: 1
  roles:
  - name: worker
    replicas: 1
    resources: {cpu: 1, memory: 1Gi}
    command: >-
      if [ -e ran-once ]; then echo second; else touch ran-once; echo first; exit 3; fi
"""


def test_each_later_attempt_of_a_task_begins_with_its_header(server: Server) -> None:
    ok(phalanx(server, "apply", "-f", "-", stdin=QUEUE_AND_JOB.split("---\n")[0]))
    ok(phalanx(server, "apply", "-f", "-", stdin=FLAKY))
    ok(phalanx(server, "wait", "job", "flaky", "--for", "phase=Succeeded", "--timeout", "60s"))
    header = "--- attempt 2 (retry after: exit code 3) ---\n"
    assert ok(phalanx(server, "logs", "flaky")) == f"first\n{header}second\n"
    assert ok(phalanx(server, "logs", "flaky", "--stderr")) == header
    assert ok(phalanx(server, "logs", "flaky", "--all")) == (
        f"flaky-worker-0 | first\nflaky-worker-0 | {header}flaky-worker-0 | second\n"
    )


def test_a_follower_of_a_job_deleted_while_it_runs_ends_quietly(server: Server) -> None:
    talker = SLEEPER.replace("exec sleep 60", "echo up; exec sleep 60")
    ok(phalanx(server, "apply", "-f", "-", stdin=talker))
    ok(phalanx(server, "wait", "job", "hello", "--for", "phase=Running"))
    follower = subprocess.Popen(
        [sys.executable, "-m", "phalanx.cli.main", "--server", server.url,
         "--token", server.admin_token or "", "logs", "hello", "-f"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )  # fmt: skip
    try:
        assert follower.stdout is not None and follower.stdout.readline() == b"up\n"
        ok(phalanx(server, "delete", "job", "hello"))
        out, err = follower.communicate(timeout=60)
        assert (follower.returncode, out, err) == (0, b"", b"")
    finally:  # its pipes closed even when it has exited
        if follower.poll() is None:
            follower.kill()
        follower.communicate()
