"""The model store on a local root: content-addressed, written 0600/0700, verified when
read back, and collected down to what kept versions name."""

from __future__ import annotations

import hashlib
import os
import stat
from pathlib import Path

import pytest

from phalanx.domain.errors import InvalidInput
from phalanx.models.store import ModelCorrupt, ModelMissing, ModelStore
from phalanx.tenantfs import Limits, Place, TenantPathRefused

LIMITS = Limits(max_bytes=8 << 20, max_files=100)
WEIGHTS = os.urandom(3 << 20)  # over one chunk


@pytest.fixture
def store(tmp_path: Path) -> ModelStore:
    return ModelStore(str(tmp_path / "store"))


def write_model(tasks: Path, name: str = "model", *, weights: bytes = WEIGHTS) -> Place:
    """A model directory as a training task leaves it: nested files, a script."""
    model = tasks / name
    (model / "tokenizer").mkdir(parents=True)
    (model / "weights.bin").write_bytes(weights)
    (model / "tokenizer" / "vocab.txt").write_bytes(b"a\nb\n")
    (model / "serve.sh").write_bytes(b"#!/bin/sh\n")
    (model / "serve.sh").chmod(0o755)
    return Place(tasks, name)


def blobs(root: Path) -> set[str]:
    return {path.name for path in (root / "blobs").rglob("*") if path.is_file()}


def test_a_model_comes_back_with_identical_bytes_read_only(
    store: ModelStore, tmp_path: Path
) -> None:
    manifest = store.intake(write_model(tmp_path / "tasks"), reader=None, limits=LIMITS)
    assert [entry.path for entry in manifest.files] == [
        "serve.sh",
        "tokenizer/vocab.txt",
        "weights.bin",
    ]
    assert manifest.size == len(WEIGHTS) + 4 + 10
    dest = tmp_path / "replica" / "model"
    dest.parent.mkdir()
    assert store.materialize(manifest.digest, dest) == manifest
    source = tmp_path / "tasks" / "model"
    for entry in manifest.files:
        assert (dest / entry.path).read_bytes() == (source / entry.path).read_bytes()
        want = 0o555 if entry.path == "serve.sh" else 0o444
        assert stat.S_IMODE((dest / entry.path).stat().st_mode) == want
    for directory in (dest, dest / "tokenizer"):
        assert stat.S_IMODE(directory.stat().st_mode) == 0o555
    assert store.manifest(manifest.digest) == manifest


def test_an_empty_directory_is_a_destination_too(store: ModelStore, tmp_path: Path) -> None:
    manifest = store.intake(write_model(tmp_path / "tasks"), reader=None, limits=LIMITS)
    (tmp_path / "dest").mkdir()
    store.materialize(manifest.digest, tmp_path / "dest")
    assert (tmp_path / "dest" / "weights.bin").read_bytes() == WEIGHTS
    with pytest.raises(InvalidInput, match="not an empty directory"):
        store.materialize(manifest.digest, tmp_path / "dest")


def test_the_same_files_are_stored_once(store: ModelStore, tmp_path: Path) -> None:
    root = tmp_path / "store"
    first = store.intake(write_model(tmp_path / "a"), reader=None, limits=LIMITS)
    stored = {path: path.stat().st_mtime_ns for path in (root / "blobs").rglob("*")}
    again = store.intake(write_model(tmp_path / "b"), reader=None, limits=LIMITS)
    assert again.digest == first.digest
    assert {path: path.stat().st_mtime_ns for path in (root / "blobs").rglob("*")} == stored
    assert list((root / "tmp").iterdir()) == []

    changed = store.intake(
        write_model(tmp_path / "c", weights=WEIGHTS + b"!"), reader=None, limits=LIMITS
    )
    assert changed.digest != first.digest
    new = hashlib.sha256(WEIGHTS + b"!").hexdigest()
    assert blobs(root) - {path.name for path in stored} == {new}


def test_everything_in_the_store_is_the_servers_alone(store: ModelStore, tmp_path: Path) -> None:
    store.intake(write_model(tmp_path / "tasks"), reader=None, limits=LIMITS)
    root = tmp_path / "store"
    paths = [root, *root.rglob("*")]
    assert len([path for path in paths if path.is_file()]) == 4  # 3 blobs, 1 manifest
    for path in paths:
        want = 0o700 if path.is_dir() else 0o600
        assert stat.S_IMODE(path.stat().st_mode) == want, path


