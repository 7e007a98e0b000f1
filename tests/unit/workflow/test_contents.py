"""What the server reads of what steps wrote: local paths through tenantfs, as the
run's user, below the workspace's ``runs/``; remote URLs through fsspec."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import fsspec
import pytest

from phalanx.tenantfs import Reader
from phalanx.workflow.contents import (
    SERVER,
    Access,
    MissingContent,
    TenantPathRefused,
    content_hash,
    read_param,
    written,
)


def test_file_hashes_stream_and_change_with_one_byte(tmp_path: Path) -> None:
    script = tmp_path / "train.py"
    script.write_bytes(b"print('hi')\n" * 1000)
    first = content_hash(str(script), SERVER)
    assert first == "sha256:" + hashlib.sha256(script.read_bytes()).hexdigest()
    script.write_bytes(b"print('hi')\n" * 999 + b"print('hI')\n")
    assert content_hash(str(script), SERVER) != first


def test_directories_hash_names_and_contents(tmp_path: Path) -> None:
    (tmp_path / "d" / "sub").mkdir(parents=True)
    (tmp_path / "d" / "a").write_text("1")
    (tmp_path / "d" / "sub" / "b").write_text("2")
    first = content_hash(str(tmp_path / "d"), SERVER)
    (tmp_path / "d" / "sub" / "b").rename(tmp_path / "d" / "sub" / "c")
    assert content_hash(str(tmp_path / "d"), SERVER) != first


def test_any_fsspec_url_and_missing_content() -> None:
    with fsspec.open("memory://ws/model.bin", "wb") as stream:
        stream.write(b"weights")
    assert content_hash("memory://ws/model.bin", SERVER) == (
        "sha256:" + hashlib.sha256(b"weights").hexdigest()
    )
    with pytest.raises(MissingContent, match="memory://ws/nope does not exist"):
        content_hash("memory://ws/nope", SERVER)


def test_the_workspace_runs_folder_is_trusted_and_below_it_nothing(tmp_path: Path) -> None:
    """A link above ``runs/`` (the admin's choice) is followed; one below is refused."""
    real = tmp_path / "real"
    (real / "runs" / "r1" / "prep").mkdir(parents=True)
    (real / "runs" / "r1" / "prep" / "n").write_text("3")
    (tmp_path / "ws").symlink_to(real)
    access = Access(workspace_root=str(tmp_path / "ws"))
    assert read_param(str(tmp_path / "ws/runs/r1/prep/n"), access) == b"3"
    (real / "runs" / "r2").symlink_to(real / "runs" / "r1")
    with pytest.raises(TenantPathRefused, match="r2 is a symbolic link"):
        read_param(str(tmp_path / "ws/runs/r2/prep/n"), access)


def test_a_reader_reads_only_its_own_reach(tmp_path: Path) -> None:
    (tmp_path / "runs" / "r1").mkdir(parents=True)
    secret = tmp_path / "runs" / "r1" / "n"
    secret.write_text("hf_secret")
    secret.chmod(0o600)
    access = Access(workspace_root=str(tmp_path), reader=Reader(uid=70_001, gids=(70_001,)))
    if os.geteuid() != 70_001:
        with pytest.raises(TenantPathRefused, match="cannot read it"):
            content_hash(str(secret), access)
        with pytest.raises(TenantPathRefused, match="cannot read it"):
            written(str(secret), access)


def test_missing_is_missing_and_a_fifo_is_refused(tmp_path: Path) -> None:
    with pytest.raises(MissingContent):
        read_param(str(tmp_path / "nope"), SERVER)
    assert not written(str(tmp_path / "nope"), SERVER)
    os.mkfifo(tmp_path / "p")
    with pytest.raises(TenantPathRefused, match="a FIFO"):
        read_param(str(tmp_path / "p"), SERVER)


def test_a_chained_url_is_refused_never_read_through_fsspec(tmp_path: Path) -> None:
    """``simplecache::file://`` would have fsspec read the local file, following links."""
    (tmp_path / "secret").write_text("s")
    url = f"simplecache::file://{tmp_path / 'secret'}"
    with pytest.raises(TenantPathRefused, match="a chained fsspec URL is not read"):
        content_hash(url, SERVER)
    with pytest.raises(TenantPathRefused, match="a chained fsspec URL is not read"):
        read_param(url, SERVER)
    assert read_param(f"local://{tmp_path / 'secret'}", SERVER) == b"s"  # local: tenantfs
