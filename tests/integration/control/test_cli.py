"""The ``phalanx`` command line against a real server, as a person would drive it."""

from __future__ import annotations

import json
import os
from pathlib import Path

import yaml
from click.testing import Result
from typer.testing import CliRunner

from phalanx.cli.main import app
from phalanx.control.server import Server
from tests.integration.control.serving import wait_for

QUEUE_AND_JOB = """\
apiVersion: phalanx/v1
kind: Queue
metadata: {name: team-a}
spec:
  guarantee: {gpu: 2}
---
apiVersion: phalanx/v1
kind: Job
metadata: {name: hello}
spec:
  queue: team-a
  roles:
  - name: worker
    replicas: 2
    resources: {cpu: 1, memory: 1Gi, gpu: 1}
    command: "echo rank=$RANK; echo warn-$RANK >&2"
"""

#: No environment or config file of the person running the tests leaks in.
CLEAN = {"PHALANX_SERVER": None, "PHALANX_TOKEN": None, "PHALANX_CONFIG": None}


def phalanx(
    server: Server, *args: str, stdin: str | None = None, token: str | None = None
) -> Result:
    """Run the CLI against ``server`` as its admin (or with ``token``)."""
    runner = CliRunner(env=CLEAN)
    options = ["--server", server.url, "--token", token or server.admin_token or ""]
    return runner.invoke(app, [*options, *args], input=stdin)


def ok(result: Result) -> str:
    assert result.exit_code == 0, f"exit {result.exit_code}\n{result.output}"
    return result.stdout


def refused(result: Result) -> str:
    """The one-line error of a command that failed as a person's mistake should."""
    assert result.exit_code == 1, f"exit {result.exit_code}\n{result.output}"
    assert result.stderr.startswith("error: "), result.stderr
    assert "Traceback" not in result.output
    return result.stderr


def test_apply_get_describe_logs_delete(server: Server, tmp_path: Path) -> None:
    path = tmp_path / "hello.yaml"
    path.write_text(QUEUE_AND_JOB)
    assert ok(phalanx(server, "apply", "-f", str(path))).splitlines() == [
        "queue/team-a created",
        "job/hello created",
    ]
    wait_for(
        lambda: (
            json.loads(ok(phalanx(server, "get", "jobs", "-o", "json")))[0]["phase"] == "Succeeded"
        ),
        "hello to succeed",
    )
    jobs = json.loads(ok(phalanx(server, "get", "jobs", "-o", "json")))
    assert [(j["name"], j["queue"], j["phase"]) for j in jobs] == [("hello", "team-a", "Succeeded")]
    assert yaml.safe_load(ok(phalanx(server, "get", "jobs", "-o", "yaml")))[0]["name"] == "hello"
    table = ok(phalanx(server, "get", "jobs"))
    assert "NAME" in table and "hello" in table and "Succeeded" in table
    wide = ok(phalanx(server, "get", "jobs", "-o", "wide"))
    assert "REASON" in wide and "every running task succeeded" in wide
    assert "hello" not in ok(phalanx(server, "get", "jobs", "--phase", "running"))

    described = ok(phalanx(server, "describe", "job", "hello"))
    for expected in ("Events", "Queued", "Running", "Succeeded", "hello-worker-1", "node-0"):
        assert expected in described
    assert "cpu=2, gpu=2, memory=2Gi" in described  # what both replicas ask for

    assert ok(phalanx(server, "logs", "hello")) == "rank=0\n"
    assert ok(phalanx(server, "logs", "hello", "hello-worker-1", "-f")) == "rank=1\n"
    assert ok(phalanx(server, "logs", "hello", "hello-worker-1", "--stderr")) == "warn-1\n"

    assert ok(phalanx(server, "delete", "job", "hello")) == "job/hello deleted\n"
    assert json.loads(ok(phalanx(server, "get", "jobs", "-o", "json"))) == []
    assert ok(phalanx(server, "delete", "queue", "team-a")) == "queue/team-a deleted\n"
    assert "no job named 'hello'" in refused(phalanx(server, "logs", "hello"))


def test_a_bad_file_names_the_line_and_field_and_sends_nothing(
    server: Server, tmp_path: Path
) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text(QUEUE_AND_JOB.replace("gpu: 1}", "gpu: two}"))
    error = refused(phalanx(server, "apply", "-f", str(path)))
    assert error.count("\n") == 1  # one line
    assert f"{path} document 2 (Job hello), line 15: spec.roles[0].resources.gpu:" in error
    assert "fix: " in error
    assert json.loads(ok(phalanx(server, "get", "queues", "-o", "json"))) == []

    path.write_text("apiVersion: phalanx/v1\nkind: Queue\nmetadata: {name: [x\n")
    assert "line 4" in refused(phalanx(server, "apply", "-f", str(path)))
    assert "cannot read" in refused(phalanx(server, "apply", "-f", str(tmp_path / "missing.yaml")))


