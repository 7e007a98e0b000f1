"""FileLog: a task's log file read by offset, never through a link the task planted; when
it is not there, why, and where the task's last start wrote it."""

from __future__ import annotations

import os
from dataclasses import replace
from pathlib import Path

import pytest

from phalanx.domain.errors import InvalidInput
from phalanx.executors.logfiles import FileLog
from phalanx.executors.records import ProcessRecord, write_record


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


def test_absent_tells_a_log_that_is_there_from_one_that_is_not(tmp_path: Path) -> None:
    path = tmp_path / "stdout.log"
    missing = FileLog(path=path).absent()
    assert missing is not None and missing.reason == f"no log file at {path}"
    assert "--tasks-dir" in missing.fix
    path.write_bytes(b"")
    assert FileLog(path=path).absent() is None  # empty, but there
    path.unlink()
    path.symlink_to(tmp_path / "elsewhere")
    link = FileLog(path=path).absent()
    assert link is not None and "symbolic link, which the server never follows" in link.reason
    path.unlink()
    os.mkfifo(path)  # opened without blocking, and not read
    fifo = FileLog(path=path).absent()
    assert fifo is not None and f"{path} is not a regular file" in fifo.reason


def test_absent_says_where_the_last_start_wrote_a_log_that_is_not_in_this_tasks_dir(
    tmp_path: Path,
) -> None:
    old, new = tmp_path / "old-tasks", tmp_path / "new-tasks"
    record = tmp_path / "data" / "records" / "j" / "t" / "process.json"
    start = ProcessRecord(
        job="j", task="t", node="n0", pid=42, start_time=1.0, workdir=str(old / "j" / "t"),
        logs=str(old / "j" / "t"),
    )  # fmt: skip
    write_record(record, start)
    log = FileLog(path=new / "j" / "t" / "stdout.log", record=record, tasks_root=new)
    found = log.absent()
    assert found is not None
    assert found.reason == (
        f"the log is not in the tasks dir {new} (it was written under {old}, which this "
        "server no longer uses)"
    )
    assert found.fix == (
        f"read {old / 'j' / 't' / 'stdout.log'} there, or restart phalanx up with "
        f"--tasks-dir {old} to serve it again"
    )
    # A record from before ``logs`` was recorded: its workdir says (not for a container).
    write_record(record, replace(start, logs=""))
    assert log.absent() == found
    write_record(record, replace(start, logs="", container="c", workdir=str(record.parent)))
    plain = log.absent()
    assert plain is not None and plain.reason == f"no log file at {log.path}"
