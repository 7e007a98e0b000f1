"""A user's default queue: where their jobs that name no queue go (Slurm's DefaultAccount,
a Kueue namespace's default LocalQueue).

Kubeflow's own PyTorchJob example, which names no queue, is accepted for a user whose
default queue is set, and waits there; a plain Job and a Volcano Job without a queue go
there too, and one that names a queue goes where it says. A user without one keeps the
queue named ``default``; where that does not exist either, the refusal says so and names
both fixes. An admin sets a default queue only to an existing leaf queue the user may
submit to.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from phalanx.control.auth import Principal, UserRole
from phalanx.control.errors import ApiError
from phalanx.control.server import Server
from phalanx.control.store.database import Database, sqlite_url
from phalanx.control.store.models import QueueRow, UserRow
from phalanx.control.submit import resolve_queues
from phalanx.spec.job import JobDocument
from tests.integration.control import serving
from tests.integration.control.serving import Api, role, wait_for
from tests.integration.control.test_cli import ok, phalanx, refused

#: Kubeflow training-operator's examples/pytorch/simple.yaml, as Kubeflow ships it: no
#: runPolicy, so no schedulingPolicy.queue.
PYTORCH_SIMPLE = """\
apiVersion: "kubeflow.org/v1"
kind: PyTorchJob
metadata:
  name: pytorch-simple
  namespace: kubeflow
spec:
  pytorchReplicaSpecs:
    Master:
      replicas: 1
      restartPolicy: OnFailure
      template:
        spec:
          containers:
            - name: pytorch
              image: docker.io/kubeflowkatib/pytorch-mnist:v1beta1-45c5727
              imagePullPolicy: Always
              command:
                - "python3"
                - "/opt/pytorch-mnist/mnist.py"
                - "--epochs=1"
    Worker:
      replicas: 1
      restartPolicy: OnFailure
      template:
        spec:
          containers:
            - name: pytorch
              image: docker.io/kubeflowkatib/pytorch-mnist:v1beta1-45c5727
              imagePullPolicy: Always
              command:
                - "python3"
                - "/opt/pytorch-mnist/mnist.py"
                - "--epochs=1"