def test_apply_reads_stdin_and_cancel_stops_a_job(server: Server) -> None:
    sleeper = QUEUE_AND_JOB.replace("echo rank=$RANK; echo warn-$RANK >&2", "exec sleep 60")
    assert "job/hello created" in ok(phalanx(server, "apply", "-f", "-", stdin=sleeper))
    wait_for(lambda: "Running" in ok(phalanx(server, "get", "jobs", "hello")), "hello to run")
    assert ok(phalanx(server, "cancel", "hello")) == "job/hello cancel requested\n"
    wait_for(lambda: "Cancelled" in ok(phalanx(server, "get", "jobs", "hello")), "the cancel")
    described = ok(phalanx(server, "describe", "job", "hello"))
    assert "Cancelled" in described


def test_top_describe_node_and_cordon(server: Server) -> None:
    frame = ok(phalanx(server, "top", "nodes", "--once"))
    assert "node-0" in frame and "node-1" in frame and "0/8 in use" in frame
    assert "QUEUE" in ok(phalanx(server, "top", "queues", "--once"))
    nodes = ok(phalanx(server, "get", "nodes"))
    assert "node-1" in nodes and "Ready" in nodes

    assert ok(phalanx(server, "cordon", "node-1")) == "node/node-1 cordoned\n"
    assert "Cordoned" in ok(phalanx(server, "get", "nodes"))
    assert ok(phalanx(server, "drain", "node-1")).startswith("node/node-1 draining")
    assert "Drained" in ok(phalanx(server, "describe", "node", "node-1"))  # no task on it
    assert "node/node-1 uncordoned" in ok(phalanx(server, "uncordon", "node-1"))
    described = ok(phalanx(server, "describe", "node", "node-0"))
    assert "GPUs" in described and "virtual" in described and "[░" in described
    # How its tasks are limited, and whose uid they run as (this server: a shared identity).
    flat = " ".join(described.split())
    limits = server.controller.view.nodes[0].limits
    assert limits and f"Limits: {' '.join(limits.split()[:3])}" in flat
    assert f"Identity: shared: every task as uid {os.geteuid()} (--shared-identity)" in flat
    assert "no node named 'node-9'" in refused(phalanx(server, "cordon", "node-9"))


def test_describe_queue_shows_quotas_against_allocation(server: Server) -> None:
    ok(phalanx(server, "apply", "-f", "-", stdin=QUEUE_AND_JOB.split("---", maxsplit=1)[0]))
    described = ok(phalanx(server, "describe", "queue", "team-a"))
    assert "GUARANTEE" in described and "DESERVED" in described and "gpu" in described


def test_users_and_tokens(server: Server) -> None:
    made = phalanx(server, "users", "create", "alice")
    token = ok(made).strip()
    assert token.startswith("phx_") and "shown only now" in made.stderr
    # The API commits a new user just after answering; wait until the token works.
    wait_for(lambda: phalanx(server, "get", "jobs", token=token).exit_code == 0, "the token")
    assert "alice" in ok(phalanx(server, "users", "list"))
    second = ok(phalanx(server, "token", "create", "alice", "--label", "laptop")).strip()
    assert second.startswith("phx_") and second != token
    assert "not an admin" in refused(phalanx(server, "users", "create", "bob", token=token))
    assert ok(phalanx(server, "users", "create", "root2", "--admin")).startswith("phx_")
    wait_for(lambda: "root2" in ok(phalanx(server, "users", "list")), "root2 to be listed")
    users = json.loads(ok(phalanx(server, "users", "list", "-o", "json")))
    assert {u["name"]: u["role"] for u in users} == {
        "admin": "admin",
        "alice": "user",
        "root2": "admin",
    }


