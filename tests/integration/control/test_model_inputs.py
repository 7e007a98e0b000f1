"""Model versions read by jobs, through the real server and local executor (issue 38: a
predictor's model at ``PHALANX_MODEL_PATH``): a role's ``modelVersion`` is pinned at
submit to its version and digest; the version is copied out, verified, before the job
is scheduled; each task reads it read-only at ``PHALANX_MODEL_PATH``; a version a live
job reads cannot be deleted; a version whose stored bytes were changed fails the job
with the reason, and the server never hands a task what was not registered."""

from __future__ import annotations

from pathlib import Path

from phalanx.control.server import Server
from tests.integration.control.serving import Api, role
from tests.integration.control.test_models import events, train
from tests.integration.control.test_pipelines import admin

#: Prints the model's config, and the modes of a file and of the version's directory.
READ = 'cat "$PHALANX_MODEL_PATH/sub/c"; echo; stat -c %a "$PHALANX_MODEL_PATH/w.bin" "$PHALANX_MODEL_PATH"'


def reader(api: Api, name: str, reference: str, script: str = READ, expect: int = 201) -> object:
    """Submit job ``name`` reading ``reference``; its answer."""
    task = role("reader", command=["sh", "-c", script])
    task["modelVersion"] = reference
    return api.submit(name, "wf", task, expect=expect)


def trained(api: Api, job: str, content: str) -> None:
    """Train model mnist in job ``job`` (its config holding ``content``), registered."""
    assert train(api, job, "mnist", content)["phase"] == "Succeeded"
    events(api, job, "ModelRegistered")


def stdout(api: Api, job: str) -> str:
    return api.http.get(f"/api/v1/jobs/{job}/logs").text


def test_a_job_reads_its_pinned_version_read_only_at_phalanx_model_path(server: Server) -> None:
    api = admin(server)
    trained(api, "train-1", "one")
    trained(api, "train-2", "two")
    v1 = api.get("/api/v1/models/mnist/versions/1")

    reader(api, "read-newest", "mnist")
    reader(api, "read-v1", "mnist:v1")
    assert api.wait_phase("read-newest", "Succeeded", "Failed")["phase"] == "Succeeded"
    assert api.wait_phase("read-v1", "Succeeded", "Failed")["phase"] == "Succeeded"
    # read-only (a task of its own uid cannot change it: tenancy/test_models_per_user.py)
    assert stdout(api, "read-newest").split()[-3:] == ["two", "444", "555"]
    assert stdout(api, "read-v1").split()[-3:] == ["one", "444", "555"]
    # the stored job names the version it read, whatever it was asked for
    (task,) = api.job("read-v1")["document"]["spec"]["roles"]
    assert task["modelVersion"] == f"mnist:v1@{v1['digest']}"
    (task,) = api.job("read-newest")["document"]["spec"]["roles"]
    assert task["modelVersion"].startswith("mnist:v2@sha256:")
    (ready,) = events(api, "read-v1", "ModelReady")
    assert ready == f"mnist:v1 ({v1['digest']})"


def test_references_that_name_no_version_of_the_user_are_refused_at_submit(
    server: Server,
) -> None:
    api = admin(server)
    trained(api, "train", "one")
    v1 = api.get("/api/v1/models/mnist/versions/1")
    wrong = "sha256:" + "0" * 64
    for reference, status, said in (
        ("mnist:v7", 404, "has no version 7 of a model 'mnist'"),
        ("nothing", 404, "has no version of a model 'nothing'"),
        (f"mnist:v1@{wrong}", 409, f"mnist:v1 is {v1['digest']}, not {wrong}"),
        ("mnist:7", 422, "is not a model version"),
    ):
        answer = reader(api, f"bad-{status}", reference, expect=status)
        assert said in answer["detail"], answer
        assert answer["field"].startswith("spec.roles[0].modelVersion"), answer
        assert answer["fix"]
    # another user's model is not theirs to read, nor to learn of
    bob = api.user("bob")
    answer = reader(bob, "bobs", "mnist:v1", expect=404)
    assert answer["detail"] == "user bob has no version 1 of a model 'mnist'"


def test_a_version_a_live_job_reads_cannot_be_deleted(server: Server) -> None:
    api = admin(server)
    trained(api, "train", "one")
    reader(api, "serving", "mnist:v1", script="sleep 300")
    api.wait_phase("serving", "Running")
    for path in ("/api/v1/models/mnist", "/api/v1/models/mnist/versions/1"):
        answer = api.http.delete(path)
        assert answer.status_code == 409, answer.text
        assert "is read by job serving" in answer.json()["detail"]
    api.post("/api/v1/jobs/serving/cancel", expect=200)
    api.wait_phase("serving", "Cancelled")
    assert api.http.delete("/api/v1/models/mnist/versions/1").status_code == 200


def test_a_version_whose_stored_bytes_changed_fails_the_job_and_reaches_no_task(
    server: Server, tmp_path: Path
) -> None:
    api = admin(server)
    trained(api, "train", "one")
    blobs = [p for p in (tmp_path / "data" / "models" / "blobs").rglob("*") if p.is_file()]
    for blob in blobs:  # someone with the store's keys changed the weights
        blob.chmod(0o600)
        blob.write_bytes(b"planted")
    reader(api, "reader", "mnist:v1", script="echo ran")
    failed = api.wait_phase("reader", "Failed", "Succeeded")
    assert failed["phase"] == "Failed"
    assert "model version" in failed["message"]
    (why,) = events(api, "reader", "ModelNotReady")
    assert why.startswith("mnist:v1 (sha256:") and "the manifest says sha256:" in why
    assert "ran" not in stdout(api, "reader")
    cache = server.tasks_dir.with_name(f"{server.tasks_dir.name}-models")
    assert not any(cache.iterdir()), "nothing unverified is left where tasks would find it"
