"""Task requests interned by value: every role asking for the same resources (in engine
units) shares one read-only row, one index and one card shape.

Placement and eviction work on row indexes (``RoleInfo.row``) and the stacked
``table``; kept node scores are keyed by them. Rows are only ever added: an index stays
valid, and means the same request, for the life of its snapshot.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from numpy.typing import NDArray

from phalanx.domain.resources import GPU, GPU_MEMORY, Resources
from phalanx.engine.cards import CardDemand, card_demand
from phalanx.engine.snapshot.units import Vector


class Requests:
    """The distinct request rows of one snapshot, in first-seen order."""

    __slots__ = (
        "_by_resources",
        "_by_value",
        "_demands",
        "_gpu",
        "_memory",
        "_table",
        "_vector",
        "_width",
        "rows",
    )

    def __init__(self, vector: Callable[[Resources], Vector], dim: dict[str, int]) -> None:
        self._vector = vector
        self._gpu, self._memory = dim.get(GPU), dim.get(GPU_MEMORY)
        self._width = len(dim)
        self.rows: list[Vector] = []  # read-only rows, by index
        self._by_value: dict[bytes, int] = {}  # a row's bytes -> its index
        self._by_resources: dict[Resources, int] = {}  # a request seen before -> its index
        self._demands: dict[tuple[int, bool], CardDemand | None] = {}
        self._table: NDArray[np.float64] | None = None

    def intern(self, resources: Resources) -> int:
        """The index of the row for ``resources``; equal rows (however the request was
        spelt) share one index."""
        index = self._by_resources.get(resources)
        if index is None:
            row = self._vector(resources) + 0.0  # -0.0 and 0.0 are one value
            key = row.tobytes()
            index = self._by_value.get(key)
            if index is None:
                row.flags.writeable = False
                index = self._by_value[key] = len(self.rows)
                self.rows.append(row)
            self._by_resources[resources] = index
        return index

    def demand(self, index: int, *, multi_node: bool = False) -> CardDemand | None:
        """The card shape of row ``index`` for a task of a ``multi_node`` job or not;
        ``ValueError`` for a GPU count above one that is not whole."""
        key = (index, multi_node)
        if key not in self._demands:
            row = self.rows[index]
            self._demands[key] = card_demand(
                0.0 if self._gpu is None else float(row[self._gpu]),
                0.0 if self._memory is None else float(row[self._memory]),
                multi_node=multi_node,
            )
        return self._demands[key]

    def table(self) -> NDArray[np.float64]:
        """Every row stacked in index order (read-only; rebuilt when rows were added)."""
        if self._table is None or len(self._table) != len(self.rows):
            table = np.array(self.rows).reshape(len(self.rows), self._width)
            table.flags.writeable = False
            self._table = table
        return self._table
