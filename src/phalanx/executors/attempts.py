"""The line that separates a task's runs in its logs: ``--- attempt 2 (retry after:
exit code 1) ---``.

Every run of a task on a node appends to the same ``stdout.log`` and ``stderr.log``.
Guarantees: every run but the job's first attempt on a fresh directory begins, in both
logs, with one such header line, written by the launcher before the task's process
exists (so it comes before any of the run's output, wherever the launcher runs: the
local executor or a Ray node's agent). Its number is the job's attempt, as the server
counts them (``TaskLaunch.attempt``), so a retry on another node says its real number;
a run that is not a new attempt (a gang restarted after an eviction) says "again".
Runs on the node are counted in ``RUNS_FILE`` in the task's directory, one byte a run,
through ``logfiles.open_log`` (never a link, never another file): the number when the
attempt is not known. The task may write there, or write such lines itself: the headers
are a reading aid in its own logs, not a record.
"""

from __future__ import annotations

import os
import signal
from collections.abc import Sequence
from pathlib import Path
from typing import Final

from phalanx.executors.identity import TaskIdentity
from phalanx.executors.logfiles import open_log

#: One byte per run of the task, in its directory.
RUNS_FILE: Final = ".phalanx-runs"


def attempt_header(
    workdir: Path,
    identity: TaskIdentity | None,
    *,
    fresh: bool,
    previous: int | None,
    attempt: int | None = None,
) -> bytes:
    """Count a new run of the task in ``workdir``; its header (``b""`` for the job's first
    attempt in a fresh directory). ``previous`` is the status the previous run here
    recorded (None: it recorded none); ``attempt`` the job's attempt this run belongs to
    (None: not known, the runs here count)."""
    fd = open_log(workdir / RUNS_FILE, identity, fresh=fresh)
    try:
        os.write(fd, b".")
        runs = os.fstat(fd).st_size
    finally:
        os.close(fd)
    if fresh and (attempt is None or attempt <= 1):
        return b""
    if fresh:
        line = f"--- attempt {attempt} (a retry: the earlier attempts ran on another node) ---"
    elif attempt == 1:
        line = f"--- attempt 1 again (restarted after: {_ending(previous)}) ---"
    else:
        line = f"--- attempt {attempt or max(runs, 2)} (retry after: {_ending(previous)}) ---"
    return (line + "\n").encode()


def write_header(header: bytes, logs: Sequence[int]) -> None:
    """Append ``header`` to each of the descriptors ``logs`` (nothing when empty)."""
    if header:
        for fd in logs:
            os.write(fd, header)


def _ending(code: int | None) -> str:
    if code is None:
        return "the previous run recorded no exit code: it was stopped or lost"
    if code > 128 and code - 128 in signal.valid_signals():
        return f"exit code {code}, {signal.Signals(code - 128).name}"
    return f"exit code {code}"
