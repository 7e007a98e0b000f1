"""The resource axes of a snapshot: which dimensions a row has and in which units.

Rows are float64 over ``dims`` in engine units (cpu millicores, memory bytes, GPUs in
thousandths ...): whole numbers, so sums and differences are exact and an undone change
restores a row bit for bit.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from numpy.typing import NDArray

from phalanx.domain.job import Job
from phalanx.domain.node import Node
from phalanx.domain.queue import Queue
from phalanx.domain.resources import CORE_DIMENSIONS, GPU

Vector = NDArray[np.float64]
EPSILON = 1e-9
#: Engine units per canonical unit, for resources whose canonical amounts may be fractional.
ENGINE_UNITS = {GPU: 1000.0}


def dimensions(
    nodes: Sequence[Node],
    queues: Sequence[Queue],
    jobs: Sequence[Job],
    *,
    extra: Sequence[str] = (),
) -> tuple[str, ...]:
    """Resource names of a snapshot: cpu, memory, gpu, then every other name seen, sorted."""
    names: set[str] = set(extra)
    for node in nodes:
        names.update(node.capacity)
    for job in jobs:
        for role in job.roles:
            names.update(role.resources)
    for queue in queues:
        for vector in (queue.guarantee, queue.deserved, queue.capability):
            if vector is not None:
                names.update(vector)
    return CORE_DIMENSIONS + tuple(sorted(names - set(CORE_DIMENSIONS)))
