"""Queue and Cluster documents beyond the DESIGN.md examples."""

from __future__ import annotations

import textwrap

from phalanx.domain.node import Taint, TaintEffect
from phalanx.domain.queue import ROOT_QUEUE, Queue
from phalanx.domain.resources import Resources
from phalanx.spec import ClusterDocument, QueueDocument, load_documents


def test_queue_defaults() -> None:
    (document,) = load_documents("apiVersion: phalanx/v1\nkind: Queue\nmetadata: {name: q}\n")
    assert isinstance(document, QueueDocument)
    assert document.to_domain() == Queue(name="q", parent=ROOT_QUEUE)


def test_queue_every_field() -> None:
    text = """\
        apiVersion: phalanx/v1
        kind: Queue
        metadata: {name: q}
        spec:
          weight: 0.5
          guarantee: {cpu: 1500m}
          deserved: {memory: 1G}
          capability: {cpu: 2, memory: 2G}
          reclaimable: false
          overcommit: true
          priority: 7
          starvationThreshold: 30m
        """
    (document,) = load_documents(textwrap.dedent(text))
    assert isinstance(document, QueueDocument)
    queue = document.to_domain()
    assert queue.guarantee == Resources.of({"cpu": 1500})
    assert queue.deserved == Resources.of({"memory": 1e9})
    assert queue.capability == Resources.of({"cpu": 2000, "memory": 2e9})
    assert (queue.weight, queue.reclaimable, queue.overcommit) == (0.5, False, True)
    assert (queue.priority, queue.starvation_threshold) == (7, 1800.0)


def test_cluster_groups_taints_and_templates() -> None:
    text = """\
        apiVersion: phalanx/v1
        kind: Cluster
        metadata: {name: lab}
        spec:
          nodeGroups:
          - name: cpu
            count: 3
            resources: {cpu: 64, memory: 256Gi}
            labels: {pool: batch}
            taints: [{key: spot, value: "true", effect: PreferNoSchedule}, {key: x}]
            maxTasks: 110
            network: {tor: "tor-{(index + 1) % 2}", spine: "spine", rack: "r{{{index * 10}}}"}
          - name: gpu
            count: 1
            resources: {cpu: 8, gpu: 2}
        """
    (document,) = load_documents(textwrap.dedent(text))
    assert isinstance(document, ClusterDocument)
    nodes = document.nodes()
    assert [n.name for n in nodes] == ["cpu-0", "cpu-1", "cpu-2", "gpu-0"]
    cpu1 = nodes[1]
    assert dict(cpu1.network) == {"tor": "tor-0", "spine": "spine", "rack": "r{10}"}
    assert cpu1.taints == (
        Taint(key="spot", value="true", effect=TaintEffect.PREFER_NO_SCHEDULE),
        Taint(key="x"),
    )
    assert (cpu1.max_tasks, dict(cpu1.labels)) == (
        110,
        {"pool": "batch", "phalanx.io/node-group": "cpu"},
    )
    gpu0 = nodes[3]
    assert gpu0.capacity == Resources.of({"cpu": 8000, "gpu": 2}) and gpu0.gpus == ()


def test_node_addresses_render_from_a_template_like_the_network() -> None:
    text = """\
        apiVersion: phalanx/v1
        kind: Cluster
        metadata: {name: lab}
        spec:
          nodeGroups:
          - name: gpu
            count: 3
            resources: {cpu: 8}
            address: "10.0.{index // 2}.{index % 2 + 10}"
          - name: login
            count: 1
            resources: {cpu: 8}
            address: login.lab
          - name: cpu
            count: 1
            resources: {cpu: 8}
        """
    (document,) = load_documents(textwrap.dedent(text))
    assert isinstance(document, ClusterDocument)
    assert [(n.name, n.address) for n in document.nodes()] == [
        ("gpu-0", "10.0.0.10"),
        ("gpu-1", "10.0.0.11"),
        ("gpu-2", "10.0.1.10"),
        ("login-0", "login.lab"),
        ("cpu-0", None),  # none declared: the executor knows the node's address
    ]
