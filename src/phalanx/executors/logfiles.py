"""A task's output as a file on this host: the local executor's ``TaskLog``, and the
descriptor a task writes it through.

Guarantees: ``FileLog`` reads only a regular file at its path. A symbolic link there
(a task may replace its own ``stdout.log``) is never followed: the stream reads as
empty, so the API cannot be made to serve a file the task pointed it at. A missing
file (the task has not started, or its directory was removed) reads as empty too;
``absent()`` tells such a stream from an empty file, and, from the server's own record
of the task's last start (in its data dir, never where a task writes), where that start
wrote the log when it is not at its path (a server restarted with another tasks dir).
``open_log`` never writes through a link either, nor blocks on a FIFO, nor appends to
a file that has another name elsewhere: the server, root or not, writes only the
task's own log.
"""

from __future__ import annotations

import errno
import fcntl
import os
import stat
from dataclasses import dataclass
from pathlib import Path

from phalanx.domain.errors import InvalidInput
from phalanx.executors.base import LogAbsence
from phalanx.executors.identity import TaskIdentity
from phalanx.executors.records import read_record

# Errors that mean "no log file here", as opposed to a broken disk.
_ABSENT = frozenset({errno.ENOENT, errno.ENOTDIR, errno.ELOOP})
#: The mode of a log that belongs to a task's own uid.
LOG_MODE = 0o600


@dataclass(frozen=True, slots=True, kw_only=True)
class FileLog:
    """The log file at ``path`` (implements ``phalanx.executors.base.TaskLog``).

    ``record``: the server's record of the task's last start (``records.write_record``),
    and ``tasks_root`` the tasks dir ``path`` is in (``T/<job>/<task>/<file>``): with
    both, a log that is not at ``path`` is said to be where that start wrote it."""

    path: Path
    record: Path | None = None
    tasks_root: Path | None = None

    def absent(self) -> LogAbsence | None:
        """None when ``path`` is a regular file the server can open; otherwise why not,
        naming ``path``. Opens ``path`` alone, without following a link or blocking."""
        try:
            # O_NONBLOCK: a FIFO put in the file's place must not hang the reader.
            fd = os.open(self.path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
        except OSError as error:
            if error.errno == errno.ELOOP:
                return LogAbsence(
                    reason=f"{self.path} is a symbolic link, which the server never follows",
                    fix="the task replaced its log with a link: read what it points to yourself",
                )
            if error.errno in _ABSENT:
                return self._elsewhere() or LogAbsence(
                    reason=f"no log file at {self.path}",
                    fix="it was removed, or this server was started with another --tasks-dir "
                    "since the task ran: look for it there",
                )
            return LogAbsence(
                reason=f"the server cannot read {self.path}: {error.strerror}",
                fix="let the server's user read it again (its owner or mode was changed)",
            )
        try:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                return LogAbsence(
                    reason=f"{self.path} is not a regular file, so the server does not read it",
                    fix="the task put something else in its log's place: look at it yourself",
                )
        finally:
            os.close(fd)
        return None

    def _elsewhere(self) -> LogAbsence | None:
        """Where the task's last start wrote this log, when that is not ``path``'s
        directory; None when the record does not say, or says it is there."""
        if self.record is None or self.tasks_root is None:
            return None
        found = read_record(self.record)  # in the server's data dir: not a tenant's place
        written = Path(found.log_dir) if found is not None and found.log_dir else None
        if written is None or written == self.path.parent:
            return None
        old_root = written.parents[1] if len(written.parents) > 1 else written  # T/<job>/<task>
        if old_root == self.tasks_root:
            return LogAbsence(
                reason=f"no log file at {self.path} (the task's last start wrote it in {written})",
                fix=f"look for it in {written}",
            )
        return LogAbsence(
            reason=f"the log is not in the tasks dir {self.tasks_root} (it was written "
            f"under {old_root}, which this server no longer uses)",
            fix=f"read {written / self.path.name} there, or restart phalanx up with "
            f"--tasks-dir {old_root} to serve it again",
        )

    def size(self) -> int:
        """The file's size in bytes; 0 when it is missing or not a regular file."""
        try:
            status = os.lstat(self.path)
        except OSError as error:
            if error.errno in _ABSENT:
                return 0
            raise
        return status.st_size if stat.S_ISREG(status.st_mode) else 0

    def read(self, offset: int, limit: int) -> bytes:
        """Up to ``limit`` bytes from ``offset``; ``b""`` at or past the end, or when the
        file is missing or not a regular file."""
        for name, value in (("offset", offset), ("limit", limit)):
            if value < 0:
                raise InvalidInput(f"{value} is negative", field=name, fix="count bytes from 0")
        if limit == 0:
            return b""
        try:
            # O_NONBLOCK: a FIFO put in the file's place must not hang the reader.
            fd = os.open(self.path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
        except OSError as error:
            if error.errno in _ABSENT:
                return b""
            raise
        try:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                return b""
            return os.pread(fd, limit, offset)
        finally:
            os.close(fd)


def open_log(path: Path, identity: TaskIdentity | None = None, *, fresh: bool = False) -> int:
    """A descriptor appending to the log at ``path``, for a task's stdout or stderr.

    With an ``identity`` the file belongs to it, mode 0600. Whatever is at ``path`` that
    is not a regular file with one name (a link, a FIFO, a hard link to another file, an
    empty directory) is replaced by a fresh file; a log's earlier output stays. With
    ``fresh`` (its directory was made just now, so nothing can be there) it is only
    created. Raises ``OSError`` when it cannot be opened.
    """
    if fresh:
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_EXCL, LOG_MODE)
        if identity is not None:
            try:
                os.fchown(fd, identity.uid, identity.gid)
            except OSError:
                os.close(fd)
                raise
        return fd
    flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK
    try:
        fd = os.open(path, flags, LOG_MODE)
    except OSError as error:
        if error.errno not in (errno.ELOOP, errno.ENXIO, errno.EISDIR):
            raise
        fd = _fresh(path, flags)
    status = os.fstat(fd)
    if not stat.S_ISREG(status.st_mode) or status.st_nlink != 1:
        os.close(fd)
        fd = _fresh(path, flags)
        status = os.fstat(fd)
    try:
        if identity is not None:
            if (status.st_uid, status.st_gid) != (identity.uid, identity.gid):
                os.fchown(fd, identity.uid, identity.gid)
            if stat.S_IMODE(status.st_mode) != LOG_MODE:
                os.fchmod(fd, LOG_MODE)
        fcntl.fcntl(fd, fcntl.F_SETFL, fcntl.fcntl(fd, fcntl.F_GETFL) & ~os.O_NONBLOCK)
    except OSError:
        os.close(fd)
        raise
    return fd


def _fresh(path: Path, flags: int) -> int:
    """A new regular file at ``path`` in place of whatever is there."""
    try:
        os.unlink(path)
    except IsADirectoryError:
        os.rmdir(path)  # an empty one; one with files in it raises, and the start fails
    except FileNotFoundError:
        pass
    return os.open(path, flags | os.O_EXCL, LOG_MODE)
