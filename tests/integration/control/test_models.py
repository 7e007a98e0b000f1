"""Model versions through the real server, local executor and CLI (issue 38, models):
a job role or a pipeline step that declares ``model: {name, path}`` registers the
directory its task wrote as the model's next version when it succeeds, with its
lineage; what a tenant planted there instead of plain files is refused with the reason,
and the job stays Succeeded; a model is its first user's (another's job naming it is refused); deleting a version removes its
files from the store, and its number is never given again; a version asked for as an
image is built into one (FROM scratch, its files under /model)."""

from __future__ import annotations

import io
import os
import subprocess
import tarfile
import uuid
from pathlib import Path
from typing import Any

from phalanx.control.server import Server
from tests.integration.control.serving import Api, role, wait_for
from tests.integration.control.test_cli import ok, phalanx, refused
from tests.integration.control.test_pipelines import admin, ended, pipeline, run
from tests.integration.images import require_podman

#: Writes a model of two files, the second holding the job's first argument.
TRAIN = "mkdir -p model/sub && printf 'weights' > model/w.bin && printf '%s' \"$0\" > model/sub/c"


def train(api: Api, name: str, model: str, content: str, *, script: str = TRAIN) -> Any:
    """Submit job ``name`` training ``model`` (its config holding ``content``); its view
    once Succeeded."""
    trainer = role("trainer", command=["sh", "-c", script, content])
    trainer["model"] = {"name": model, "path": "model"}
    api.submit(name, "wf", trainer)
    return api.wait_phase(name, "Succeeded", "Failed")


def events(api: Api, job: str, kind: str) -> list[str]:
    """The messages of ``job``'s events of ``kind``, once there is one."""
    return wait_for(  # type: ignore[no-any-return]
        lambda: [e["message"] for e in api.get(f"/api/v1/jobs/{job}/events") if e["kind"] == kind],
        f"a {kind} event of {job}",
    )


def test_succeeded_jobs_register_versions_with_lineage_and_the_cli_shows_them(
    server: Server, tmp_path: Path
) -> None:
    api = admin(server)
    assert train(api, "train-1", "mnist", "one")["phase"] == "Succeeded"
    (registered,) = events(api, "train-1", "ModelRegistered")
    assert registered.startswith("mnist:v1 (sha256:") and "2 files, 10 bytes" in registered
    assert train(api, "train-2", "mnist", "two!")["phase"] == "Succeeded"
    events(api, "train-2", "ModelRegistered")

    (listed,) = api.get("/api/v1/models")
    assert (listed["name"], listed["versions"], listed["latest"]["version"]) == ("mnist", 2, 2)
    v1 = api.get("/api/v1/models/mnist/versions/1")
    assert v1["job"] == "train-1" and v1["role"] == "trainer" and v1["user"] == "admin"
    assert v1["lineage"]["command"][:2] == ["sh", "-c"]
    assert [(f["path"], f["size"]) for f in v1["contents"]] == [("sub/c", 3), ("w.bin", 7)]
    v2 = api.get("/api/v1/models/mnist/versions/2")
    assert v2["digest"] != v1["digest"]  # one file changed: a new content digest
    # the same weights are one blob in the store: 2 + 1 files, not 4
    blobs = [p for p in (tmp_path / "data" / "models" / "blobs").rglob("*") if p.is_file()]
    assert len(blobs) == 3

    table = ok(phalanx(server, "get", "models"))
    assert table.splitlines()[1].split()[:3] == ["mnist", "v2", "2"]
    versions = ok(phalanx(server, "get", "models", "mnist"))
    assert [line.split()[0] for line in versions.splitlines()[1:]] == ["mnist:v2", "mnist:v1"]
    described = ok(phalanx(server, "describe", "model", "mnist:v1"))
    assert "job train-1" in described, described
    assert "sub/c" in described and v1["digest"][:24] in described
    assert "mnist:v2" in ok(phalanx(server, "describe", "model", "mnist"))
    assert "model mnist has no version v9" in refused(
        phalanx(server, "describe", "model", "mnist:v9")
    )
    assert "model reference" in refused(phalanx(server, "describe", "model", "mnist:2"))

    # deleting v1: its one file of its own leaves the store; the next version is v3
    assert ok(phalanx(server, "delete", "model", "mnist:v1")).strip() == "model/mnist:v1 deleted"
    wait_for(
        lambda: (
            len([p for p in (tmp_path / "data" / "models" / "blobs").rglob("*") if p.is_file()])
            == 2
        ),
        "v1's own blob collected",
    )
    assert train(api, "train-3", "mnist", "three")["phase"] == "Succeeded"
    assert events(api, "train-3", "ModelRegistered")[0].startswith("mnist:v3 ")
    versions = ok(phalanx(server, "get", "models", "mnist"))
    assert [line.split()[0] for line in versions.splitlines()[1:]] == ["mnist:v3", "mnist:v2"]


