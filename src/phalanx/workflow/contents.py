"""What the server reads of what steps wrote: output params, artifacts, cache files.

Every such path is one a tenant controls. A local one (the workspace's ``runs/``, an
input artifact's path, a step's ``cache.files``) is read through ``phalanx.tenantfs``
as the run's user (a ``Reader``; None where tasks run as the server): no link is
followed, no FIFO or device is opened, only what that user could read is read, within
``LIMITS``. The workspace's ``runs/`` is the one trusted directory: below it, every
component (the run's directory included, which its user owns) is walked. A remote URL
(``s3://...``) is read through fsspec, where there are no links to follow.

Guarantees: ``read_param`` returns at most ``MAX_PARAM_BYTES`` bytes or raises;
``content_hash`` of a local path is ``tenantfs.hash_path``'s (a file: the SHA-256 of its
bytes); every refusal is an ``OutputError`` (``TenantPathRefused`` for a cache file)
naming the path and what was there.
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Final

import fsspec
from fsspec.implementations.local import LocalFileSystem

from phalanx.domain.errors import ContentError
from phalanx.tenantfs import (
    Limits,
    Place,
    Reader,
    TenantPathMissing,
    TenantPathRefused,
    hash_path,
    read_file,
    stat_of,
)

#: Largest output param file read (JSON text).
MAX_PARAM_BYTES: Final = 1 << 20
#: What one hash of an artifact or cache file may take: bytes, files and seconds.
HASH_LIMITS: Final = Limits(max_bytes=64 << 30, max_files=200_000, seconds=120.0)
#: Bytes read at a time from a remote filesystem.
CHUNK: Final = 1 << 20


class MissingContent(ContentError):
    """An artifact or file that is not there (for a cached entry: a miss)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Access:
    """How one run's files are read: below which workspace (its ``runs/`` is trusted,
    None: no workspace) and as whom (None: as the server, where tasks run as it)."""

    workspace_root: str | None = None
    reader: Reader | None = None

    def place(self, url: str) -> Place | None:
        """``url`` as a place a tenant controls (see the module), None when remote."""
        path = local_path(url)
        if path is None:
            return None
        if self.workspace_root is not None:
            runs = Path(self.workspace_root, "runs")
            if Path(path).is_relative_to(runs):
                return Place(runs, str(Path(path).relative_to(runs)))
        return Place.absolute(path)


#: Reading as the server, with no workspace (local paths walked from ``/``).
SERVER: Final = Access()


def local_path(url: str) -> str | None:
    """The local path of ``url`` (a path, or a URL of a filesystem on this machine:
    ``file://``, ``local://`` ...), None for a remote one. A chained URL
    (``simplecache::file://...``) is refused: fsspec would read the local file under it
    following links."""
    if "::" in url:
        raise TenantPathRefused(
            url, "a chained fsspec URL is not read", fix="give a path or a plain URL"
        )
    protocol, path = fsspec.core.split_protocol(url)
    if protocol is None:
        return os.path.abspath(str(path))
    try:
        local = issubclass(fsspec.get_filesystem_class(protocol), LocalFileSystem)
    except (ValueError, ImportError):  # unknown or not installed: fsspec says so on use
        return None
    return os.path.abspath(str(path)) if local else None


def read_param(url: str, access: Access) -> bytes:
    """The bytes of the file at ``url``: a local one of at most ``MAX_PARAM_BYTES`` (more
    is refused), a remote one cut after ``MAX_PARAM_BYTES`` + 1 (the caller refuses
    more); ``MissingContent`` when it is not there, ``TenantPathRefused`` for what is
    not a regular file the reader may read."""
    place = access.place(url)
    if place is None:
        try:
            with fsspec.open(url, "rb") as stream:
                return bytes(stream.read(MAX_PARAM_BYTES + 1))
        except FileNotFoundError:
            raise MissingContent(f"{url} does not exist") from None
    try:
        return read_file(place, reader=access.reader, limits=Limits(max_bytes=MAX_PARAM_BYTES))
    except TenantPathMissing:
        raise MissingContent(f"{url} does not exist") from None


def written(url: str, access: Access) -> bool:
    """Whether a regular file or directory is at ``url``; ``TenantPathRefused`` when
    something else is (a link, a FIFO) or the reader could not read it."""
    place = access.place(url)
    if place is None:
        fs, path = fsspec.core.url_to_fs(url)
        return bool(fs.exists(path))
    try:
        stat_of(place, reader=access.reader)
    except TenantPathMissing:
        return False
    return True


def content_hash(url: str, access: Access) -> str:
    """``sha256:<hex>`` of the file or directory at ``url``; ``MissingContent`` when it is
    not there, ``TenantPathRefused`` (local) for what the server will not read."""
    place = access.place(url)
    if place is not None:
        try:
            return hash_path(place, reader=access.reader, limits=HASH_LIMITS)
        except TenantPathMissing:
            raise MissingContent(f"{url} does not exist") from None
    fs, path = fsspec.core.url_to_fs(url)
    if not fs.exists(path):
        raise MissingContent(f"{url} does not exist")
    if not fs.isdir(path):
        return "sha256:" + _hash_remote(fs, path)
    root = path.rstrip("/")
    digest = hashlib.sha256(b"phalanx-directory\n")
    for member in sorted(fs.find(root, withdirs=False)):
        relative = str(member)[len(root) :].lstrip("/")
        digest.update(f"{relative}\0{_hash_remote(fs, member)}\n".encode())
    return "sha256:" + digest.hexdigest()


def _hash_remote(fs: fsspec.AbstractFileSystem, path: str) -> str:
    digest = hashlib.sha256()
    try:
        with fs.open(path, "rb") as stream:
            while piece := stream.read(CHUNK):
                digest.update(piece)
    except FileNotFoundError:
        raise MissingContent(f"{path} does not exist") from None
    return digest.hexdigest()


__all__ = [
    "HASH_LIMITS",
    "MAX_PARAM_BYTES",
    "SERVER",
    "Access",
    "MissingContent",
    "TenantPathRefused",
    "content_hash",
    "local_path",
    "read_param",
    "written",
]
