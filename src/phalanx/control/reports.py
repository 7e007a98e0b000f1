"""The simulator's reports an operator shares with ``phalanx up --reports DIR``: what is
in DIR, and one report's bytes.

A report is named by one entry of DIR: a file ``NAME`` ending in .html, .htm, .svg or
.json, or a folder ``NAME`` holding ``report.html`` (what ``phalanx sim compare --out
DIR/NAME`` writes). Guarantees: a name is one path segment of letters, digits, ``.``,
``_`` and ``-`` that starts with a letter or digit (no ``..``, no separator, nothing
absolute); symbolic links are never followed (the entry, and a folder's report.html,
are opened with ``O_NOFOLLOW`` relative to DIR, so no link leads out of DIR, even one
made between the listing and the read); only regular files of at most ``MAX_BYTES``
are served. Anything else is ``NoReport`` with why.
"""

from __future__ import annotations

import os
import re
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from phalanx.domain.errors import ContentError

#: Largest report served (a week of a busy cluster's Gantt charts is a few MiB).
MAX_BYTES: Final = 32 * 1024 * 1024
#: Most reports listed (the newest).
MAX_LISTED: Final = 1000
#: A report's name: one segment, starting with a letter or digit.
NAME: Final = r"^[A-Za-z0-9][A-Za-z0-9._-]{0,199}$"
_NAME: Final = re.compile(NAME)
#: The file a folder report is read from.
FOLDER_REPORT: Final = "report.html"
#: Media type by suffix (a folder report is HTML).
MEDIA_TYPES: Final = {
    ".html": "text/html; charset=utf-8",
    ".htm": "text/html; charset=utf-8",
    ".svg": "image/svg+xml",
    ".json": "application/json",
}
#: What a browser may do with a report: show it, its inline styles and data: images;
#: nothing else (no script, no request, no form), in an opaque origin (``sandbox``),
#: framed only by this server's own pages.
POLICY: Final = (
    "default-src 'none'; style-src 'unsafe-inline'; img-src data:; sandbox; "
    "frame-ancestors 'self'; base-uri 'none'; form-action 'none'"
)
# O_NONBLOCK: a FIFO put there is opened (and then refused) instead of waited on.
_OPEN: Final = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0)


class NoReport(ContentError):
    """No report of that name can be served, and why."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Report:
    """One report: its name, media type, size in bytes and modification time."""

    name: str
    media_type: str
    size: int
    modified_at: float


def _media_type(name: str, folder: bool) -> str | None:
    if folder:
        return MEDIA_TYPES[".html"]
    return MEDIA_TYPES.get(Path(name).suffix.lower())


def _open(root: Path, name: str) -> tuple[int, str]:
    """An open descriptor of report ``name``'s file, and its media type."""
    if not _NAME.match(name) or ".." in name:
        raise NoReport(f"{name!r} is not a report name (one file or folder name in the folder)")
    try:
        base = os.open(root, os.O_RDONLY | os.O_DIRECTORY)
    except OSError as error:
        raise NoReport(f"the reports folder cannot be read: {error.strerror}") from None
    try:
        try:
            entry = os.open(name, _OPEN, dir_fd=base)
        except OSError as error:
            raise NoReport(f"no report {name!r}: {error.strerror}") from None
        if stat.S_ISDIR(os.fstat(entry).st_mode):
            try:
                found = os.open(FOLDER_REPORT, _OPEN, dir_fd=entry)
            except OSError:
                raise NoReport(f"no report {name!r}: the folder has no {FOLDER_REPORT}") from None
            finally:
                os.close(entry)
            entry, folder = found, True
        else:
            folder = False
    finally:
        os.close(base)
    media_type = _media_type(name, folder)
    mode = os.fstat(entry).st_mode
    if media_type is None or not stat.S_ISREG(mode):
        os.close(entry)
        raise NoReport(f"no report {name!r}: only .html, .htm, .svg and .json files are reports")
    return entry, media_type


def describe(root: Path, name: str) -> Report:
    """The report ``name`` of ``root``; ``NoReport`` when there is none to serve."""
    entry, media_type = _open(root, name)
    try:
        status = os.fstat(entry)
    finally:
        os.close(entry)
    return Report(
        name=name, media_type=media_type, size=status.st_size, modified_at=status.st_mtime
    )


def listing(root: Path) -> list[Report]:
    """Every report of ``root`` that can be served, newest first (at most ``MAX_LISTED``);
    one over ``MAX_BYTES`` is listed with its size (reading it is refused)."""
    try:
        names = sorted(entry.name for entry in os.scandir(root))
    except OSError as error:
        raise NoReport(f"the reports folder cannot be read: {error.strerror}") from None
    found = []
    for name in names:
        try:
            found.append(describe(root, name))
        except NoReport:
            continue
    found.sort(key=lambda report: (-report.modified_at, report.name))
    return found[:MAX_LISTED]


def read(root: Path, name: str) -> tuple[bytes, str]:
    """The bytes of report ``name`` and their media type; ``NoReport`` over ``MAX_BYTES``."""
    entry, media_type = _open(root, name)
    with os.fdopen(entry, "rb") as file:
        size = os.fstat(file.fileno()).st_size
        if size > MAX_BYTES:
            raise NoReport(
                f"report {name!r} is {size} bytes, over the {MAX_BYTES // 2**20} MiB the "
                "server serves"
            )
        content = file.read(MAX_BYTES + 1)
    if len(content) > MAX_BYTES:  # it grew while read
        raise NoReport(f"report {name!r} is over the {MAX_BYTES // 2**20} MiB the server serves")
    return content, media_type
