"""A task's output as a file on this host: the local executor's ``TaskLog``.

Guarantees: ``FileLog`` reads only a regular file at its path. A symbolic link there
(a task may replace its own ``stdout.log``) is never followed: the stream reads as
empty, so the API cannot be made to serve a file the task pointed it at. A missing
file (the task has not started, or its directory was removed) reads as empty too.
"""

from __future__ import annotations

import errno
import os
import stat
from dataclasses import dataclass
from pathlib import Path

from phalanx.domain.errors import InvalidInput

# Errors that mean "no log file here", as opposed to a broken disk.
_ABSENT = frozenset({errno.ENOENT, errno.ENOTDIR, errno.ELOOP})


@dataclass(frozen=True, slots=True, kw_only=True)
class FileLog:
    """The log file at ``path`` (implements ``phalanx.executors.base.TaskLog``)."""

    path: Path

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