def test_a_tampered_blob_is_caught_and_nothing_is_left(store: ModelStore, tmp_path: Path) -> None:
    manifest = store.intake(write_model(tmp_path / "tasks"), reader=None, limits=LIMITS)
    vocab = next(entry for entry in manifest.files if entry.path == "tokenizer/vocab.txt")
    blob = next((tmp_path / "store" / "blobs").rglob(vocab.digest.removeprefix("sha256:")))
    blob.write_bytes(b"a\nc\n")
    dest = tmp_path / "dest"
    with pytest.raises(ModelCorrupt, match=r"tokenizer/vocab\.txt") as caught:
        store.materialize(manifest.digest, dest)
    assert vocab.digest in str(caught.value)
    assert "sha256:" + hashlib.sha256(b"a\nc\n").hexdigest() in str(caught.value)
    assert not dest.exists()
    dest.mkdir()  # given empty: left empty
    with pytest.raises(ModelCorrupt):
        store.materialize(manifest.digest, dest)
    assert list(dest.iterdir()) == []
    blob.unlink()
    with pytest.raises(ModelCorrupt, match="missing"):
        store.materialize(manifest.digest, dest)
    assert list(dest.iterdir()) == []


def test_a_tampered_manifest_is_caught(store: ModelStore, tmp_path: Path) -> None:
    manifest = store.intake(write_model(tmp_path / "tasks"), reader=None, limits=LIMITS)
    path = tmp_path / "store" / "manifests" / "sha256" / f"{manifest.digest[7:]}.json"
    path.write_bytes(manifest.to_json().replace(b"weights.bin", b"../../../x"))
    with pytest.raises(ModelCorrupt, match=manifest.digest):
        store.manifest(manifest.digest)
    assert not (tmp_path / "x").exists()


def test_a_version_not_stored_is_missing(store: ModelStore, tmp_path: Path) -> None:
    digest = "sha256:" + "0" * 64
    with pytest.raises(ModelMissing, match=digest):
        store.manifest(digest)
    with pytest.raises(ModelMissing):
        store.materialize(digest, tmp_path / "dest")
    assert not (tmp_path / "dest").exists()
    with pytest.raises(InvalidInput, match=r"digest: '\.\./etc' is not a model version's digest"):
        store.manifest("../etc")


def test_what_the_store_refuses_to_read(store: ModelStore, tmp_path: Path) -> None:
    (tmp_path / "tasks" / "empty").mkdir(parents=True)
    with pytest.raises(TenantPathRefused, match=r"holds no file.*write the model's files there"):
        store.intake(Place(tmp_path / "tasks", "empty"), reader=None, limits=LIMITS)
    place = write_model(tmp_path / "tasks")
    (tmp_path / "tasks" / "model" / "db").symlink_to("/var/lib/phalanx/phalanx.db")
    with pytest.raises(TenantPathRefused, match="a symbolic link to /var/lib/phalanx"):
        store.intake(place, reader=None, limits=LIMITS)
    assert not list((tmp_path / "store" / "manifests").rglob("*.json"))


def test_collect_removes_exactly_what_no_kept_version_names(
    store: ModelStore, tmp_path: Path
) -> None:
    root = tmp_path / "store"
    old = store.intake(write_model(tmp_path / "a"), reader=None, limits=LIMITS)
    new = store.intake(write_model(tmp_path / "b", weights=b"v2"), reader=None, limits=LIMITS)
    assert store.collect([old.digest, new.digest]) == 0
    assert len(blobs(root)) == 4
    assert store.collect([new.digest]) == 1  # old's weights: the rest is shared
    assert blobs(root) == {entry.digest[7:] for entry in new.files}
    with pytest.raises(ModelMissing):
        store.manifest(old.digest)
    store.materialize(new.digest, tmp_path / "dest")
    assert store.collect([]) == 3
    assert blobs(root) == set()
    assert not list((root / "manifests").rglob("*.json"))
