"""Secrets in jobs on a real server (issue 39): a role's secret given ``as: env`` is in
its tasks' environment, one ``as: files`` is at ``$PHALANX_SECRETS_DIR/NAME/KEY`` with
mode 0600; no view or event of the job shows a value; a secret the job's user does not
have (another user's included) refuses the job at submit naming the field, as does a
key its role's env sets too; a secret deleted after submit fails the task's start with
the reason."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from phalanx.control.server import Server
from tests.integration.control.serving import role, wait_for
from tests.integration.control.test_pipelines import admin

VALUE = "hunter2-do-not-show"


def secret(name: str, values: dict[str, str]) -> dict[str, Any]:
    return {
        "apiVersion": "phalanx/v1",
        "kind": "Secret",
        "metadata": {"name": name},
        "spec": {"stringData": values},
    }


def workdir(server: Server, job: str, task: str) -> Path:
    return Path(server.tasks_dir) / job / task


def test_a_job_gets_its_users_secrets_as_env_and_private_files(server: Server) -> None:
    api = admin(server)
    api.post(
        "/api/v1/secrets",
        secret("s3", {"AWS_ACCESS_KEY_ID": "AKIA1", "AWS_SECRET_ACCESS_KEY": VALUE}),
    )
    api.post("/api/v1/secrets", secret("cert", {"tls.pem": "-----PEM-----"}))
    script = (
        'echo "$AWS_SECRET_ACCESS_KEY" > env.out; '
        'cat "$PHALANX_SECRETS_DIR/cert/tls.pem" > file.out; '
        'stat -c %a "$PHALANX_SECRETS_DIR/cert/tls.pem" > mode.out'
    )
    worker = role(command=["sh", "-c", script])
    worker["secrets"] = [{"name": "s3"}, {"name": "cert", "as": "files"}]
    api.submit("reads", "wf", worker)
    assert api.wait_phase("reads", "Succeeded", "Failed")["phase"] == "Succeeded"
    where = workdir(server, "reads", "reads-worker-0")
    assert (where / "env.out").read_text() == f"{VALUE}\n"
    assert (where / "file.out").read_text() == "-----PEM-----"
    assert (where / "mode.out").read_text() == "600\n"
    for shown in (
        api.http.get("/api/v1/jobs/reads").text,
        api.http.get("/api/v1/jobs/reads/events").text,
        api.http.get("/api/v1/secrets").text,
    ):
        assert VALUE not in shown

    # refused at submit: another user's secret, and a key the role's env sets too
    bob = api.user("bob")
    refused = bob.http.post(
        "/api/v1/jobs",
        json={
            "apiVersion": "phalanx/v1",
            "kind": "Job",
            "metadata": {"name": "steal"},
            "spec": {"queue": "wf", "roles": [worker]},
        },
    )
    assert refused.status_code == 404, refused.text
    assert refused.json()["field"] == "spec.roles[0].secrets[0].name"
    clash = role(command="true")
    clash["env"] = {"AWS_ACCESS_KEY_ID": "mine"}
    clash["secrets"] = [{"name": "s3"}]
    answer = api.http.post(
        "/api/v1/jobs",
        json={
            "apiVersion": "phalanx/v1",
            "kind": "Job",
            "metadata": {"name": "clash"},
            "spec": {"queue": "wf", "roles": [clash]},
        },
    )
    assert answer.status_code == 422 and answer.json()["field"] == "spec.roles[0].secrets[0].as"
    assert "the role's env sets it too" in answer.json()["detail"]


def test_a_secret_deleted_before_the_start_fails_it_with_the_reason(server: Server) -> None:
    api = admin(server)
    api.post("/api/v1/secrets", secret("s3", {"KEY": VALUE}))
    # the whole cluster (2 nodes of 8 CPUs) taken, so the reader waits
    api.submit("hog", "wf", role(replicas=2, command="sleep 600", cpu=8))
    api.wait_phase("hog", "Running")
    reader = role(command="true")
    reader["secrets"] = [{"name": "s3"}]
    api.submit("late", "wf", reader, maxRetry=0)
    api.http.delete("/api/v1/secrets/s3").raise_for_status()
    api.post("/api/v1/jobs/hog/cancel", expect=200)
    assert api.wait_phase("late", "Failed", "Succeeded")["phase"] == "Failed"
    said = wait_for(
        lambda: [
            e["message"] for e in api.get("/api/v1/jobs/late/events") if "no secret" in e["message"]
        ],
        "the start's failure",
    )
    assert "user admin has no secret 's3'" in said[0] and VALUE not in said[0]


def test_a_deleted_users_secrets_go_with_them(server: Server) -> None:
    api = admin(server)
    carol = api.user("carol")
    carol.post("/api/v1/secrets", secret("s3", {"KEY": VALUE}))
    api.http.delete("/api/v1/users/carol").raise_for_status()
    again = api.user("carol")  # a new user of the same name
    assert again.get("/api/v1/secrets") == []
    assert all(s["user"] != "carol" for s in api.get("/api/v1/secrets"))