"""


def job(name: str, queue: str | None = None, **spec: Any) -> dict[str, Any]:
    """A phalanx Job of one quick role, naming ``queue`` (None: no queue)."""
    named = {} if queue is None else {"queue": queue}
    return {
        "apiVersion": "phalanx/v1",
        "kind": "Job",
        "metadata": {"name": name},
        "spec": {**named, "roles": [role()], **spec},
    }


def volcano_job(name: str) -> dict[str, Any]:
    """A Volcano Job without spec.queue (Volcano's own default is its queue ``default``)."""
    container = {
        "name": "main",
        "image": "busybox",
        "command": ["true"],
        "resources": {"requests": {"cpu": "1", "memory": "1Gi"}},
    }
    task = {"name": "main", "replicas": 1, "template": {"spec": {"containers": [container]}}}
    return {
        "apiVersion": "batch.volcano.sh/v1alpha1",
        "kind": "Job",
        "metadata": {"name": name},
        "spec": {"tasks": [task]},
    }


def refusal(api: Api, document: dict[str, Any], status: int = 422) -> dict[str, Any]:
    answer = api.http.post("/api/v1/jobs", json=document)
    assert answer.status_code == status, answer.text
    body: dict[str, Any] = answer.json()
    return body


def test_kubeflows_own_pytorchjob_goes_to_the_users_default_queue(
    server: Server, tmp_path: Path
) -> None:
    admin = Api(server.url, server.admin_token or "")
    admin.queue("ml")
    for node in admin.get("/api/v1/nodes"):  # it waits in its queue: nothing is started
        admin.post(f"/api/v1/nodes/{node['name']}/cordon", expect=200)
    made = phalanx(server, "users", "create", "alice", "--default-queue", "ml")
    token = ok(made).strip()
    assert "default queue ml" in made.stderr
    wait_for(lambda: phalanx(server, "users", "me", token=token).exit_code == 0, "the token")
    me = ok(phalanx(server, "users", "me", token=token))
    assert "default queue: ml" in me
    path = tmp_path / "simple.yaml"
    path.write_text(PYTORCH_SIMPLE)
    applied = phalanx(server, "apply", "-f", str(path), token=token)
    assert ok(applied).splitlines() == ["job/pytorch-simple created"]
    alice = Api(server.url, token)
    held = alice.job("pytorch-simple")
    assert (held["queue"], held["user"]) == ("ml", "alice")
    assert held["phase"] in ("Pending", "Queued")  # waiting in ml (the nodes take no task)
    assert held["document"]["spec"]["queue"] == "ml"  # stored where it went
    assert [j["name"] for j in alice.get("/api/v1/jobs", queue="ml")["items"]] == ["pytorch-simple"]
    # the same file again: the queue the server filled in is no difference
    again = phalanx(server, "apply", "-f", str(path), token=token)
    assert ok(again).splitlines() == ["job/pytorch-simple unchanged"]


def test_a_job_naming_no_queue_runs_in_its_users_default_queue(server: Server) -> None:
    admin = Api(server.url, server.admin_token or "")
    admin.queue("ml")
    admin.queue("other")
    bob = admin.user("bob")
    changed = admin.http.patch("/api/v1/users/bob", json={"default_queue": "ml"})
    assert changed.status_code == 200, changed.text
    assert changed.json()["default_queue"] == "ml"
    assert bob.get("/api/v1/users/me")["default_queue"] == "ml"
    assert bob.post("/api/v1/jobs", job("plain"))["queue"] == "ml"
    assert bob.post("/api/v1/jobs", volcano_job("vc"))["queue"] == "ml"
    assert bob.post("/api/v1/jobs", job("named", "other"))["queue"] == "other"
    # an admin submitting for bob: bob's default queue, not the admin's (who has none)
    for_bob = admin.post("/api/v1/jobs", job("for-bob", user="bob"))
    assert (for_bob["queue"], for_bob["user"]) == ("ml", "bob")
    done = bob.wait_phase("plain", "Succeeded", "Failed")
    assert (done["phase"], done["queue"]) == ("Succeeded", "ml")
    # cleared: his jobs that name no queue go to the queue named default, which is absent
    cleared = admin.http.patch("/api/v1/users/bob", json={"default_queue": None})
    assert cleared.status_code == 200 and cleared.json()["default_queue"] is None
    assert refusal(bob, job("nowhere"))["detail"].startswith("the job names no queue")


def test_a_user_without_a_default_queue_is_told_how_to_get_one(server: Server) -> None:
    admin = Api(server.url, server.admin_token or "")
    carol = admin.user("carol")
    body = refusal(carol, job("lost"))
    assert body["field"] == "spec.queue"
    assert body["detail"] == (
        "the job names no queue, you have no default queue, and no queue 'default' exists"
    )
    assert "spec.queue; runPolicy.schedulingPolicy.queue in a Kubeflow job" in body["fix"]
    assert body["fix"].endswith(
        "or ask an admin to set your default queue (phalanx users set carol --default-queue QUEUE)"
    )
    # an admin sending a job for carol is told how to set hers
    for_carol = refusal(admin, job("lost", user="carol"))
    assert "carol has no default queue" in for_carol["detail"]
    assert "or set carol's default queue (phalanx users set carol" in for_carol["fix"]
    # with a queue named default, today's behaviour: it goes there
    admin.queue("default")
    assert carol.post("/api/v1/jobs", job("found"))["queue"] == "default"


def test_a_default_queue_that_went_away_is_named_in_the_refusal(server: Server) -> None:
    admin = Api(server.url, server.admin_token or "")
    admin.queue("ml")
    dave = admin.user("dave")
    assert admin.http.patch("/api/v1/users/dave", json={"default_queue": "ml"}).is_success
    assert admin.http.delete("/api/v1/queues/ml").status_code == 204
    body = refusal(dave, job("orphan"))
    assert body["detail"] == "the job names no queue, and your default queue 'ml' does not exist"
    # it gained a child: jobs go to leaf queues
    admin.queue("ml")
    admin.queue("ml-small", parent="ml")
    body = refusal(dave, job("orphan"))
    assert body["detail"] == (
        "queue 'ml' (your default queue) has child queues; jobs go to leaf queues"
    )
    assert "or ask an admin to set your default queue" in body["fix"]


def test_only_an_existing_leaf_queue_the_user_may_use_is_a_default(server: Server) -> None:
    admin = Api(server.url, server.admin_token or "")
    admin.queue("team")
    admin.queue("team-a", parent="team", submitters=["erin"])
    erin = admin.user("erin")
    cases = {
        "nowhere": "default queue 'nowhere' does not exist",
        "team": "default queue 'team' has child queues, and jobs go to leaf queues",
    }
    for queue, detail in cases.items():
        answer = admin.http.patch("/api/v1/users/erin", json={"default_queue": queue})
        assert answer.status_code == 422, answer.text
        body = answer.json()
        assert (body["detail"], body["field"]) == (detail, "default_queue") and body["fix"]
    made = admin.http.post("/api/v1/users", json={"name": "frank", "default_queue": "team-a"})
    assert made.status_code == 422, made.text
    assert made.json()["detail"] == "default queue 'team-a' does not list frank in its submitters"
    assert admin.get("/api/v1/users/me")["default_queue"] is None
    assert "frank" not in [u["name"] for u in admin.get("/api/v1/users")]
    # only admins set one; an unknown user is 404
    assert (
        erin.http.patch("/api/v1/users/erin", json={"default_queue": "team-a"}).status_code == 403
    )
    assert admin.http.patch("/api/v1/users/nobody", json={}).status_code == 404
    set_it = phalanx(server, "users", "set", "erin", "--default-queue", "team-a")
    assert ok(set_it).strip() == "user erin: default queue team-a"
    listed = json.loads(ok(phalanx(server, "users", "list", "-o", "json")))
    assert {u["name"]: u["default_queue"] for u in listed} == {"admin": None, "erin": "team-a"}
    assert "team-a" in ok(phalanx(server, "users", "list"))
    assert erin.get("/api/v1/users/me")["default_queue"] == "team-a"
    assert "give --default-queue QUEUE or --no-default-queue" in refused(
        phalanx(server, "users", "set", "erin")
    )
    cleared = ok(phalanx(server, "users", "set", "erin", "--no-default-queue"))
    assert cleared.strip() == "user erin: no default queue (jobs naming none go to default)"


@pytest.fixture
def db(tmp_path: Path) -> Iterator[Database]:
    """A store with queues ``ml`` and ``cv`` and users alice (default ``ml``), bob
    (default ``cv``) and carol (none)."""
    database = Database.open(serving.database_url(tmp_path) or sqlite_url(tmp_path))
    with database.session() as session:
        for name in ("ml", "cv"):
            document = {"kind": "Queue", "metadata": {"name": name}, "spec": {"parent": "root"}}
            session.add(
                QueueRow(name=name, parent="root", document=document, created_at=0, updated_at=0)
            )
        for user, default in (("alice", "ml"), ("bob", "cv"), ("carol", None)):
            session.add(UserRow(name=user, role="user", created_at=0, default_queue=default))
    yield database
    database.close()


def test_one_batch_finds_each_jobs_users_default_queue(db: Database) -> None:
    def document(name: str, user: str, queue: str | None = None) -> JobDocument:
        return JobDocument.model_validate(job(name, queue, user=user))

    def caller(name: str, role: UserRole = UserRole.USER) -> Principal:
        return Principal(name=name, role=role)

    admin = caller("admin", UserRole.ADMIN)
    batch = [
        (document("a", "alice"), caller("alice")),
        (document("b", "bob"), caller("bob")),
        (document("named", "alice", "cv"), caller("alice")),
        (document("for-bob", "bob"), admin),
        (document("c", "carol"), caller("carol")),
    ]
    with db.session() as session:
        resolved = resolve_queues(session, batch)
    queues = [r.spec.queue if isinstance(r, JobDocument) else r.status_code for r in resolved]
    assert queues == ["ml", "cv", "cv", "cv", 422]
    carols = resolved[-1]
    assert isinstance(carols, ApiError)
    assert carols.detail["detail"] == (  # type: ignore[index]
        "the job names no queue, you have no default queue, and no queue 'default' exists"
    )
