"""The model store on a real S3 endpoint (moto's server): a model copied in and read back
out, verified, as on a local root."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest

from phalanx.models.store import ModelStore
from phalanx.tenantfs import Limits, Place
from tests.integration.s3 import S3


def test_a_model_goes_through_s3_and_back(
    s3_endpoint: S3, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name, value in s3_endpoint.env.items():
        monkeypatch.setenv(name, value)
    s3_endpoint.make_bucket("phalanx-models")
    model = tmp_path / "tasks" / "model"
    (model / "tokenizer").mkdir(parents=True)
    (model / "weights.bin").write_bytes(bytes(range(256)) * 9000)  # over one chunk
    (model / "tokenizer" / "vocab.txt").write_bytes(b"a\nb\n")
    (model / "weights-copy.bin").write_bytes(bytes(range(256)) * 9000)  # stored once
    (model / "serve.sh").write_bytes(b"#!/bin/sh\n")
    (model / "serve.sh").chmod(0o755)
    s3fs = pytest.importorskip("s3fs")
    s3fs.S3FileSystem.clear_instance_cache()  # one made before these variables: not this S3
    store = ModelStore("s3://phalanx-models/store")
    manifest = store.intake(
        Place(tmp_path / "tasks", "model"), reader=None, limits=Limits(max_bytes=64 << 20)
    )
    assert len(manifest.files) == 4
    assert (
        store.intake(
            Place(tmp_path / "tasks", "model"), reader=None, limits=Limits(max_bytes=64 << 20)
        )
        == manifest
    )
    dest = tmp_path / "replica"
    assert store.materialize(manifest.digest, dest) == manifest
    for entry in manifest.files:
        assert (dest / entry.path).read_bytes() == (model / entry.path).read_bytes()
    assert stat.S_IMODE((dest / "serve.sh").stat().st_mode) == 0o555
    assert store.collect([]) == 3
