"""NodeCache: cold reads wait size / bandwidth, one fill per key, LRU eviction at the
watermarks that spares pinned entries, reads through what does not fit."""

from __future__ import annotations

import pytest

from phalanx.data.cache import CacheLimits
from phalanx.domain.errors import EngineInvariantError
from phalanx.sim.data import CacheModel, NodeCache

GB = 10**9


def _cache(quota: int = 100 * GB, bandwidth: float = 1 * GB) -> NodeCache:
    return NodeCache(CacheModel(limits=CacheLimits(quota=quota), bandwidth=bandwidth))


def test_a_cold_read_waits_size_over_bandwidth_and_a_warm_one_not_at_all() -> None:
    cache = _cache(bandwidth=2 * GB)
    cold = cache.read("a", 30 * GB, now=10.0)
    assert (cold.ready, cold.cold_bytes, cold.warm, cold.cached) == (25.0, 30 * GB, False, True)
    assert cache.held() == frozenset()  # whole or not at all: held once the fill ends
    assert cache.next_landing() == 25.0
    cache.unpin("a")
    warm = cache.read("a", 30 * GB, now=40.0)
    assert (warm.ready, warm.cold_bytes, warm.warm) == (40.0, 0, True)
    assert cache.held() == frozenset({"a"})


def test_a_second_reader_of_a_fill_under_way_waits_for_that_fill() -> None:
    cache = _cache()
    first = cache.read("a", 20 * GB, now=0.0)
    second = cache.read("a", 20 * GB, now=5.0)
    assert (
        (second.ready, second.cold_bytes, second.warm)
        == (first.ready, 0, False)
        == (
            20.0,
            0,
            False,
        )
    )


def test_fills_of_different_datasets_take_turns_on_the_link() -> None:
    cache = _cache()
    assert cache.read("a", 10 * GB, now=0.0).ready == 10.0
    assert cache.read("b", 5 * GB, now=2.0).ready == 15.0  # after a's, at full bandwidth
    assert cache.read("c", 5 * GB, now=30.0).ready == 35.0  # the link was free again


def test_eviction_at_the_high_watermark_goes_lru_first_to_the_low_one_sparing_pins() -> None:
    cache = _cache(quota=100 * GB)  # high 95, low 80
    for at, key in enumerate("abcd"):
        cache.read(key, 20 * GB, now=100.0 * at)
        cache.land(100.0 * at + 50.0)
    cache.unpin("b")
    cache.unpin("c")
    cache.unpin("d")  # a stays pinned: a task on the node still reads it
    cache.read("c", 20 * GB, now=500.0)  # c is used again: b is now the least recent
    cache.unpin("c")
    assert cache.lru() == ["a", "b", "d", "c"]
    cache.read("e", 20 * GB, now=600.0)  # 80 held + 20 > 95: evict down to 80
    assert cache.lru() == ["a", "d", "c"]  # b (LRU, unpinned) went; a is pinned
    assert cache.evictions == 1
    cache.unpin("e")
    cache.land(700.0)
    cache.read("f", 20 * GB, now=700.0)  # a (pinned), d, c, e held: d goes, 80 are left
    assert cache.lru() == ["a", "c", "e"]
    assert cache.evictions == 2


def test_what_does_not_fit_beside_the_pinned_is_read_through_and_evicts_nothing() -> None:
    cache = _cache(quota=100 * GB)
    cache.read("a", 60 * GB, now=0.0)
    cache.land(60.0)
    through = cache.read("b", 50 * GB, now=60.0)  # 60 pinned + 50 > 100
    assert (through.ready, through.cold_bytes, through.cached) == (110.0, 50 * GB, False)
    cache.land(200.0)
    assert cache.held() == frozenset({"a"}) and cache.evictions == 0


def test_unpinning_what_is_not_pinned_is_a_bug() -> None:
    with pytest.raises(EngineInvariantError):
        _cache().unpin("a")
