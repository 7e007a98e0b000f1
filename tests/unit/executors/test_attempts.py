"""The header that begins each later run of a task in its logs."""

from __future__ import annotations

import os
from pathlib import Path

from phalanx.executors.attempts import RUNS_FILE, attempt_header, write_header


def test_runs_after_the_first_begin_with_their_attempt_and_why(tmp_path: Path) -> None:
    assert attempt_header(tmp_path, None, fresh=True, previous=None) == b""
    assert attempt_header(tmp_path, None, fresh=False, previous=1) == (
        b"--- attempt 2 (retry after: exit code 1) ---\n"
    )
    assert attempt_header(tmp_path, None, fresh=False, previous=None) == (
        b"--- attempt 3 (retry after: the previous run recorded no exit code: "
        b"it was stopped or lost) ---\n"
    )
    assert attempt_header(tmp_path, None, fresh=False, previous=137) == (
        b"--- attempt 4 (retry after: exit code 137, SIGKILL) ---\n"
    )
    assert (tmp_path / RUNS_FILE).read_bytes() == b"...."


def test_a_directory_from_before_runs_were_counted_starts_at_attempt_2(tmp_path: Path) -> None:
    assert attempt_header(tmp_path, None, fresh=False, previous=0).startswith(b"--- attempt 2 ")


def test_a_link_in_place_of_the_count_is_never_followed(tmp_path: Path) -> None:
    target = tmp_path / "elsewhere"
    target.write_bytes(b"keep")
    (tmp_path / RUNS_FILE).symlink_to(target)
    attempt_header(tmp_path, None, fresh=False, previous=1)
    assert target.read_bytes() == b"keep" and not (tmp_path / RUNS_FILE).is_symlink()


def test_the_header_goes_to_every_log(tmp_path: Path) -> None:
    paths = [tmp_path / "out", tmp_path / "err"]
    fds = [os.open(p, os.O_WRONLY | os.O_CREAT | os.O_APPEND) for p in paths]
    write_header(b"--- attempt 2 ---\n", fds)
    write_header(b"", fds)
    for fd in fds:
        os.close(fd)
    assert [p.read_bytes() for p in paths] == [b"--- attempt 2 ---\n"] * 2


def test_the_jobs_own_attempt_numbers_each_run(tmp_path: Path) -> None:
    """The server's count, not the node's: a retry on a node where the task never ran
    says its real number, and a restart that is no new attempt says "again"."""
    first, other = tmp_path / "first", tmp_path / "other"
    first.mkdir()
    other.mkdir()
    assert attempt_header(first, None, fresh=True, previous=None, attempt=1) == b""
    assert attempt_header(first, None, fresh=False, previous=143, attempt=1) == (
        b"--- attempt 1 again (restarted after: exit code 143, SIGTERM) ---\n"
    )
    assert attempt_header(other, None, fresh=True, previous=None, attempt=3) == (
        b"--- attempt 3 (a retry: the earlier attempts ran on another node) ---\n"
    )
    assert attempt_header(other, None, fresh=False, previous=1, attempt=4) == (
        b"--- attempt 4 (retry after: exit code 1) ---\n"
    )
