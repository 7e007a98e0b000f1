"""A file the server writes into a task's directory replaces what the task left there and
is written through no link, into no other file."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from phalanx.executors.taskdirs import TASK_FILE_MODE, write_task_file


def test_the_file_is_written_with_its_mode(tmp_path: Path) -> None:
    write_task_file(tmp_path, "hostfile", "h0 slots=1\n", None)
    path = tmp_path / "hostfile"
    assert path.read_text() == "h0 slots=1\n"
    assert os.stat(path).st_mode & 0o777 == TASK_FILE_MODE


def test_a_planted_link_is_replaced_and_its_target_left_alone(tmp_path: Path) -> None:
    target = tmp_path / "secret"
    target.write_text("keep")
    workdir = tmp_path / "task"
    workdir.mkdir()
    (workdir / "hostfile").symlink_to(target)
    write_task_file(workdir, "hostfile", "h0 slots=1\n", None)
    assert target.read_text() == "keep"
    assert not (workdir / "hostfile").is_symlink()
    assert (workdir / "hostfile").read_text() == "h0 slots=1\n"


def test_a_hard_link_is_replaced_and_the_other_name_left_alone(tmp_path: Path) -> None:
    target = tmp_path / "other"
    target.write_text("keep")
    workdir = tmp_path / "task"
    workdir.mkdir()
    os.link(target, workdir / "hostfile")
    write_task_file(workdir, "hostfile", "new\n", None)
    assert target.read_text() == "keep"
    assert (workdir / "hostfile").read_text() == "new\n"


def test_an_empty_directory_is_replaced_and_a_full_one_refused(tmp_path: Path) -> None:
    (tmp_path / "hostfile").mkdir()
    write_task_file(tmp_path, "hostfile", "new\n", None)
    assert (tmp_path / "hostfile").read_text() == "new\n"
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "x").write_text("")
    with pytest.raises(OSError):
        write_task_file(tmp_path, "full", "new\n", None)


def test_a_linked_working_directory_is_not_followed(tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (tmp_path / "task").symlink_to(elsewhere)
    with pytest.raises(OSError):
        write_task_file(tmp_path / "task", "hostfile", "x", None)
    assert not (elsewhere / "hostfile").exists()


@pytest.mark.parametrize("name", ["", ".", "..", "a\0b", "a//b", "../b", "a/./b", "/a", "a/"])
def test_a_name_that_is_not_a_path_of_file_names_is_refused(tmp_path: Path, name: str) -> None:
    with pytest.raises(ValueError):
        write_task_file(tmp_path, name, "x", None)


def test_a_path_makes_its_directories_private_and_writes_bytes(tmp_path: Path) -> None:
    write_task_file(tmp_path, "secrets/s3/key", b"\x00\xffraw", None)
    assert (tmp_path / "secrets" / "s3" / "key").read_bytes() == b"\x00\xffraw"
    for directory in (tmp_path / "secrets", tmp_path / "secrets" / "s3"):
        assert os.stat(directory).st_mode & 0o777 == 0o700
    write_task_file(tmp_path, "secrets/s3/other", "x", None)  # the directories exist now
    assert sorted(p.name for p in (tmp_path / "secrets" / "s3").iterdir()) == ["key", "other"]


def test_a_linked_directory_on_the_way_is_refused(tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    workdir = tmp_path / "task"
    workdir.mkdir()
    (workdir / "secrets").symlink_to(elsewhere)  # planted by the task
    with pytest.raises(OSError):
        write_task_file(workdir, "secrets/s3/key", b"v", None)
    assert list(elsewhere.iterdir()) == []