def test_token_create_list_and_revoke(server: Server) -> None:
    alice = ok(phalanx(server, "users", "create", "alice")).strip()
    made = phalanx(server, "token", "create", "alice", "--label", "ci", "--expires", "30d")
    second = ok(made).strip()
    assert second.startswith("phx_") and "valid until" in made.stderr
    listed = json.loads(ok(phalanx(server, "token", "list", "-o", "json", token=alice)))
    assert [(t["user"], t["label"], t["current"]) for t in listed] == [
        ("alice", "created", True),
        ("alice", "ci", False),
    ]
    assert listed[1]["expires_at"] is not None and "phx_" not in json.dumps(listed)
    table = ok(phalanx(server, "token", "list", "alice"))
    assert "LABEL" in table and "ci" in table and "never" in table and "phx_" not in table

    assert ok(phalanx(server, "token", "revoke", str(listed[1]["id"]), token=alice)) == (
        f"token {listed[1]['id']} revoked\n"
    )
    assert "unknown or revoked token" in refused(phalanx(server, "get", "jobs", token=second))
    assert "no token with id 999" in refused(phalanx(server, "token", "revoke", "999"))
    assert "not a duration" in refused(
        phalanx(server, "token", "create", "alice", "--expires", "x")
    )
    assert "may not list the tokens of admin" in refused(
        phalanx(server, "token", "list", "admin", token=alice)
    )


def test_get_tasks_pages_through_a_jobs_tasks(server: Server) -> None:
    many = QUEUE_AND_JOB.replace("replicas: 2", "replicas: 3").replace("gpu: 1}", "gpu: 9}")
    ok(phalanx(server, "apply", "-f", "-", stdin=many))  # 9 GPUs each: never placed
    table = ok(phalanx(server, "get", "tasks", "hello"))
    assert [line.split()[:3] for line in table.splitlines()[1:]] == [
        [f"hello-worker-{i}", "worker", "Pending"] for i in range(3)
    ]
    tasks = json.loads(
        ok(phalanx(server, "get", "tasks", "hello", "--phase", "pending", "-o", "json"))
    )
    assert [t["index"] for t in tasks] == [0, 1, 2]
    assert (
        "no tasks in Running"
        in phalanx(server, "get", "tasks", "hello", "--phase", "running").stderr
    )
    assert "not a task phase" in refused(phalanx(server, "get", "tasks", "hello", "--phase", "x"))
    listed = json.loads(ok(phalanx(server, "get", "jobs", "-o", "json")))
    assert listed[0]["task_counts"] == {"Pending": 3} and "tasks" not in listed[0]
    assert "3 Pending" in ok(phalanx(server, "describe", "job", "hello"))


def test_environment_and_config_file_choose_the_server(server: Server, tmp_path: Path) -> None:
    runner = CliRunner()
    env = {**CLEAN, "PHALANX_SERVER": server.url, "PHALANX_TOKEN": server.admin_token}
    assert ok(runner.invoke(app, ["get", "nodes", "-o", "json"], env=env))
    config = tmp_path / "phalanx.yaml"
    config.write_text(f"server: {server.url}\ntoken: {server.admin_token}\n")
    env = {**CLEAN, "PHALANX_CONFIG": str(config)}
    assert json.loads(ok(runner.invoke(app, ["get", "queues", "-o", "json"], env=env))) == []


def test_an_unreachable_server_is_one_clear_line() -> None:
    result = CliRunner(env=CLEAN).invoke(
        app, ["--server", "http://127.0.0.1:9", "--token", "phx_x", "get", "jobs"]
    )
    error = refused(result)
    assert "cannot connect to the phalanx server at http://127.0.0.1:9" in error
    assert "phalanx up" in error and error.count("\n") == 1


def test_scale_resizes_an_elastic_job_and_describe_shows_the_size_history(server: Server) -> None:
    elastic = QUEUE_AND_JOB.replace("echo rank=$RANK; echo warn-$RANK >&2", "exec sleep 60")
    elastic = elastic.replace(
        "    replicas: 2\n",
        "    replicas: 2\n    elastic: {minReplicas: 1, maxReplicas: 3, rescaleInterval: 1h}\n",
    )
    ok(phalanx(server, "apply", "-f", "-", stdin=elastic))
    wait_for(lambda: "Running" in ok(phalanx(server, "get", "jobs", "hello")), "hello to run")
    scaled = ok(phalanx(server, "scale", "hello", "1"))
    # The owner's size is where the job goes now; the policy may still resize it.
    assert scaled == "job/hello scale to 1 requested; its policy may resize it later within 1..3\n"

    def history() -> str:
        described = ok(phalanx(server, "describe", "job", "hello"))
        return "Size history" in described and described

    described = wait_for(history, "the size history")
    assert "worker: 2 -> 1 replicas: scaled to 1 by its owner" in described
    assert "1 (1..3)" in described  # the role's size asked for, and its range
    assert "outside role worker's elastic range 1..3" in refused(
        phalanx(server, "scale", "hello", "7")
    )
    assert "no job named 'nope'" in refused(phalanx(server, "scale", "nope", "1"))
