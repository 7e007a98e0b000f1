"""The model cache: a version appears whole and verified or not at all, read-only, under
a passage that cannot be listed; versions not kept are collected."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from phalanx.domain.errors import InvalidInput
from phalanx.models.cache import ModelCache
from phalanx.models.store import ModelCorrupt, ModelStore
from tests.unit.models.test_store import LIMITS, write_model


def test_a_version_is_copied_out_once_read_only_under_a_passage(tmp_path: Path) -> None:
    store = ModelStore(str(tmp_path / "store"))
    manifest = store.intake(write_model(tmp_path / "tasks"), reader=None, limits=LIMITS)
    cache = ModelCache(tmp_path / "cache")
    path = cache.ensure(store, manifest.digest)
    assert path == cache.path(manifest.digest) == tmp_path / "cache" / manifest.digest[7:]
    assert stat.S_IMODE(os.stat(tmp_path / "cache").st_mode) == 0o711
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o555
    for entry in manifest.files:
        copied = path / entry.path
        assert stat.S_IMODE(copied.stat().st_mode) in (0o444, 0o555)
    inode = path.stat().st_ino
    assert cache.ensure(store, manifest.digest).stat().st_ino == inode  # not copied again


def test_a_corrupt_version_leaves_nothing_behind(tmp_path: Path) -> None:
    store = ModelStore(str(tmp_path / "store"))
    manifest = store.intake(write_model(tmp_path / "tasks"), reader=None, limits=LIMITS)
    for blob in (tmp_path / "store" / "blobs").rglob("*"):
        if blob.is_file():
            blob.chmod(0o600)
            blob.write_bytes(b"planted")
    cache = ModelCache(tmp_path / "cache")
    with pytest.raises(ModelCorrupt):
        cache.ensure(store, manifest.digest)
    assert list((tmp_path / "cache").iterdir()) == []


def test_versions_not_kept_and_leftovers_are_collected(tmp_path: Path) -> None:
    store = ModelStore(str(tmp_path / "store"))
    first = store.intake(write_model(tmp_path / "a"), reader=None, limits=LIMITS)
    second = store.intake(write_model(tmp_path / "b", weights=b"other"), reader=None, limits=LIMITS)
    cache = ModelCache(tmp_path / "cache")
    kept, gone = cache.ensure(store, first.digest), cache.ensure(store, second.digest)
    (tmp_path / "cache" / ".partial-0123").mkdir()  # a crash mid-copy
    assert cache.collect([first.digest]) == 2
    assert kept.is_dir() and not gone.exists()
    assert sorted(p.name for p in (tmp_path / "cache").iterdir()) == [kept.name]


def test_a_digest_that_is_not_one_names_no_path(tmp_path: Path) -> None:
    cache = ModelCache(tmp_path / "cache")
    for digest in ("sha256:../../etc", "md5:" + "0" * 64, "sha256:" + "g" * 64):
        with pytest.raises(InvalidInput, match="not a sha256 digest"):
            cache.path(digest)
