"""Node label columns: one label's value on every node, as an array predicates compare
at once. Labels are fixed for a snapshot's life, so a column is read once and kept.
Every node carries ``NODE_NAME_LABEL`` with its name, as a Kubernetes node does its
hostname."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from numpy.typing import NDArray

from phalanx.domain.node import NODE_NAME_LABEL, Node


class LabelColumns:
    """The label columns of one snapshot's nodes, read on first use."""

    __slots__ = ("_columns", "_nodes")

    def __init__(self, nodes: Sequence[Node]) -> None:
        self._nodes = nodes
        self._columns: dict[str, NDArray[np.object_]] = {}

    def column(self, key: str) -> NDArray[np.object_]:
        """Every node's value of label ``key`` (None where absent; ``NODE_NAME_LABEL``:
        the node's name unless its labels set it)."""
        column = self._columns.get(key)
        if column is None:
            column = np.array(
                [
                    node.labels.get(key, node.name if key == NODE_NAME_LABEL else None)
                    for node in self._nodes
                ],
                dtype=object,
            )
            self._columns[key] = column
        return column
