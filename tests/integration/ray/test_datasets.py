"""Datasets on a real Ray cluster (issue 39): each node's agent copies a dataset into
its own cache from a real S3 endpoint (moto's server) just before a task there reads
it; later jobs go where it is cached (the engine's locality), share that copy, and a
job that requires its data cached waits, saying why, until a warm puts it on a node.

The endpoint is the operator's setting on every node (``AWS_ENDPOINT_URL`` in each
node's environment as Ray starts, and the server's), never a dataset's: this module
starts its own cluster with it."""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import pytest

from phalanx.benchmarks.raycluster import LoopbackCluster, loopback_cluster
from tests.integration.control.serving import Api, role, wait_for
from tests.integration.control.test_datasets import dataset, secret
from tests.integration.ray.served import Served, log_of, tasks_of
from tests.integration.s3 import S3

BUCKET = "phalanx-ray-datasets"
#: Reads the dataset's two files into the log, then where its copy is.
READ = 'cat "$PHALANX_DATA_MNIST/a.txt" "$PHALANX_DATA_MNIST/sub/b.txt"; echo; echo "$PHALANX_DATA_MNIST"'


@pytest.fixture(scope="module")
def operator_env(s3_endpoint: S3) -> dict[str, str]:
    """The endpoint and region, as an operator sets them on the server and every node;
    no credentials (a dataset brings its own)."""
    return {k: v for k, v in s3_endpoint.env.items() if not k.startswith("AWS_SECRET")}


@pytest.fixture(scope="module")
def ray_cluster(
    tmp_path_factory: pytest.TempPathFactory, operator_env: dict[str, str]
) -> Iterator[LoopbackCluster]:
    """This module's own cluster, whose nodes start with the endpoint in their env."""
    endpoint = {k: v for k, v in operator_env.items() if k != "AWS_ACCESS_KEY_ID"}
    before = {name: os.environ.get(name) for name in endpoint}
    os.environ.update(endpoint)
    try:
        with loopback_cluster(tmp_path_factory.mktemp("ray")) as cluster:
            yield cluster
    finally:
        for name, value in before.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


@pytest.fixture(scope="module")
def bucket(s3_endpoint: S3) -> Any:
    s3fs = pytest.importorskip("s3fs")
    s3_endpoint.make_bucket(BUCKET)
    fs = s3fs.S3FileSystem(
        key="phalanx-test", secret="phalanx-test", client_kwargs={"endpoint_url": s3_endpoint.url}
    )
    fs.pipe(
        {
            f"{BUCKET}/mnist/a.txt": b"alpha",
            f"{BUCKET}/mnist/sub/b.txt": b"beta!",
            f"{BUCKET}/other/a.txt": b"other",
            f"{BUCKET}/other/sub/b.txt": b"data!",
        }
    )
    return fs


@pytest.fixture(scope="module")
def served(
    ray_cluster: LoopbackCluster,
    tmp_path_factory: pytest.TempPathFactory,
    operator_env: dict[str, str],
    bucket: Any,
) -> Iterator[Served]:
    endpoint = {k: v for k, v in operator_env.items() if k != "AWS_ACCESS_KEY_ID"}
    server = Served(tmp_path_factory.mktemp("server"), ray_cluster.address, env=endpoint)
    server.start().queue("team")
    yield server
    server.stop()


@pytest.fixture
def api(served: Served) -> Api:
    return Api(served.url, (served.data / "admin.token").read_text().strip())


def listed(api: Api, name: str) -> Any:
    return wait_for(
        lambda: (view := api.get(f"/api/v1/datasets/{name}"))["phase"] == "Ready" and view,
        f"dataset {name} listed",
    )


def reader(api: Api, job: str, *, required: bool = False, dataset_name: str = "mnist") -> None:
    spec = role(
        "reader", command=READ.replace("MNIST", dataset_name.upper()), cpu="100m", memory="64Mi"
    )
    spec["datasets"] = [dataset_name]
    if required:
        spec["dataLocality"] = "required"
    api.submit(job, "team", spec)


def cached_on(api: Api, name: str) -> set[str]:
    return {n["node"] for n in api.get(f"/api/v1/datasets/{name}")["nodes"] if n["state"] == "Warm"}


def test_a_node_copies_a_dataset_once_and_later_jobs_go_there_and_share_it(
    api: Api, served: Served
) -> None:
    secret(api, "s3", key="phalanx-test", secret="phalanx-test")
    api.post("/api/v1/datasets", dataset("mnist", secret="s3", source=f"s3://{BUCKET}/mnist"))
    view = listed(api, "mnist")
    reader(api, "read-1")
    ended = api.wait_phase("read-1", "Succeeded", "Failed", timeout=120)
    assert ended["phase"] == "Succeeded", [
        e["message"] for e in api.get("/api/v1/jobs/read-1/events")
    ]
    (task,) = tasks_of(api, "read-1").values()
    node = task["node"]
    lines = log_of(api, "read-1", "read-1-reader-0").splitlines()
    copy = served.data / "tasks-ray" / node / "datasets" / view["digest"].removeprefix("sha256:")
    assert lines[0] == "alphabeta!" and lines[1] == str(copy)
    # the node's agent says its cache holds it; the engine places the next reader there
    wait_for(lambda: cached_on(api, "mnist") == {node}, "the node's cache reported")
    reader(api, "read-2")
    assert api.wait_phase("read-2", "Succeeded", "Failed", timeout=120)["phase"] == "Succeeded"
    assert {t["node"] for t in tasks_of(api, "read-2").values()} == {node}
    assert log_of(api, "read-2", "read-2-reader-0").splitlines()[1] == str(copy)  # shared
    on_disk = [p for p in (served.data / "tasks-ray").glob("*/datasets/*") if p.is_dir()]
    assert on_disk == [copy]  # one copy in the whole cluster


def test_a_job_that_requires_its_data_cached_waits_for_a_warm_node(
    api: Api, served: Served
) -> None:
    api.post("/api/v1/datasets", dataset("other", secret="s3", source=f"s3://{BUCKET}/other"))
    view = listed(api, "other")
    reader(api, "needs-other", required=True, dataset_name="other")

    def waiting() -> Any:
        why = api.get("/api/v1/jobs/needs-other/why")
        return "other" in why["message"] and why

    why = wait_for(waiting, "the reason it waits")
    assert api.job("needs-other")["phase"] in ("Pending", "Queued"), why
    assert "phalanx dataset warm" in why["message"], why
    target = "ray-127-0-0-3"
    api.post("/api/v1/datasets/other/warm", {"nodes": [target]}, expect=202)
    ended = api.wait_phase("needs-other", "Succeeded", "Failed", timeout=120)
    assert ended["phase"] == "Succeeded", why
    assert {t["node"] for t in tasks_of(api, "needs-other").values()} == {target}
    assert cached_on(api, "other") == {target}
    copy = served.data / "tasks-ray" / target / "datasets" / view["digest"].removeprefix("sha256:")
    assert log_of(api, "needs-other", "needs-other-reader-0").splitlines() == [
        "otherdata!",
        str(copy),
    ]