def test_what_a_tenant_plants_instead_of_a_model_is_refused_and_the_job_stays_succeeded(
    server: Server,
) -> None:
    api = admin(server)
    database = server.settings.data_dir / "phalanx.db"
    planted = {
        "a-link": f"ln -s {database} model",
        "a-fifo": "mkdir model && mkfifo model/weights",
        "a-link-inside": f"mkdir model && ln -s {database} model/weights",
        "nothing": "true",
        "empty": "mkdir model",
    }
    for job, script in planted.items():
        assert train(api, job, f"m-{job}", "", script=script)["phase"] == "Succeeded"
    for job, why in {
        "a-link": "symbolic link",
        "a-fifo": "FIFO",
        "a-link-inside": "symbolic link",
        "nothing": "",
        "empty": "",
    }.items():
        (message,) = events(api, job, "ModelNotRegistered")
        assert message.startswith(f"model m-{job} of role trainer: ") and why in message
        assert "fix" in message
    assert api.get("/api/v1/models") == []


def test_a_model_is_its_first_users_and_others_do_not_see_it(server: Server) -> None:
    api = admin(server)
    bob = api.user("bob")
    assert train(api, "train-1", "mnist", "one")["phase"] == "Succeeded"
    events(api, "train-1", "ModelRegistered")
    assert bob.get("/api/v1/models") == []
    bob.get("/api/v1/models/mnist", expect=404)
    bob.http.delete("/api/v1/models/mnist")
    assert api.get("/api/v1/models")[0]["versions"] == 1
    trainer = role("trainer", command="true")
    trainer["model"] = {"name": "mnist", "path": "model"}
    refusal = bob.submit("bobs", "wf", trainer, expect=403)
    assert refusal["detail"] == "model 'mnist' belongs to user admin"
    assert refusal["field"] == "spec.roles[0].model.name"


STEP = """\
apiVersion: phalanx/v1
kind: Pipeline
metadata: {name: trains}
spec:
  params: {lr: 0.5}
  defaults: {queue: wf, resources: {cpu: 1, memory: 256Mi}}
  steps:
    fit:
      command: ["sh", "-c", "mkdir model && echo {{params.lr}} > model/lr"]
      model: {name: tiny, path: model}
"""


def test_a_pipeline_step_registers_its_model_with_its_run_and_params(server: Server) -> None:
    api = admin(server)
    api.post("/api/v1/pipelines", pipeline(STEP))
    run_id = run(api, "trains", lr=0.25)
    assert ended(api, run_id)["phase"] == "Succeeded"
    version = wait_for(
        lambda: api.get("/api/v1/models") and api.get("/api/v1/models/tiny/versions/1"),
        "tiny:v1",
    )
    assert (version["run_id"], version["step"]) == (run_id, "fit")
    assert version["lineage"]["pipeline"] == "trains"
    assert version["lineage"]["params"] == {"lr": 0.25}
    assert os.path.basename(version["contents"][0]["path"]) == "lr"


def test_a_version_is_built_into_an_image_from_scratch_with_its_files(server: Server) -> None:
    runtime = require_podman()
    api = admin(server)
    name = f"baked-{uuid.uuid4().hex[:8]}"  # images and containers are the host's, shared
    trainer = role("trainer", command=["sh", "-c", TRAIN, "baked"])
    trainer["model"] = {"name": name, "path": "model", "image": True}
    api.submit("bake", "wf", trainer)
    api.wait_phase("bake", "Succeeded")
    version = wait_for(
        lambda: (
            api.get("/api/v1/models")
            and (v := api.get(f"/api/v1/models/{name}/versions/1"))["image_phase"] != "Building"
            and v
        ),
        f"{name}:v1's image built",
        timeout=120,
    )
    tag = f"localhost/{name}:v1"
    assert (version["image_phase"], version["image"]) == ("Built", tag), version
    assert tag in ok(phalanx(server, "describe", "model", f"{name}:v1"))
    client = runtime.client
    try:
        subprocess.run([client, "create", "--name", name, tag, "/none"], check=True)
        exported = subprocess.run([client, "export", name], capture_output=True, check=True)
    finally:
        subprocess.run([client, "rm", "-f", name], capture_output=True, check=False)
        subprocess.run([client, "rmi", "-f", tag], capture_output=True, check=False)
    with tarfile.open(fileobj=io.BytesIO(exported.stdout)) as tar:
        files = {m.name.lstrip("./"): m for m in tar.getmembers() if m.isfile()}
        assert sorted(files) == ["model/sub/c", "model/w.bin"]
        extracted = tar.extractfile(files["model/sub/c"])
        assert extracted is not None and extracted.read() == b"baked"
