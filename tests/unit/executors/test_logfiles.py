"""FileLog: a task's log file read by offset, never through a link the task planted."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from phalanx.domain.errors import InvalidInput
from phalanx.executors.logfiles import FileLog


def test_size_and_reads_by_offset(tmp_path: Path) -> None:
    path = tmp_path / "stdout.log"
    path.write_bytes(b"one\ntwo\n")
    log = FileLog(path=path)
    assert log.size() == 8
    assert log.read(0, 4) == b"one\n"
    assert log.read(4, 100) == b"two\n"  # fewer at the end
    assert log.read(8, 10) == b"" and log.read(100, 10) == b""  # at and past the end
    assert log.read(0, 0) == b""
    with path.open("ab") as handle:
        handle.write(b"three\n")  # the stream only grows: offsets stay valid
    assert (log.size(), log.read(8, 100)) == (14, b"three\n")


def test_a_missing_file_or_directory_reads_as_empty(tmp_path: Path) -> None:
    for path in (tmp_path / "stdout.log", tmp_path / "no" / "such" / "stdout.log"):
        assert (FileLog(path=path).size(), FileLog(path=path).read(0, 10)) == (0, b"")


def test_a_symbolic_link_is_never_followed(tmp_path: Path) -> None:
    secret = tmp_path / "secret"
    secret.write_bytes(b"the server's data")
    link = tmp_path / "stdout.log"
    link.symlink_to(secret)  # what a task could do to its own log
    log = FileLog(path=link)
    assert (log.size(), log.read(0, 100)) == (0, b"")


def test_a_fifo_or_directory_in_its_place_reads_as_empty_without_blocking(tmp_path: Path) -> None:
    fifo = tmp_path / "stdout.log"
    os.mkfifo(fifo)
    assert (FileLog(path=fifo).size(), FileLog(path=fifo).read(0, 10)) == (0, b"")
    directory = tmp_path / "stderr.log"
    directory.mkdir()
    assert (FileLog(path=directory).size(), FileLog(path=directory).read(0, 10)) == (0, b"")


@pytest.mark.parametrize(("offset", "limit", "field"), [(-1, 10, "offset"), (0, -1, "limit")])
def test_negative_offsets_and_limits_are_refused(
    tmp_path: Path, offset: int, limit: int, field: str
) -> None:
    with pytest.raises(InvalidInput) as error:
        FileLog(path=tmp_path / "stdout.log").read(offset, limit)
    assert error.value.field == field
