"""Datasets on the nodes of a Ray cluster, for the server's warmer: ``NodeData``.

Each node's agent keeps the node's dataset cache (``agent``): it copies a dataset there
just before a task that reads it starts, and on request (``warm``). Guarantees of
``warm``: every node named is asked at once, each copying from the source itself; a
node whose agent cannot answer within ``WARM_TIMEOUT`` (it has none, it died) is
answered so, by name.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

from phalanx.data.copies import DatasetCopy
from phalanx.executors.ray.cluster import RayCluster

#: How long a warm waits for the nodes' copies.
WARM_TIMEOUT: Final = 3600.0


class NodeData:
    """See the module docstring."""

    def __init__(self, cluster: RayCluster) -> None:
        self._cluster = cluster

    def warm(self, nodes: Sequence[str], copy: DatasetCopy) -> dict[str, str]:
        """Copy ``copy`` into the caches of ``nodes``: why it could not be, by node."""
        answers = self._cluster.ask(nodes, "warm", [copy], timeout=WARM_TIMEOUT)
        problems: dict[str, str] = {}
        for node in nodes:
            if node not in answers:
                problems[node] = f"the agent of {node} did not answer (is the node alive?)"
            elif answers[node]:
                problems[node] = "; ".join(answers[node])
        return problems
