"""Where a task runs, where the server keeps its record of it, and who owns which.

Layout, for a tasks root ``T`` and the server's data dir ``D``:

- ``T/<job>/<task>/`` (each name made safe by ``process.dir_name``) is the task's
  working directory: its current directory, ``PHALANX_WORKDIR``, its ``stdout.log`` and
  ``stderr.log``, the ``exit_code`` its wrapper writes, and whatever the task writes;
- ``D/records/<job>/<task>/process.json`` is the server's own record of the task's last
  start (``records.ProcessRecord``), which a restarted server re-attaches from. It is
  never in a directory the task can write, so a task cannot forge it (a forged pid
  would have the server signal another process group).

A task without an identity (single-user mode, or a shared identity) runs in
directories of the server's own, as is everything in them. For a task with an identity
the guarantees are:

- ``T`` and every ``T/<job>`` belong to the server's user (root) with mode 0711: any
  uid may pass through them to a directory it knows the name of, none but root may
  list or change them. A task therefore cannot swap its working directory for a link
  to somewhere else, and cannot see which other jobs exist by listing;
- ``T/<job>/<task>`` belongs to the task's uid and gid, mode 0700, checked and set at
  every start; its logs belong to that uid too, mode 0600. Other tenants' tasks can
  neither enter it nor read its logs;
- what the server itself opens in a task's directory, which the task may have
  replaced, is opened so that a replacement cannot be turned against the server: logs
  are opened without following links, without blocking on a FIFO, and re-made when they
  are not a regular file with a single name (``logfiles.open_log``); the exit code is read the
  same way and at most 64 bytes of it (``process.read_exit_code``); the API reads logs
  through ``logfiles.FileLog``, which never follows a link either; a file the server
  gives the task (its hostfile: ``write_task_file``) replaces whatever the task left
  at its name, and is written through no link, into no other file.

``T`` must not be inside ``D``: ``D`` is the server's alone (mode 0700), and a task must
be able to reach its directory by its path.
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path
from typing import Final

from phalanx.executors.identity import TaskIdentity
from phalanx.executors.process import dir_name
from phalanx.tenantfs import Place, make_dirs, passage

#: The server's records of its tasks' processes, inside its data dir.
RECORDS_DIR: Final = "records"
#: A task's record in its record directory.
RECORD_FILE: Final = "process.json"
#: The mode of the tasks root and of every job directory in it, with identities:
#: ``tenantfs.PASSAGE_MODE``. The mode of a task's own directory, with identities.
TASK_DIR_MODE: Final = 0o700
#: The mode of a file the server writes for a task into its directory.
TASK_FILE_MODE: Final = 0o600


class TaskDirs:
    """The directories of one executor's tasks (see the module docstring)."""

    __slots__ = ("_passages", "records_root", "tasks_root")

    def __init__(self, *, tasks_root: Path, records_root: Path) -> None:
        self.tasks_root = tasks_root
        self.records_root = records_root
        self._passages: set[Path] = set()  # checked once per executor: one stat less a start

    def workdir(self, job: str, task: str) -> Path:
        """``T/<job>/<task>``: the same for the same names in every process and release."""
        return self.tasks_root / dir_name(job) / dir_name(task)

    def record(self, job: str, task: str) -> Path:
        """Where the server keeps the record of the task's last start."""
        return self.records_root / dir_name(job) / dir_name(task) / RECORD_FILE

    def prepare(self, workdir: Path, identity: TaskIdentity | None) -> bool:
        """Make ``workdir`` ready for a start: created, and with an ``identity``, owned by
        it with mode 0700 below passages of mode 0711 (see above). True when this call
        created it (empty then: nothing in it can be a task's trap). Raises ``OSError``
        when it cannot be made so, ``TenantPathRefused`` when a task left a link or a
        file in its way (``tenantfs.make_dirs``: nothing is made through it)."""
        if identity is None:  # the server's own (in its data dir by default): 0700
            self.tasks_root.mkdir(mode=0o700, parents=True, exist_ok=True)
            relative = workdir.relative_to(self.tasks_root)
            return make_dirs(Place(self.tasks_root, str(relative)), owner=None)
        for path in (self.tasks_root, workdir.parent):
            if path not in self._passages:
                passage(path)
                self._passages.add(path)
        try:
            os.mkdir(workdir, TASK_DIR_MODE)
        except FileExistsError:
            pass
        except FileNotFoundError:
            self._passages.clear()  # removed behind our back: make them again
            raise
        else:  # made just now by root in a passage only root can change: 0700 already
            os.chown(workdir, identity.uid, identity.gid, follow_symlinks=False)
            return True
        status = os.lstat(workdir)
        if not stat.S_ISDIR(status.st_mode):
            raise OSError(errno.ENOTDIR, "the task's directory is not a directory", str(workdir))
        if (status.st_uid, status.st_gid) != (identity.uid, identity.gid):
            os.chown(workdir, identity.uid, identity.gid, follow_symlinks=False)
        if stat.S_IMODE(status.st_mode) != TASK_DIR_MODE:
            os.chmod(workdir, TASK_DIR_MODE, follow_symlinks=False)
        return False


def write_task_file(
    workdir: Path, name: str, text: str | bytes, identity: TaskIdentity | None
) -> None:
    """Write ``text`` to a new file at ``name`` in the prepared ``workdir``, owned by
    ``identity`` (when given), mode 0600. ``name`` is a plain file name, or a path of
    such names (``secrets/s3/key``) whose directories are made mode 0700, as
    ``identity``.

    Whatever is at the file's name (a link the task planted, a hard link to another file,
    a FIFO, an empty directory) is removed first, and the file is created anew with
    ``O_EXCL`` relative to its directory opened without following a link; a directory on
    the way that is a link is refused: nothing outside ``workdir`` is written. Raises
    ``ValueError`` for a name that is not a path of plain file names, and ``OSError``
    when it cannot be written (a directory with files in it at ``name``, a link on the
    way)."""
    parts = name.split("/")
    if any(not part or part in {".", ".."} or "\0" in part for part in parts):
        raise ValueError(f"{name!r} cannot name a file in a task's directory")
    directory = os.open(workdir, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    try:
        for part in parts[:-1]:
            inner = _enter(directory, part, identity)
            os.close(directory)
            directory = inner
        _write_new(directory, parts[-1], text.encode() if isinstance(text, str) else text, identity)
    finally:
        os.close(directory)


def _enter(directory: int, name: str, identity: TaskIdentity | None) -> int:
    """The directory ``name`` in ``directory`` (made 0700 as ``identity`` when absent),
    opened without following a link."""
    try:
        os.mkdir(name, 0o700, dir_fd=directory)
        if identity is not None:
            os.chown(name, identity.uid, identity.gid, dir_fd=directory, follow_symlinks=False)
    except FileExistsError:
        pass
    flags = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
    return os.open(name, flags, dir_fd=directory)


def _write_new(directory: int, name: str, data: bytes, identity: TaskIdentity | None) -> None:
    try:
        os.unlink(name, dir_fd=directory)
    except FileNotFoundError:
        pass
    except IsADirectoryError:  # an empty one goes; one with files in it raises
        os.rmdir(name, dir_fd=directory)
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
    fd = os.open(name, flags, TASK_FILE_MODE, dir_fd=directory)
    try:
        if identity is not None:
            os.fchown(fd, identity.uid, identity.gid)
        while data:
            data = data[os.write(fd, data) :]
    finally:
        os.close(fd)
