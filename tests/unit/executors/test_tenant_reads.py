"""What the executor reads or makes where a task can write goes through tenantfs: a
task's directory or its ``stderr.log`` planted as a link or a FIFO is never followed or
opened."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from phalanx.executors.local import _runtime_words
from phalanx.executors.taskdirs import TaskDirs
from phalanx.tenantfs import Place, TenantPathRefused


def test_the_runtimes_words_come_from_the_task_log_alone(tmp_path: Path) -> None:
    (tmp_path / "secret").write_text("Error: the secret of another tenant\n")
    task = tmp_path / "tasks" / "job" / "t0"
    task.mkdir(parents=True)
    log = Place(tmp_path / "tasks", "job/t0/stderr.log")
    (task / "stderr.log").write_text("noise\nError: OCI runtime error: cannot mount\n")
    assert _runtime_words(log) == "OCI runtime error: cannot mount"
    (task / "stderr.log").unlink()
    (task / "stderr.log").symlink_to(tmp_path / "secret")
    assert _runtime_words(log) is None  # a link: not followed
    (task / "stderr.log").unlink()
    os.mkfifo(task / "stderr.log")
    assert _runtime_words(log) is None  # a FIFO: not opened, so never waited on


def test_a_task_directory_planted_as_a_link_or_fifo_is_refused(tmp_path: Path) -> None:
    dirs = TaskDirs(tasks_root=tmp_path / "tasks", records_root=tmp_path / "records")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    workdir = dirs.workdir("job", "t0")
    assert dirs.prepare(workdir, None) is True  # made now, 0700
    assert dirs.prepare(workdir, None) is False
    assert workdir.stat().st_mode & 0o777 == 0o700
    workdir.rmdir()
    workdir.symlink_to(elsewhere)
    with pytest.raises(TenantPathRefused, match="t0 is a symbolic link"):
        dirs.prepare(workdir, None)
    workdir.unlink()
    os.mkfifo(workdir)
    with pytest.raises(TenantPathRefused, match="t0 is a FIFO"):
        dirs.prepare(workdir, None)
    assert list(elsewhere.iterdir()) == []
