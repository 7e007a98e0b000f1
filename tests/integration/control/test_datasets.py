"""Datasets through the real server, local executor and a real S3 endpoint (moto's
server; issue 39): a dataset on S3 read with its user's secret is listed (files, size,
digest); jobs naming it read it at $PHALANX_DATA_<NAME> from one copy in the host's
cache, read-only, pinned to the listing they started with; new data, once listed
again, is a new copy; another user can neither see the dataset nor mount it; a secret
key that is no credential fails the listing naming the key, never a value."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from phalanx.control.server import Server
from tests.integration.control.serving import Api, role, running_server, wait_for
from tests.integration.control.test_cli import ok, phalanx
from tests.integration.control.test_models import events
from tests.integration.control.test_pipelines import admin
from tests.integration.s3 import S3

BUCKET = "phalanx-datasets"
#: Reads every file of the dataset into its log, where it is, and a file's mode (these
#: tests' tasks run as the server's uid, root here, which modes do not stop: tasks under
#: their users' own uids cannot write, and a container gets the copy mounted read-only).
READ = (
    'cat "$PHALANX_DATA_MNIST_TRAIN/a.txt" "$PHALANX_DATA_MNIST_TRAIN/sub/b.txt"; '
    'echo; echo "$PHALANX_DATA_MNIST_TRAIN"; stat -c %a "$PHALANX_DATA_MNIST_TRAIN/a.txt"'
)


@pytest.fixture
def s3(s3_endpoint: S3, monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    """The endpoint's bucket with two files, reached by this process (the server's)."""
    s3fs = pytest.importorskip("s3fs")
    for name, value in s3_endpoint.env.items():
        if name not in {"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"}:
            monkeypatch.setenv(name, value)  # the endpoint is the operator's; no credentials
    s3fs.S3FileSystem.clear_instance_cache()
    fs = s3fs.S3FileSystem(key="phalanx-test", secret="phalanx-test")
    if not fs.exists(BUCKET):
        s3_endpoint.make_bucket(BUCKET)
    fs.pipe({f"{BUCKET}/mnist/a.txt": b"alpha", f"{BUCKET}/mnist/sub/b.txt": b"beta!"})
    yield fs
    s3fs.S3FileSystem.clear_instance_cache()


def dataset(name: str, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "phalanx/v1",
        "kind": "Dataset",
        "metadata": {"name": name},
        "spec": {"source": f"s3://{BUCKET}/mnist", **spec},
    }


def secret(api: Api, name: str, **values: str) -> None:
    api.post(
        "/api/v1/secrets",
        {"apiVersion": "phalanx/v1", "kind": "Secret", "metadata": {"name": name},
         "spec": {"stringData": values}},
    )  # fmt: skip


def listed(api: Api, name: str, *, after: str | None = None) -> Any:
    def done() -> Any:
        view = api.get(f"/api/v1/datasets/{name}")
        fresh = view["phase"] != "Listing" and (after is None or view["digest"] != after)
        return fresh and view

    return wait_for(done, f"dataset {name} listed")


def reader(api: Api, job: str, *refs: str) -> str:
    """Run ``job`` reading ``refs`` to success; its log."""
    role_ = role("reader", command=READ, cpu="100m", memory="64Mi")
    role_["datasets"] = list(refs)
    api.submit(job, "wf", role_)
    ended = api.wait_phase(job, "Succeeded", "Failed")
    assert ended["phase"] == "Succeeded", [
        e["message"] for e in api.get(f"/api/v1/jobs/{job}/events")
    ]
    answer = api.http.get(f"/api/v1/jobs/{job}/logs")
    assert answer.status_code == 200, answer.text
    return answer.text


def test_jobs_read_a_dataset_on_s3_from_one_cached_copy(
    server: Server, s3: Any, tmp_path: Path
) -> None:
    api = admin(server)
    secret(api, "s3", key="phalanx-test", secret="phalanx-test")
    api.post("/api/v1/datasets", dataset("mnist-train", secret="s3"))
    view = listed(api, "mnist-train")
    assert (view["phase"], view["files"], view["size"]) == ("Ready", 2, 10), view
    assert view["digest"].startswith("sha256:")

    first = reader(api, "read-1", "mnist-train")
    assert first.splitlines()[0] == "alphabeta!" and first.splitlines()[2] == "444"
    (ready,) = events(api, "read-1", "DatasetReady")
    assert ready == f"mnist-train ({view['digest']}, 2 files, 10 bytes)"
    pinned = api.job("read-1")["document"]["spec"]["roles"][0]["datasets"]
    assert pinned == [f"mnist-train@{view['digest']}"]
    second = reader(api, "read-2", "mnist-train")
    assert second.splitlines()[1] == first.splitlines()[1]  # the same copy
    cache = tmp_path / "data" / "tasks-data"
    assert len([p for p in cache.iterdir() if p.is_dir()]) == 1

    # new data, listed again: a new copy for the jobs that start after
    s3.pipe({f"{BUCKET}/mnist/a.txt": b"ALPHA"})
    api.post("/api/v1/datasets/mnist-train/refresh", expect=200)
    again = listed(api, "mnist-train", after=view["digest"])
    assert again["digest"] != view["digest"] and again["size"] == 10
    assert reader(api, "read-3", "mnist-train").splitlines()[0] == "ALPHAbeta!"


def test_another_user_neither_sees_nor_mounts_a_dataset(server: Server, s3: Any) -> None:
    api = admin(server)
    api.post("/api/v1/datasets", dataset("mnist-train"))
    bob = api.user("bob")
    assert bob.get("/api/v1/datasets") == []
    bob.get("/api/v1/datasets/mnist-train", expect=404)
    job = {
        "apiVersion": "phalanx/v1",
        "kind": "Job",
        "metadata": {"name": "steal"},
        "spec": {"queue": "wf", "roles": [{**role("r", cpu="100m"), "datasets": ["mnist-train"]}]},
    }
    refused = bob.post("/api/v1/jobs", job, expect=404)
    assert refused["field"] == "spec.roles[0].datasets[0]"
    assert "user bob has no dataset 'mnist-train'" in refused["detail"]

    # nor passes his own data off as hers: his dataset pinned to her listing's digest
    # (files of the same paths and sizes in his bucket) is refused at submit, and would
    # be at the copy (a digest names its source), never copied under her digest
    theirs = listed(api, "mnist-train")["digest"]
    s3.pipe({f"{BUCKET}/bob/a.txt": b"EVIL!", f"{BUCKET}/bob/sub/b.txt": b"EVIL!"})
    bob.post("/api/v1/datasets", dataset("mnist-train", source=f"s3://{BUCKET}/bob"))
    assert listed(bob, "mnist-train")["digest"] != theirs  # the same files elsewhere
    pinned = {**role("r", command="true", cpu="100m"), "datasets": [f"mnist-train@{theirs}"]}
    refused = bob.post("/api/v1/jobs", {**job, "spec": {"queue": "wf", "roles": [pinned]}}, 409)
    assert "which is not its current listing" in refused["detail"], refused


def test_a_secret_key_that_is_no_credential_fails_the_listing_naming_it(
    server: Server, s3: Any
) -> None:
    api = admin(server)
    secret(api, "odd", endpoint_url="http://169.254.169.254", key="k-value-hidden")
    api.post("/api/v1/datasets", dataset("odd", secret="odd"))
    view = listed(api, "odd")
    assert view["phase"] == "Failed" and "'endpoint_url'" in view["message"]
    assert "169.254" not in view["message"] and "k-value-hidden" not in view["message"]
    refused = api.post("/api/v1/datasets", dataset("lost", secret="nope"), expect=422)
    assert refused["field"] == "spec.secret"


def test_the_host_cache_evicts_what_no_job_reads_and_refuses_what_does_not_fit(
    s3: Any, tmp_path: Path
) -> None:
    """A cache of 15 bytes holds one 10-byte copy: a copy no live job reads makes room
    for the next (least recently used first); one a running job reads does not, and the
    job that wanted room fails saying so; a server started over a copy cut short by a
    crash removes it."""
    cache = tmp_path / "data" / "tasks-data"
    cache.mkdir(parents=True)
    (cache / ".partial-0123456789abcdef").mkdir()  # a copy a killed server left
    (cache / ".partial-0123456789abcdef" / "a.txt").write_bytes(b"alp")
    s3.pipe({f"{BUCKET}/other/c.txt": b"0123456789"})
    with running_server(tmp_path, data_cache_quota=15) as server:
        assert not (cache / ".partial-0123456789abcdef").exists()
        api = admin(server)
        secret(api, "s3", key="phalanx-test", secret="phalanx-test")
        api.post("/api/v1/datasets", dataset("mnist-train", secret="s3"))
        other_source = {"source": f"s3://{BUCKET}/other", "secret": "s3"}
        api.post("/api/v1/datasets", {**dataset("other"), "spec": other_source})
        first, other = listed(api, "mnist-train"), listed(api, "other")
        reader(api, "read-1", "mnist-train")
        copies = lambda: sorted(p.name for p in cache.iterdir() if p.is_dir())  # noqa: E731
        assert copies() == [first["digest"].removeprefix("sha256:")]
        # read-1 ended: its copy goes to make room for other's
        hold = role(
            "holder", command='ls "$PHALANX_DATA_OTHER"; sleep 600', cpu="100m", memory="64Mi"
        )
        hold["datasets"] = ["other"]
        api.submit("hold", "wf", hold)
        api.wait_phase("hold", "Running")
        assert copies() == [other["digest"].removeprefix("sha256:")]
        # other is read by a running job: no room for mnist-train again
        late = role("late", command="true", cpu="100m", memory="64Mi")
        late["datasets"] = ["mnist-train"]
        api.submit("late", "wf", late)
        assert api.wait_phase("late", "Failed", "Succeeded")["phase"] == "Failed"
        (why,) = events(api, "late", "DatasetNotReady")
        assert "needs 10 bytes and the cache holds 15" in why and "pinned" in why, why


def test_a_dataset_is_warmed_ahead_of_jobs_by_its_spec_and_on_request(
    server: Server, s3: Any, tmp_path: Path
) -> None:
    """``spec.warm`` copies each new listing into the nodes' cache before any job reads
    it, ``refreshEvery`` lists the source again by itself, and a warm asked of a node
    that does not exist says so; every read of the dataset shows each node's cache."""
    api = admin(server)
    secret(api, "s3", key="phalanx-test", secret="phalanx-test")
    api.post("/api/v1/datasets", dataset("mnist-train", secret="s3", warm={}, refreshEvery="1s"))
    view = listed(api, "mnist-train")
    cache = tmp_path / "data" / "tasks-data"

    def warm_on_every_node(digest: str) -> Any:
        found = api.get("/api/v1/datasets/mnist-train")
        states = {(n["node"], n["state"]) for n in found["nodes"]}
        held = found["digest"] == digest and states == {("node-0", "Warm"), ("node-1", "Warm")}
        return held and found

    wait_for(lambda: warm_on_every_node(view["digest"]), "the first listing warm")
    assert (
        cache / view["digest"].removeprefix("sha256:") / "sub" / "b.txt"
    ).read_bytes() == b"beta!"
    s3.pipe({f"{BUCKET}/mnist/a.txt": b"ALPHA"})  # listed again within a second or so
    again = listed(api, "mnist-train", after=view["digest"])
    wait_for(lambda: warm_on_every_node(again["digest"]), "the new listing warm")
    assert (cache / again["digest"].removeprefix("sha256:") / "a.txt").read_bytes() == b"ALPHA"

    api.post("/api/v1/datasets/mnist-train/warm", {"nodes": ["node-9"]}, expect=202)

    def refused() -> Any:
        nodes = {n["node"]: n for n in api.get("/api/v1/datasets/mnist-train")["nodes"]}
        return "node-9" in nodes and nodes["node-9"]

    state = wait_for(refused, "the unknown node answered")
    assert state["state"] == "Failed" and "there is no node node-9" in state["message"]


def test_the_cli_warms_a_dataset_and_describe_shows_each_nodes_cache(
    server: Server, s3: Any
) -> None:
    api = admin(server)
    secret(api, "s3", key="phalanx-test", secret="phalanx-test")
    api.post("/api/v1/datasets", dataset("mnist-train", secret="s3"))
    listed(api, "mnist-train")
    said = ok(phalanx(server, "dataset", "warm", "mnist-train", "--nodes", "node-1,node-7"))
    assert said == "dataset/mnist-train warm requested on node-1, node-7\n"

    def described() -> str | None:
        text = ok(phalanx(server, "describe", "dataset", "mnist-train"))
        done = "there is no node node-7" in text and "node-1  Warm" in text
        return text if done else None

    text = wait_for(described, "the warm in describe")
    rows = {
        line.split()[0]: line.split()[1] for line in text.splitlines() if line.startswith("node-")
    }
    # node-0 shares the host's one cache with node-1: it holds the copy too
    assert rows == {"node-0": "Warm", "node-1": "Warm", "node-7": "Failed"}, text
