"""Datasets in the simulator: node caches, cold reads, and what locality is worth.

A workload's jobs may read datasets (``Role.datasets``, sized by ``Workload.datasets``;
``with_datasets`` gives a trace that has none a seeded Zipf-like assignment). Each node
has a cache (``NodeCache``: the real cache's quota, watermarks, LRU eviction and pins)
and a link to the remote store (``CacheModel.bandwidth``). A task that starts on a node
missing some of its datasets holds its resources while they are read and makes no
progress until they are there; ``DataPlane`` keeps every node's cache, tells the
simulated cluster when each task's data is ready, and tells the driver what each node
holds, which the engine sees as ``Node.datasets``. ``DataStats`` is what it cost.
"""

from phalanx.sim.data.assign import with_datasets
from phalanx.sim.data.cache import NodeCache, Read
from phalanx.sim.data.model import (
    DEFAULT_BANDWIDTH,
    DEFAULT_QUOTA,
    DEFAULT_SIZE,
    CacheModel,
    byte_amount,
    dataset_key,
    names_read,
    parse_cache_model,
    pin_datasets,
)
from phalanx.sim.data.plane import DataPlane
from phalanx.sim.data.stats import DATA_FIGURES, DataStats

__all__ = [
    "DATA_FIGURES",
    "DEFAULT_BANDWIDTH",
    "DEFAULT_QUOTA",
    "DEFAULT_SIZE",
    "CacheModel",
    "DataPlane",
    "DataStats",
    "NodeCache",
    "Read",
    "byte_amount",
    "dataset_key",
    "names_read",
    "parse_cache_model",
    "pin_datasets",
    "with_datasets",
]
