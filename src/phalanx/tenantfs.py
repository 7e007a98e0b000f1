"""Paths a tenant controls: the one way the server and its node agents read, hash,
stat, create or mount them.

A task can write its working directory, its outputs in the workspace, its home, and
whatever else its uid may write; there it can leave a symbolic link to the database, a
hard link to another tenant's file, a FIFO, a device node or a file of a hundred
gigabytes. The server runs as root. So every such path goes through this module, and
its guarantees hold whatever the tenant left there, even if it changes the path while
it is being read:

- **no link is followed**: each component is opened relative to its parent's
  descriptor with ``O_NOFOLLOW`` (a ``..`` component is refused); the walk starts at a
  ``trusted`` base the server chose (the workspace's ``runs/``, ``/``), which is opened
  as given;
- **nothing blocks**: components are opened with ``O_PATH`` (which opens no FIFO or
  device) and examined with ``fstat``; only a regular file is then opened for reading
  (``O_NONBLOCK``), and checked to be the very file that was examined;
- **only what the tenant could read itself**: with a ``Reader`` (the task's uid and
  groups) every directory on the way must let it pass and the file must let it read,
  by mode bits (an ACL that grants more is not seen: such a path is refused), so no
  byte of another tenant's or root's file can come back through the server, as a value,
  a digest or an error message;
- **capped** in bytes (``Limits``) and in time: a read or hash past its deadline
  stops between two chunks;
- a refusal is ``TenantPathRefused`` naming the path, what it was ("it is a symbolic
  link to /var/lib/phalanx/phalanx.db-wal", "it is a FIFO", "it is uid 0's (mode 0600)
  and uid 70001 cannot read it") and the fix; a path that does not exist is
  ``TenantPathMissing``.

Directories the server creates where a tenant can write (``make_dirs``) are made and
handed to the tenant's uid through descriptors, so a link planted on the way is never
followed, created through or chowned.
"""

from __future__ import annotations

import errno
import hashlib
import os
import stat
import time
from collections.abc import Generator, Iterator
from contextlib import closing, contextmanager
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Final

from phalanx.domain.errors import InvalidInput

#: How components are walked: a handle on the entry itself, never its target.
_PATH: Final = os.O_PATH | os.O_NOFOLLOW | os.O_CLOEXEC
#: How a regular file already examined is opened for reading.
_READ: Final = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC
#: Bytes read at a time.
CHUNK: Final = 1 << 20


class TenantPathRefused(InvalidInput):
    """A path a tenant controls that the server will not read, hash or mount: ``path``,
    ``why`` (what it was) and the fix."""

    def __init__(self, path: str, why: str, *, fix: str, field: str | None = None) -> None:
        self.path, self.why = path, why
        super().__init__(f"{path}: {why}", field=field, fix=fix)


class TenantPathMissing(TenantPathRefused):
    """A path a tenant controls that does not exist (a step that did not write it)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Reader:
    """Whose reach a read stays within: a task's uid, its gid and supplementary groups."""

    uid: int
    gids: tuple[int, ...]

    def may(self, status: os.stat_result, want: int) -> bool:
        """Whether the mode bits of ``status`` give this reader ``want`` (an ``R_OK`` /
        ``X_OK`` mask) as owner, group or other, whichever applies."""
        if status.st_uid == self.uid:
            shift = 6
        elif status.st_gid in self.gids:
            shift = 3
        else:
            shift = 0
        return (status.st_mode >> shift) & want == want

    def __str__(self) -> str:
        return f"uid {self.uid}"


@dataclass(frozen=True, slots=True, kw_only=True)
class Limits:
    """How much one read or hash may take: bytes, files (of a directory) and seconds."""

    max_bytes: int
    max_files: int = 100_000
    seconds: float = 30.0


@dataclass(frozen=True, slots=True)
class Place:
    """A path a tenant controls: ``relative`` (``/``-separated, no ``..``) under a
    ``trusted`` directory the server chose; ``Place.absolute(path)`` is one under ``/``."""

    trusted: Path
    relative: str

    @classmethod
    def absolute(cls, path: str | os.PathLike[str]) -> Place:
        """``path`` (absolute) walked from ``/``: no component of it is trusted."""
        text = os.fspath(path)
        if not os.path.isabs(text):
            raise TenantPathRefused(text, "not an absolute path", fix="give an absolute path")
        return cls(Path("/"), text.lstrip("/"))

    @property
    def parts(self) -> tuple[str, ...]:
        """The components walked without following links; ``..`` refused."""
        parts = tuple(p for p in PurePosixPath(self.relative).parts if p not in ("", "."))
        if ".." in parts or any(p.startswith("/") for p in parts):
            raise TenantPathRefused(str(self), "it goes up with '..'", fix="give it without '..'")
        return parts

    def child(self, name: str) -> Place:
        """The entry ``name`` of this directory."""
        return Place(self.trusted, f"{self.relative}/{name}" if self.relative else name)

    def __str__(self) -> str:
        return str(self.trusted / self.relative) if self.relative else str(self.trusted)


