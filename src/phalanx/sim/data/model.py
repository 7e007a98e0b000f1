"""The simulator's data model: each node's cache and link, and the keys datasets go by.

Guarantees: a ``CacheModel`` holds the
real cache's limits (``phalanx.data.cache.CacheLimits``: a quota, evictions from the
high watermark down to the low one) and a positive link bandwidth in bytes per second;
``dataset_key`` is the one rule for the key a role's dataset is cached and matched
under; ``byte_amount`` reads a size or a rate as people write it, or raises
``InvalidInput`` naming the option.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from typing import Final

from phalanx.data.cache import CacheLimits
from phalanx.domain.errors import InvalidInput, QuantityError
from phalanx.domain.job import Job
from phalanx.domain.resources import parse_quantity

GIB: Final = 2**30
TIB: Final = 2**40
#: Each node's cache quota when none is given: 2 TiB of local NVMe set aside for datasets.
DEFAULT_QUOTA: Final = 2 * TIB
#: Each node's remote read bandwidth when none is given: 1 GB/s (a 10 Gbit/s share of a
#: node's link to the data store, as object stores give one node's reader).
DEFAULT_BANDWIDTH: Final = 1e9
#: The size of a dataset given none (assigned by ``--datasets`` or named without a size).
DEFAULT_SIZE: Final = 200 * GIB


@dataclass(frozen=True, slots=True, kw_only=True)
class CacheModel:
    """Every node's dataset cache (``limits``, as the real one's) and the bandwidth in
    bytes per second at which it reads from the remote store (``bandwidth``)."""

    limits: CacheLimits = field(default_factory=lambda: CacheLimits(quota=DEFAULT_QUOTA))
    bandwidth: float = DEFAULT_BANDWIDTH

    def __post_init__(self) -> None:
        if not (self.bandwidth > 0 and math.isfinite(self.bandwidth)):
            raise InvalidInput(
                f"{self.bandwidth} bytes/s is no bandwidth",
                field="bandwidth",
                fix="give a positive rate, e.g. 1G (bytes per second)",
            )


def parse_cache_model(cache: str, bandwidth: str) -> CacheModel:
    """The cache model of ``--node-cache`` and ``--node-bandwidth`` as written (``2Ti``,
    ``1G``); raises ``InvalidInput`` naming the option."""
    quota = int(byte_amount(cache, option="--node-cache"))
    if quota <= 0:
        raise InvalidInput(f"{cache!r} is no cache", field="--node-cache", fix="give e.g. 2Ti")
    rate = byte_amount(bandwidth, option="--node-bandwidth")
    if rate <= 0:
        raise InvalidInput(
            f"{bandwidth!r} is no bandwidth", field="--node-bandwidth", fix="give e.g. 1G"
        )
    return CacheModel(limits=CacheLimits(quota=quota), bandwidth=rate)


def dataset_key(name: str, digest: str | None) -> str:
    """The key a role's dataset is cached under and matched by (``Node.datasets``): its
    pinned digest, or in the simulator, where nothing pins it, its name."""
    return digest or name


def pin_datasets(job: Job) -> Job:
    """``job`` with each role's datasets pinned to their keys (``dataset_key``), as the
    control plane pins them to their listings at submit: what the engine matches."""
    if not any(name != dataset_key(name, digest) for r in job.roles for name, digest in r.datasets):
        return job
    roles = tuple(
        replace(role, datasets=tuple((n, dataset_key(n, d)) for n, d in role.datasets))
        for role in job.roles
    )
    return replace(job, roles=roles)


def names_read(jobs: Iterable[Job]) -> set[str]:
    """The names of the datasets any role of ``jobs`` reads."""
    return {name for job in jobs for role in job.roles for name, _ in role.datasets}


def byte_amount(text: str, *, option: str) -> float:
    """Bytes (or bytes per second) from ``200Gi``, ``200GiB``, ``1G``, ``1GB/s`` or a
    number; raises ``InvalidInput`` naming ``option``."""
    plain = text.strip().removesuffix("/s").removesuffix("B")
    try:
        return parse_quantity(plain, field=option)
    except QuantityError:
        raise InvalidInput(
            f"{text[:40]!r} is not an amount of bytes",
            field=option,
            fix="write a number with an optional suffix, e.g. 200Gi, 2Ti, 1G",
        ) from None
