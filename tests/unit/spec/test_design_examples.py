"""The DESIGN.md section 6 documents load and convert to domain values in canonical units."""

from __future__ import annotations

import pytest

from phalanx.domain.job import Job
from phalanx.domain.node import Gpu
from phalanx.domain.queue import Queue
from phalanx.domain.resources import Resources
from phalanx.domain.topology import preset
from phalanx.spec import (
    ClusterDocument,
    JobDocument,
    QueueDocument,
    SchedulerConfigDocument,
    load_documents,
)
from tests.unit.spec.examples import DESIGN_EXAMPLES

GiB = 2**30


@pytest.fixture(scope="module")
def documents() -> list[object]:
    return list(load_documents(DESIGN_EXAMPLES, source="design.yaml"))


def test_every_kind_loads_in_stream_order(documents: list[object]) -> None:
    kinds = [type(d) for d in documents]
    assert kinds == [QueueDocument, JobDocument, ClusterDocument, SchedulerConfigDocument]


def test_queue_converts_with_canonical_units(documents: list[object]) -> None:
    queue = documents[0]
    assert isinstance(queue, QueueDocument)
    assert queue.to_domain() == Queue(
        name="nlp",
        parent="team-a",
        weight=2.0,
        guarantee=Resources.of({"gpu": 16}),
        deserved=Resources.of({"gpu": 32}),
        capability=Resources.of({"gpu": 64, "cpu": 512_000}),
        reclaimable=True,
        overcommit=False,
    )


def test_job_converts_with_canonical_units(documents: list[object]) -> None:
    document = documents[1]
    assert isinstance(document, JobDocument)
    job = document.to_domain(creation_time=12.5)
    assert isinstance(job, Job)
    assert (job.name, job.queue, job.priority, job.min_available) == (
        "bert-pretrain",
        "nlp",
        100,
        3,
    )
    assert (job.max_retry, job.walltime, job.creation_time) == (3, 8 * 3600.0, 12.5)
    master, worker = job.roles
    assert master.resources == Resources.of({"cpu": 8000, "memory": 32 * GiB, "gpu": 8})
    assert worker.resources == Resources.of(
        {"cpu": 8000, "memory": 32 * GiB, "gpu": 8, "rdma/hca": 1}
    )
    assert master.command == ("torchrun", "--nnodes", "3", "train.py")
    assert worker.command == ("/bin/sh", "-c", "torchrun --nnodes 3 train.py")
    assert (master.depends_on, worker.depends_on) == ((), ("master",))
    assert job.replicas == 3 and job.gang_size == 3


def test_cluster_expands_into_named_nodes(documents: list[object]) -> None:
    cluster = documents[2]
    assert isinstance(cluster, ClusterDocument)
    nodes = cluster.nodes()
    assert [n.name for n in nodes] == [f"dgx-{i}" for i in range(32)]
    first = nodes[0]
    assert first.capacity == Resources.of(
        {
            "cpu": 128_000,
            "memory": 2**40,
            "rdma/hca": 8,
            "gpu": 8,
            "gpu-memory": 8 * 80 * GiB,
        }
    )
    topology = preset("dgx-a100")
    assert first.gpu_topology == topology
    assert first.gpus == tuple(
        Gpu(
            index=i,
            model="A100-SXM4-80GB",
            memory=80 * GiB,
            numa=i // 4,
            nvlink_peers=tuple(j for j in range(8) if j != i),
            nic=f"mlx5_{i // 2 * 2}",
        )
        for i in range(8)
    )
    assert dict(first.labels) == {
        "phalanx.io/node-group": "dgx",
        "phalanx.io/gpu-model": "A100-SXM4-80GB",
        "phalanx.io/gpu-topology": "dgx-a100",
    }
    assert [n.network["tor"] for n in nodes] == ["tor-0"] * 16 + ["tor-1"] * 16


def test_scheduler_config_converts_to_engine_config(documents: list[object]) -> None:
    config_module = pytest.importorskip("phalanx.engine.framework.config")
    document = documents[3]
    assert isinstance(document, SchedulerConfigDocument)
    config = document.to_engine()
    assert isinstance(config, config_module.SchedulerConfig)
    assert [a.name for a in config.actions] == [
        "enqueue",
        "allocate",
        "reclaim",
        "preempt",
        "backfill",
    ]
    assert [[p.name for p in tier] for tier in config.tiers] == [
        ["priority", "gang"],
        ["drf", "predicates", "capacity", "binpack"],
    ]
    binpack = config.tiers[1][3]
    assert dict(binpack.args) == {"gpu": 5, "cpu": 1}
    assert binpack.disabled == frozenset()


def test_json_loads_like_yaml() -> None:
    text = (
        '{"apiVersion": "phalanx/v1", "kind": "Queue", "metadata": {"name": "a"},'
        ' "spec": {"weight": 3, "capability": {"cpu": "500m", "memory": "1Gi"}}}'
    )
    (queue,) = load_documents(text)
    assert isinstance(queue, QueueDocument)
    assert queue.to_domain().capability == Resources.of({"cpu": 500, "memory": GiB})


def test_empty_documents_are_skipped() -> None:
    text = "---\n" + DESIGN_EXAMPLES.split("---\n")[0] + "---\n---\n"
    assert [type(d) for d in load_documents(text)] == [QueueDocument]
    assert load_documents("") == []