_KINDS: Final = (
    (stat.S_ISLNK, "a symbolic link"),
    (stat.S_ISFIFO, "a FIFO"),
    (stat.S_ISSOCK, "a socket"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISDIR, "a directory"),
    (stat.S_ISREG, "a regular file"),
)
#: The fix of every refusal of what a path is.
_FIX: Final = (
    "write a regular file or directory there (no link, FIFO or device), readable by the "
    "task's own user: the server reads only what the task could read itself"
)


def kind_of(mode: int) -> str:
    """What an entry of ``mode`` is, in words ("a FIFO")."""
    return next((name for test, name in _KINDS if test(mode)), "an unknown kind of file")


def _what(fd: int, name: str) -> str:
    """What the entry ``name`` of directory ``fd`` is, a link with its target."""
    status = os.lstat(name, dir_fd=fd)
    if stat.S_ISLNK(status.st_mode):
        try:
            return f"a symbolic link to {os.readlink(name, dir_fd=fd)}"
        except OSError:
            return "a symbolic link"
    return kind_of(status.st_mode)


@contextmanager
def _opened(place: Place, *, reader: Reader | None) -> Iterator[int]:
    """An ``O_PATH`` descriptor of ``place``, reached without following links (a link
    anywhere, the last component included, is refused) and, with a ``reader``, through
    directories it may pass."""
    parts = place.parts
    try:
        fd = os.open(place.trusted, os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError as error:
        raise TenantPathMissing(
            str(place.trusted),
            f"cannot be opened: {error.strerror}",
            fix="check the server's directories",
        ) from None
    walked = place.trusted
    try:
        for index, part in enumerate(parts, start=1):
            if reader is not None and not reader.may(os.fstat(fd), os.X_OK):
                why = f"{walked}, on its way, does not let {reader} pass"
                raise TenantPathRefused(str(place), why, fix=_FIX)
            try:
                child = os.open(part, _PATH, dir_fd=fd)
            except FileNotFoundError:
                raise TenantPathMissing(str(place), "does not exist", fix="write it") from None
            except OSError as error:
                why = f"{walked / part} cannot be opened: {error.strerror}"
                raise TenantPathRefused(str(place), why, fix=_FIX) from None
            mode = os.fstat(child).st_mode
            if stat.S_ISLNK(mode) or (index < len(parts) and not stat.S_ISDIR(mode)):
                os.close(child)
                what = _what(fd, part)
                why = f"it is {what}" if index == len(parts) else f"{walked / part} is {what}"
                raise TenantPathRefused(str(place), why, fix=_FIX)
            os.close(fd)
            fd, walked = child, walked / part
        yield fd
    finally:
        os.close(fd)


def _check(
    place: Place, fd: int, reader: Reader | None, *, need: int | None = None
) -> os.stat_result:
    """``fstat`` of the walked ``fd``: a regular file or directory the reader may use as
    ``need`` says (default: read a file; read and enter a directory)."""
    status = os.fstat(fd)
    if not (stat.S_ISREG(status.st_mode) or stat.S_ISDIR(status.st_mode)):
        raise TenantPathRefused(str(place), f"it is {kind_of(status.st_mode)}", fix=_FIX)
    if need is None:
        need = os.R_OK | (os.X_OK if stat.S_ISDIR(status.st_mode) else 0)
    if reader is not None and not reader.may(status, need):
        mode = stat.S_IMODE(status.st_mode)
        verb = "read" if need & os.R_OK else "enter"
        why = f"it is uid {status.st_uid}'s (mode {mode:04o}) and {reader} cannot {verb} it"
        raise TenantPathRefused(str(place), why, fix=_FIX)
    return status


def _reopen(fd: int, status: os.stat_result, flags: int) -> int:
    """A readable descriptor of what the ``O_PATH`` ``fd`` holds (examined as ``status``):
    reopened through the descriptor itself, so it is the very same file."""
    readable = os.open(f"/proc/self/fd/{fd}", flags & ~os.O_NOFOLLOW)
    again = os.fstat(readable)
    if (again.st_dev, again.st_ino) != (status.st_dev, status.st_ino):  # a bug, never a race
        os.close(readable)
        raise OSError(f"descriptor {fd} changed while it was reopened")
    return readable


def stat_of(place: Place, *, reader: Reader | None) -> os.stat_result:
    """The status of ``place``: a regular file or a directory, reached and readable as
    the module says; ``TenantPathMissing`` or ``TenantPathRefused`` otherwise."""
    with _opened(place, reader=reader) as fd:
        return _check(place, fd, reader)


def read_file(place: Place, *, reader: Reader | None, limits: Limits) -> bytes:
    """The bytes of the regular file at ``place``, at most ``limits.max_bytes`` (more is
    refused, never cut), read within ``limits.seconds``."""
    with _opened(place, reader=reader) as fd:
        status = _check(place, fd, reader)
        if not stat.S_ISREG(status.st_mode):
            raise TenantPathRefused(str(place), "it is a directory, not a file", fix=_FIX)
        data = bytearray()
        for piece in _chunks(place, fd, status, limits, time.monotonic() + limits.seconds):
            data += piece
            if len(data) > limits.max_bytes:
                raise _too_big(place, limits)
        return bytes(data)


def read_head(place: Place, *, reader: Reader | None, limit: int) -> tuple[os.stat_result, bytes]:
    """The status of the regular file at ``place`` and its first ``limit`` bytes at most
    (a longer file is cut, not refused: for small files of known shape, such as a
    progress report or an exit code)."""
    with _opened(place, reader=reader) as fd:
        status = _check(place, fd, reader)
        if not stat.S_ISREG(status.st_mode):
            raise TenantPathRefused(str(place), "it is a directory, not a file", fix=_FIX)
        readable = _reopen(fd, status, _READ)
        try:
            return status, os.read(readable, limit)
        finally:
            os.close(readable)


def _too_big(place: Place, limits: Limits) -> TenantPathRefused:
    why = f"it is over the {limits.max_bytes} bytes the server reads"
    return TenantPathRefused(str(place), why, fix="write less there")


def _chunks(
    place: Place, fd: int, status: os.stat_result, limits: Limits, deadline: float
) -> Generator[bytes, None, None]:
    if status.st_size > limits.max_bytes:
        raise _too_big(place, limits)
    readable = _reopen(fd, status, _READ)
    try:
        while piece := os.read(readable, CHUNK):
            yield piece
            if time.monotonic() > deadline:
                why = f"it took over {limits.seconds:g} s to read"
                raise TenantPathRefused(str(place), why, fix="keep it on a local filesystem")
    finally:
        os.close(readable)


def hash_path(place: Place, *, reader: Reader | None, limits: Limits) -> str:
    """``sha256:<hex>`` of the regular file or directory at ``place``. A directory's
    digest covers each entry's relative path and content (a link inside it: its target's
    text, never what it points to); FIFOs, devices and sockets inside are refused.
    ``limits`` bound the bytes and files hashed in all, and the time taken."""
    budget = _Budget(limits, time.monotonic() + limits.seconds)
    with _opened(place, reader=reader) as fd:
        status = _check(place, fd, reader)
        if stat.S_ISREG(status.st_mode):
            return "sha256:" + _hash_file(place, fd, status, budget)
        digest = hashlib.sha256(b"phalanx-directory\n")
        for relative, entry in _tree(place, fd, status, reader, budget):
            digest.update(f"{relative}\0{entry}\n".encode())
        return "sha256:" + digest.hexdigest()


@dataclass(slots=True)
class _Budget:
    """What one hash may still take: bytes, files, and its deadline."""

    limits: Limits
    deadline: float
    bytes_left: int = 0
    files_left: int = 0

    def __post_init__(self) -> None:
        self.bytes_left, self.files_left = self.limits.max_bytes, self.limits.max_files

    def take(self, place: Place, *, size: int = 0) -> None:
        self.bytes_left -= size
        self.files_left -= 1
        if self.bytes_left < 0 or self.files_left < 0:
            why = (
                f"it holds over {self.limits.max_bytes} bytes or {self.limits.max_files} "
                "files, more than the server hashes"
            )
            raise TenantPathRefused(str(place), why, fix="hash fewer or smaller files")


def _hash_file(place: Place, fd: int, status: os.stat_result, budget: _Budget) -> str:
    budget.take(place, size=status.st_size)
    digest = hashlib.sha256()
    limits = Limits(max_bytes=status.st_size, seconds=budget.limits.seconds)
    for piece in _chunks(place, fd, status, limits, budget.deadline):
        digest.update(piece)
    return digest.hexdigest()


def _names(fd: int, status: os.stat_result) -> list[str]:
    """The entries of the directory ``fd`` (examined as ``status``), sorted."""
    listing = _reopen(fd, status, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        return sorted(os.listdir(listing))
    finally:
        os.close(listing)


def _tree(
    place: Place,
    fd: int,
    status: os.stat_result,
    reader: Reader | None,
    budget: _Budget,
    prefix: str = "",
) -> Iterator[tuple[str, str]]:
    """(relative path, hex digest or ``link:TARGET``) of every entry under the directory
    ``fd`` (examined as ``status``), sorted; subdirectories recursed into, no link
    followed."""
    for name in _names(fd, status):
        inner = place.child(name)
        budget.take(inner)
        child = os.open(name, _PATH, dir_fd=fd)
        try:
            found = os.fstat(child)
            if stat.S_ISLNK(found.st_mode):
                yield prefix + name, "link:" + os.readlink(name, dir_fd=fd)
                continue
            found = _check(inner, child, reader)
            if stat.S_ISDIR(found.st_mode):
                yield from _tree(inner, child, found, reader, budget, f"{prefix}{name}/")
            else:
                yield prefix + name, _hash_file(inner, child, found, budget)
        finally:
            os.close(child)


@dataclass(frozen=True, slots=True, kw_only=True)
class TreeFile:
    """A regular file of a tenant's tree: its ``/``-separated ``path`` under the tree,
    its ``size``, whether its owner may execute it, and ``chunks``, its bytes: exactly
    ``size`` of them (a file that grows or shrinks while read is refused), to be read
    before the next file is asked for (it is closed then)."""

    path: str
    size: int
    executable: bool
    chunks: Iterator[bytes]


#: The fix of a link inside a tree that is copied (a model): plain files only.
_COPY_FIX: Final = "copy the file there instead of linking it: the server copies plain files only"


def read_tree(place: Place, *, reader: Reader | None, limits: Limits) -> Iterator[TreeFile]:
    """Every regular file under the directory at ``place``, subdirectories included,
    in the order of their paths' components (each directory's entries by name). No link
    is followed and none is accepted: a symbolic link, FIFO, socket or device anywhere
    in the tree is refused, naming it and what it is, as is an entry the reader could
    not read (or a directory it could not list). ``limits`` bound the bytes and entries
    read in all, and the time taken, the consumer's time between chunks included."""
    budget = _Budget(limits, time.monotonic() + limits.seconds)
    with _opened(place, reader=reader) as fd:
        status = _check(place, fd, reader)
        if not stat.S_ISDIR(status.st_mode):
            why = f"it is {kind_of(status.st_mode)}"
            raise TenantPathRefused(
                str(place), why, fix="write a directory there, with the files in it"
            )
        yield from _files(place, fd, status, reader, budget, "")


def _files(
    place: Place,
    fd: int,
    status: os.stat_result,
    reader: Reader | None,
    budget: _Budget,
    prefix: str,
) -> Iterator[TreeFile]:
    """``read_tree``'s walk of the directory ``fd`` (examined as ``status``)."""
    for name in _names(fd, status):
        inner = place.child(name)
        try:
            child = os.open(name, _PATH, dir_fd=fd)
        except OSError as error:  # the tenant removed or replaced it since the listing
            raise TenantPathRefused(
                str(inner), f"cannot be opened: {error.strerror}", fix=_FIX
            ) from None
        try:
            if stat.S_ISLNK(os.fstat(child).st_mode):
                raise TenantPathRefused(str(inner), f"it is {_what(fd, name)}", fix=_COPY_FIX)
            found = _check(inner, child, reader)
            regular = stat.S_ISREG(found.st_mode)
            _take(budget, inner, size=found.st_size if regular else 0)
            if not regular:
                yield from _files(inner, child, found, reader, budget, f"{prefix}{name}/")
                continue
            chunks = _exact(inner, child, found, budget)
            try:
                executable = bool(found.st_mode & stat.S_IXUSR)
                yield TreeFile(
                    path=prefix + name, size=found.st_size, executable=executable, chunks=chunks
                )
            finally:
                chunks.close()  # before its descriptor closes: it never reads another file
        finally:
            os.close(child)


def _take(budget: _Budget, place: Place, *, size: int) -> None:
    """``budget.take``, its refusal worded for a copy rather than a hash."""
    try:
        budget.take(place, size=size)
    except TenantPathRefused:
        limits = budget.limits
        why = f"the tree holds over {limits.max_bytes} bytes or {limits.max_files} entries"
        raise TenantPathRefused(str(place), why, fix="write fewer or smaller files") from None


def _exact(
    place: Place, fd: int, status: os.stat_result, budget: _Budget
) -> Generator[bytes, None, None]:
    """The bytes of the examined file, exactly ``status.st_size`` of them."""
    read = 0
    with closing(_chunks(place, fd, status, budget.limits, budget.deadline)) as pieces:
        for piece in pieces:
            read += len(piece)
            if read > status.st_size:  # growing while read: never past what was counted
                break
            yield piece
    if read != status.st_size:
        why = f"it changed size while it was read ({status.st_size} bytes before)"
        raise TenantPathRefused(str(place), why, fix="write it before the task ends")


def make_dirs(place: Place, *, owner: tuple[int, int] | None, mode: int = 0o700) -> bool:
    """Make each directory of ``place`` under its trusted base that is not there yet,
    and give each (made now or before) ``mode`` and, with one, ``owner`` (uid, gid). A
    component that is not a real directory (a link, a file) is refused: nothing is
    created, chmodded or chowned through it. True when the last one was made now (it is
    empty, then)."""
    made = False
    fd = os.open(place.trusted, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        for part in place.parts:
            try:
                os.mkdir(part, mode, dir_fd=fd)
                made = True
            except FileExistsError:
                made = False
            try:
                child = os.open(part, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=fd)
            except OSError:
                why = f"{part} is {_what(fd, part)}"
                raise TenantPathRefused(str(place), why, fix="remove it") from None
            os.close(fd)
            fd = child
            if owner is not None:
                os.fchown(fd, *owner)
            os.fchmod(fd, mode)
    finally:
        os.close(fd)
    return made


def read_tail(place: Place, *, reader: Reader | None, limit: int) -> bytes:
    """The last ``limit`` bytes at most of the regular file at ``place`` (a log, say),
    reached and read as the module says."""
    with _opened(place, reader=reader) as fd:
        status = _check(place, fd, reader)
        if not stat.S_ISREG(status.st_mode):
            raise TenantPathRefused(str(place), "it is a directory, not a file", fix=_FIX)
        readable = _reopen(fd, status, _READ)
        try:
            return os.pread(readable, limit, max(0, status.st_size - limit))
        finally:
            os.close(readable)


def check_mount_source(path: str, *, reader: Reader | None) -> None:
    """Refuse a container mount source that is not a real directory (no link on its
    path) which ``reader`` can already reach: enter it and every directory above it, as
    it could on the host (a bind mount skips the directories above, so this is where
    they count; inside, the kernel applies each entry's own mode as usual).
    ``TenantPathRefused`` naming ``mounts`` and the fix."""
    fix = (
        "mount a real directory (no symbolic link on its path) that the job's user can "
        "already reach"
    )
    place = Place.absolute(path)
    try:
        with _opened(place, reader=reader) as fd:
            status = _check(place, fd, reader, need=os.X_OK)
    except TenantPathRefused as error:
        raise TenantPathRefused(error.path, error.why, fix=fix, field="mounts") from None
    if not stat.S_ISDIR(status.st_mode):
        why = f"it is {kind_of(status.st_mode)}, not a directory"
        raise TenantPathRefused(path, why, fix=fix, field="mounts")


#: A passage: a directory its owner alone lists, that others may only pass through.
PASSAGE_MODE: Final = 0o711


def passage(directory: Path) -> None:
    """Make ``directory`` a passage: it exists, is a real directory of this user (not a
    link), mode 0711. Raises ``OSError`` when it cannot be made so."""
    try:
        os.mkdir(directory, PASSAGE_MODE)
    except FileExistsError:
        pass
    except FileNotFoundError:
        directory.parent.mkdir(parents=True, exist_ok=True)
        os.mkdir(directory, PASSAGE_MODE)
    status = os.lstat(directory)
    if not stat.S_ISDIR(status.st_mode) or status.st_uid != os.geteuid():
        raise OSError(
            errno.EPERM,
            "a directory on a task's path is not the server's own (a link, or another owner)",
            str(directory),
        )
    if stat.S_IMODE(status.st_mode) != PASSAGE_MODE:
        os.chmod(directory, PASSAGE_MODE)
