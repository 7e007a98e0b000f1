"""A real Ray cluster on this machine for each test module: a head and two workers on
their own loopback addresses (``phalanx.benchmarks.raycluster``: head 127.0.0.4,
workers 127.0.0.2 and 127.0.0.3 declaring 2 and 4 GPUs)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from phalanx.benchmarks.raycluster import LoopbackCluster, loopback_cluster

pytest.importorskip("ray", reason="the Ray executor's tests need the ray extra")


@pytest.fixture(scope="module")
def ray_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LoopbackCluster]:
    with loopback_cluster(tmp_path_factory.mktemp("ray")) as cluster:
        yield cluster
