"""The data dir is made private (0700), or refused when it cannot be trusted."""

from __future__ import annotations

import logging
import os
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest

from phalanx.control.datadir import prepare_data_dir
from phalanx.domain.errors import InvalidInput


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


@pytest.fixture
def umask() -> Iterator[None]:
    previous = os.umask(0)
    try:
        yield
    finally:
        os.umask(previous)


@pytest.mark.parametrize("mask", [0o000, 0o022, 0o277])
def test_a_fresh_data_dir_is_private_whatever_the_umask(
    tmp_path: Path, umask: None, mask: int
) -> None:
    os.umask(mask)
    data = tmp_path / "new" / "data"
    prepare_data_dir(data)
    assert data.is_dir() and mode(data) == 0o700


def test_a_readable_data_dir_is_tightened_with_a_warning(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    data = tmp_path / "data"
    data.mkdir()
    (data / "phalanx.db").write_text("kept")
    data.chmod(0o755)
    with caplog.at_level(logging.WARNING):
        prepare_data_dir(data)
    assert mode(data) == 0o700
    assert (data / "phalanx.db").read_text() == "kept"
    assert "was mode 0755" in caplog.text and "revoke" in caplog.text


def test_an_empty_world_writable_data_dir_is_tightened(tmp_path: Path) -> None:
    data = tmp_path / "data"
    data.mkdir()
    data.chmod(0o777)
    prepare_data_dir(data)
    assert mode(data) == 0o700


def test_a_world_writable_data_dir_with_contents_is_refused_and_left_alone(
    tmp_path: Path,
) -> None:
    data = tmp_path / "data"
    data.mkdir()
    (data / "admin.token").write_text("planted")
    data.chmod(0o777)
    with pytest.raises(InvalidInput) as refused:
        prepare_data_dir(data)
    assert refused.value.field == "--data-dir"
    assert "could be written by other users" in str(refused.value)
    assert refused.value.fix and "chmod 700" in refused.value.fix
    assert mode(data) == 0o777


@pytest.mark.skipif(os.geteuid() != 0, reason="giving a directory away needs root")
def test_a_data_dir_of_another_user_is_refused(tmp_path: Path) -> None:
    data = tmp_path / "data"
    data.mkdir(mode=0o700)
    os.chown(data, 65534, 65534)
    with pytest.raises(InvalidInput) as refused:
        prepare_data_dir(data)
    assert "belongs to uid 65534" in str(refused.value)
    assert refused.value.fix and "chown" in refused.value.fix


def test_a_file_is_not_a_data_dir(tmp_path: Path) -> None:
    data = tmp_path / "data"
    data.write_text("")
    with pytest.raises(InvalidInput, match="is not a directory"):
        prepare_data_dir(data)
