"""The dataset cache of a node: entries appear whole, read-only and of their declared
size or not at all, survive a restart, and are evicted least recently used first
between the watermarks, never while pinned; one fill per key at a time."""

from __future__ import annotations

import os
import stat
import threading
from pathlib import Path
from typing import Any

import pytest

from phalanx.data.cache import CacheEntry, CacheFull, CacheLimits, DatasetCache, Fill
from phalanx.domain.errors import ContentError, InvalidInput

#: How long a test waits for another thread before it fails (it never sleeps).
WAIT = 10.0


class Clock:
    """A clock that moves only when told."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def key(letter: str) -> str:
    return "sha256:" + letter * 64


def writes(size: int, name: str = "data") -> Fill:
    """A fill writing ``size`` bytes to one file."""

    def fill(directory: Path) -> None:
        (directory / name).write_bytes(b"x" * size)

    return fill


def names(root: Path) -> list[str]:
    return sorted(os.listdir(root))


def cache_at(tmp_path: Path, quota: int = 100, **watermarks: float) -> DatasetCache:
    return DatasetCache(tmp_path / "cache", CacheLimits(quota=quota, **watermarks), clock=Clock())


@pytest.mark.parametrize(
    ("limits", "field", "message"),
    [
        ({"quota": 0}, "quota", "quota: 0 bytes is no quota; fix: give a positive size"),
        ({"quota": 1, "high": 1.5}, "high", "high: 1.5 is not in (0, 1]; fix: give watermarks"),
        ({"quota": 1, "low": 0.0}, "low", "low: 0.0 is not in (0, high=0.95); fix: give water"),
        ({"quota": 1, "low": 0.9, "high": 0.9}, "low", "low: 0.9 is not in (0, high=0.9)"),
    ],
)
def test_limits_that_are_not_are_refused_naming_the_field_and_the_fix(
    limits: dict[str, Any], field: str, message: str
) -> None:
    with pytest.raises(InvalidInput) as refused:
        CacheLimits(**limits)
    assert refused.value.field == field
    assert str(refused.value).startswith(message)
    assert "0 < low < high <= 1" in str(refused.value) or field == "quota"


def test_an_entry_is_filled_once_then_found(tmp_path: Path) -> None:
    clock = Clock()
    cache = DatasetCache(tmp_path / "cache", CacheLimits(quota=100), clock=clock)
    calls: list[Path] = []

    def fill(directory: Path) -> None:
        calls.append(directory)
        assert names(directory) == []  # empty, new, inside the root
        assert directory.parent == tmp_path / "cache"
        (directory / "part-0").write_bytes(b"12345")

    assert cache.lookup(key("a")) is None
    path = cache.ensure(key("a"), 5, fill)
    assert path == cache.path(key("a")) == tmp_path / "cache" / ("a" * 64)
    assert (path / "part-0").read_bytes() == b"12345"
    clock.now = 1001.0
    assert cache.ensure(key("a"), 5, fill) == path
    assert len(calls) == 1
    clock.now = 1002.0
    assert cache.lookup(key("a")) == path
    assert cache.entries() == [CacheEntry(key=key("a"), size=5, last_used=1002.0, pinned=0)]
    assert cache.usage() == 5
    assert names(tmp_path / "cache") == ["a" * 64, "a" * 64 + ".json"]
    assert stat.S_IMODE(os.stat(tmp_path / "cache").st_mode) == 0o711
    assert stat.S_IMODE(os.stat(tmp_path / "cache" / ("a" * 64 + ".json")).st_mode) == 0o600


def test_a_new_cache_on_the_same_root_knows_the_entries(tmp_path: Path) -> None:
    clock = Clock()
    cache = DatasetCache(tmp_path / "cache", CacheLimits(quota=100), clock=clock)
    cache.ensure(key("a"), 7, writes(7))
    clock.now = 1005.0
    cache.ensure(key("b"), 3, writes(3))
    clock.now = 1009.0
    cache.lookup(key("a"))
    again = DatasetCache(tmp_path / "cache", CacheLimits(quota=100), clock=clock)
    assert again.entries() == [
        CacheEntry(key=key("b"), size=3, last_used=1005.0, pinned=0),
        CacheEntry(key=key("a"), size=7, last_used=1009.0, pinned=0),
    ]
    assert again.usage() == 10
    assert again.lookup(key("b")) == tmp_path / "cache" / ("b" * 64)


def test_the_least_recently_used_go_first_down_to_the_low_watermark(tmp_path: Path) -> None:
    clock = Clock()
    limits = CacheLimits(quota=100, high=0.9, low=0.5)
    cache = DatasetCache(tmp_path / "cache", limits, clock=clock)
    cache.ensure(key("a"), 40, writes(40))
    clock.now = 1001.0
    cache.ensure(key("b"), 30, writes(30))
    clock.now = 1002.0
    cache.lookup(key("a"))  # b is now the least recently used
    assert [entry.key for entry in cache.entries()] == [key("b"), key("a")]
    seen: list[list[str]] = []

    def fill(directory: Path) -> None:  # room is made before the fill
        seen.append([entry.key for entry in cache.entries()])
        writes(30)(directory)

    clock.now = 1003.0
    # 40 + 30 + 30 > 90: b goes (70 left, counting c, still over 50), then a (30)
    cache.ensure(key("c"), 30, fill)
    assert seen == [[]]
    assert cache.entries() == [CacheEntry(key=key("c"), size=30, last_used=1003.0, pinned=0)]
    assert cache.usage() == 30
    assert names(tmp_path / "cache") == ["c" * 64, "c" * 64 + ".json"]


def test_below_the_high_watermark_nothing_is_evicted(tmp_path: Path) -> None:
    cache = cache_at(tmp_path, high=0.9, low=0.5)
    cache.ensure(key("a"), 40, writes(40))
    cache.ensure(key("b"), 50, writes(50))  # 90: not above 90
    assert [entry.key for entry in cache.entries()] == [key("a"), key("b")]


def test_a_pinned_entry_is_never_evicted(tmp_path: Path) -> None:
    cache = cache_at(tmp_path, high=0.9, low=0.5)
    cache.ensure(key("a"), 40, writes(40))
    cache.ensure(key("b"), 30, writes(30))
    cache.pin(key("a"))
    cache.pin(key("a"))
    cache.ensure(key("c"), 30, writes(30))  # b goes; a, the least recent, is pinned
    assert [(entry.key, entry.pinned) for entry in cache.entries()] == [
        (key("a"), 2),
        (key("c"), 0),
    ]
    assert cache.evict(key("a")) is False
    cache.unpin(key("a"))
    assert cache.evict(key("a")) is False  # pinned once more
    cache.unpin(key("a"))
    with pytest.raises(InvalidInput, match="is not pinned"):
        cache.unpin(key("a"))
    assert cache.evict(key("a")) is True
    assert cache.evict(key("a")) is False  # gone
    assert names(tmp_path / "cache") == ["c" * 64, "c" * 64 + ".json"]


def test_a_key_pinned_before_it_is_filled_is_held_once_it_lands(tmp_path: Path) -> None:
    cache = cache_at(tmp_path, high=0.9, low=0.5)
    cache.pin(key("a"))
    cache.ensure(key("a"), 40, writes(40))
    cache.ensure(key("b"), 30, writes(30))
    cache.ensure(key("c"), 30, writes(30))
    assert [entry.key for entry in cache.entries()] == [key("a"), key("c")]


def test_a_fill_that_does_not_fit_beside_the_pinned_is_cache_full(tmp_path: Path) -> None:
    cache = cache_at(tmp_path)
    cache.ensure(key("a"), 60, writes(60))
    cache.ensure(key("b"), 20, writes(20))
    cache.pin(key("a"))
    calls: list[Path] = []
    with pytest.raises(CacheFull) as full:
        cache.ensure(key("c"), 50, calls.append)
    assert isinstance(full.value, ContentError)
    assert (full.value.size, full.value.quota, full.value.pinned) == (50, 100, 60)
    assert str(full.value) == (
        f"{key('c')} needs 50 bytes and the cache holds 100: 60 bytes are pinned "
        f"({key('a')} (60 bytes)) and 0 being filled"
    )
    assert calls == []
    assert [entry.key for entry in cache.entries()] == [key("a"), key("b")]  # none evicted
    with pytest.raises(CacheFull, match="needs 101 bytes and the cache holds 100: 0 bytes"):
        cache_at(tmp_path / "other").ensure(key("d"), 101, calls.append)


def test_a_fill_that_fails_leaves_nothing_and_the_next_ensure_fills(tmp_path: Path) -> None:
    cache = cache_at(tmp_path)

    def fail(directory: Path) -> None:
        (directory / "half").write_bytes(b"x" * 3)
        (directory / "half").chmod(0o444)
        raise RuntimeError("the source went away")

    with pytest.raises(RuntimeError, match="the source went away"):
        cache.ensure(key("a"), 6, fail)
    assert names(tmp_path / "cache") == []
    assert cache.lookup(key("a")) is None
    assert cache.ensure(key("a"), 6, writes(6)).is_dir()
    assert cache.usage() == 6


def test_a_fill_of_other_than_its_size_or_files_is_refused(tmp_path: Path) -> None:
    cache = cache_at(tmp_path)
    with pytest.raises(ContentError, match=r"wrote 5 bytes, not the 6 declared"):
        cache.ensure(key("a"), 6, writes(5))

    def link(directory: Path) -> None:
        (directory / "sub").mkdir()
        (directory / "sub" / "elsewhere").symlink_to(tmp_path)

    with pytest.raises(ContentError, match=r"left sub/elsewhere, a symbolic link"):
        cache.ensure(key("a"), 0, link)
    assert names(tmp_path / "cache") == []
    assert cache.entries() == []


def test_an_entry_is_read_only(tmp_path: Path) -> None:
    cache = cache_at(tmp_path)

    def fill(directory: Path) -> None:
        (directory / "shards").mkdir()
        (directory / "shards" / "0.bin").write_bytes(b"abcd")
        (directory / "run.sh").write_bytes(b"#!/bin/sh\n")
        (directory / "run.sh").chmod(0o700)

    path = cache.ensure(key("a"), 14, fill)
    modes = {
        str(p.relative_to(path)): stat.S_IMODE(p.lstat().st_mode) for p in [path, *path.rglob("*")]
    }
    assert modes == {".": 0o555, "shards": 0o555, "shards/0.bin": 0o444, "run.sh": 0o555}


def test_clean_removes_what_a_crash_left(tmp_path: Path) -> None:
    cache = cache_at(tmp_path)
    cache.ensure(key("a"), 4, writes(4))
    root = tmp_path / "cache"
    (root / ".partial-0123").mkdir()  # a crash mid-fill
    (root / ".partial-0123" / "half").write_bytes(b"x")
    (root / ".partial-0123").chmod(0o555)
    (root / ".partial-4567.json").write_text("{")  # ... mid-index
    (root / ("b" * 64)).mkdir()  # ... between the rename and the index
    (root / ("c" * 64 + ".json")).write_text('{"size": 1, "last_used": 1}')  # no directory
    (root / ("d" * 64)).mkdir()
    (root / ("d" * 64 + ".json")).write_text("not json")
    again = cache_at(tmp_path)
    assert [entry.key for entry in again.entries()] == [key("a")]
    assert again.clean() == 6
    assert names(root) == ["a" * 64, "a" * 64 + ".json"]
    assert again.clean() == 0


def test_one_fill_for_threads_ensuring_one_key_at_once(tmp_path: Path) -> None:
    cache = cache_at(tmp_path)
    together = threading.Barrier(8)
    filling, release = threading.Event(), threading.Event()
    calls: list[Path] = []

    def fill(directory: Path) -> None:
        calls.append(directory)
        filling.set()
        assert release.wait(WAIT)
        writes(8)(directory)

    results: list[Path] = []

    def ensure() -> None:
        together.wait(WAIT)
        results.append(cache.ensure(key("a"), 8, fill))

    threads = [threading.Thread(target=ensure) for _ in range(8)]
    for thread in threads:
        thread.start()
    assert filling.wait(WAIT)
    release.set()
    for thread in threads:
        thread.join(WAIT)
    assert len(calls) == 1
    assert results == [cache.path(key("a"))] * 8


def test_when_the_first_fill_fails_a_waiter_fills(tmp_path: Path) -> None:
    cache = cache_at(tmp_path)
    filling, release = threading.Event(), threading.Event()
    calls: list[Path] = []
    outcomes: list[str] = []

    def fill(directory: Path) -> None:
        calls.append(directory)
        if len(calls) == 1:
            filling.set()
            assert release.wait(WAIT)
            raise RuntimeError("first fill failed")
        writes(8)(directory)

    def ensure() -> None:
        try:
            outcomes.append(cache.ensure(key("a"), 8, fill).name)
        except RuntimeError as error:
            outcomes.append(str(error))

    first = threading.Thread(target=ensure)
    first.start()
    assert filling.wait(WAIT)
    others = [threading.Thread(target=ensure) for _ in range(3)]
    for thread in others:
        thread.start()
    release.set()
    for thread in [first, *others]:
        thread.join(WAIT)
    assert len(calls) == 2
    assert sorted(outcomes) == sorted(["first fill failed"] + ["a" * 64] * 3)


def test_a_long_fill_blocks_neither_lookups_nor_other_fills(tmp_path: Path) -> None:
    cache = cache_at(tmp_path)
    cache.ensure(key("a"), 4, writes(4))
    filling, release = threading.Event(), threading.Event()

    def slow(directory: Path) -> None:
        filling.set()
        assert release.wait(WAIT)
        writes(8)(directory)

    thread = threading.Thread(target=cache.ensure, args=(key("b"), 8, slow))
    thread.start()
    assert filling.wait(WAIT)
    assert cache.lookup(key("a")) is not None
    assert cache.ensure(key("c"), 2, writes(2)).is_dir()
    assert cache.clean() == 0  # the fill's temporary is left alone
    release.set()
    thread.join(WAIT)
    assert [entry.key for entry in cache.entries()] == [key("a"), key("c"), key("b")]


def test_a_key_that_is_not_a_digest_is_invalid_input(tmp_path: Path) -> None:
    cache = cache_at(tmp_path)
    for bad in ("sha256:../../etc", "md5:" + "0" * 64, "sha256:" + "A" * 64, "a" * 64):
        for call in (cache.path, cache.lookup, cache.pin, cache.evict):
            with pytest.raises(InvalidInput, match="not a sha256 digest") as refused:
                call(bad)
            assert refused.value.field == "key"
        with pytest.raises(InvalidInput, match="not a sha256 digest"):
            cache.ensure(bad, 1, writes(1))
    with pytest.raises(InvalidInput, match="size: -1 is not a size"):
        cache.ensure(key("a"), -1, writes(1))
    assert names(tmp_path / "cache") == []
