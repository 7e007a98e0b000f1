"""A dataset's source, read on its user's behalf: listed, and copied onto a node.

Guarantees:
- the source is read with the dataset's own credentials only (``reach``): an object
  store with no secret is read anonymously, never with the server's or a node's own
  credentials, so a dataset reaches nothing its user could not; a secret gives only
  the storage options ``CREDENTIALS`` names for its protocol (never an endpoint: that
  stays the operator's setting), and a web source gets none;
- a web source whose host resolves to a link-local or unspecified address (a cloud's
  metadata service) is refused before anything is asked of it;
- ``list_source`` returns the files below the source by relative path, sorted, with
  their sizes and versions (ETag, or modification time), at most ``MAX_FILES`` of
  them, and a digest of exactly that and the source's URL (``sha256:``,
  ``listing_digest``): the same data at the same source lists to the same digest, and
  a file added, removed, resized or rewritten changes it, as does another source;
- ``copy_listed`` writes exactly the listed files under a directory, refusing a path
  that would leave it, and fails (``ContentError``) when a file's bytes are not its
  listed size: a copy of changed data is never passed for the listing.
"""

from __future__ import annotations

import hashlib
import ipaddress
import json
import os
import socket
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any, Final
from urllib.parse import urlsplit

import fsspec

from phalanx.domain.errors import ContentError, InvalidInput

#: The most files one dataset may hold.
MAX_FILES: Final = 100_000
#: The storage options a secret may give, by protocol.
CREDENTIALS: Final[Mapping[str, frozenset[str]]] = {
    "s3": frozenset({"key", "secret", "token"}),
}
_CHUNK: Final = 1 << 20
#: How long an S3 client waits and how often it tries (botocore's ``Config``): a
#: source that does not answer fails its listing or copy within a minute or so.
S3_CLIENT: Final[Mapping[str, Any]] = {
    "connect_timeout": 10,
    "read_timeout": 60,
    "retries": {"max_attempts": 3},
}


@dataclass(frozen=True, slots=True)
class Listing:
    """What a source holds: ``(path, size, version)`` per file, by path; its digest."""

    files: tuple[tuple[str, int, str], ...]
    digest: str

    @property
    def size(self) -> int:
        """The bytes of every file together."""
        return sum(size for _, size, _ in self.files)


def reach(url: str, credentials: Mapping[str, bytes] | None) -> tuple[Any, str]:
    """The filesystem and root path of source ``url``, with ``credentials`` (a secret's
    keys and values) as its only credentials. Raises ``InvalidInput`` naming a key the
    protocol takes no credentials in, or a host it must not reach."""
    protocol = urlsplit(url).scheme
    allowed = CREDENTIALS.get(protocol, frozenset())
    given = dict(credentials or {})
    unknown = sorted(set(given) - allowed)
    if unknown:
        takes = ", ".join(sorted(allowed)) if allowed else "none"
        raise InvalidInput(
            f"the secret's key {unknown[0]!r} is not a credential of {protocol}:// "
            f"(it takes: {takes})",
            field="spec.secret",
            fix="name a secret holding only those keys",
        )
    options: dict[str, Any] = {key: value.decode() for key, value in given.items()}
    if protocol in ("http", "https"):
        _check_host(urlsplit(url).hostname or "")
    else:
        options.setdefault("anon", not options)
        options["config_kwargs"] = S3_CLIENT  # a store that does not answer is said soon
    # A filesystem of its own, remembering no listing: what it reads is the source now
    # (a cached one would open a file by the size and ETag of an older listing).
    options.update(skip_instance_cache=True, use_listings_cache=False)
    fs, root = fsspec.core.url_to_fs(url, **options)
    return fs, str(root).rstrip("/")


def _check_host(host: str) -> None:
    """Refuse a web host that resolves to a link-local or unspecified address."""
    try:
        found = {info[4][0] for info in socket.getaddrinfo(host, None)}
    except OSError as error:
        raise InvalidInput(
            f"the host {host!r} cannot be resolved: {error}",
            field="spec.source",
            fix="give a host name the server resolves",
        ) from None
    for address in found:
        ip = ipaddress.ip_address(str(address).split("%")[0])
        if ip.is_link_local or ip.is_unspecified:
            raise InvalidInput(
                f"the host {host!r} is {ip}, a link-local or unspecified address",
                field="spec.source",
                fix="datasets are read from object stores and web servers, not from a "
                "machine's metadata service",
            )


def list_source(fs: Any, root: str, *, source: str) -> Listing:
    """The files below ``root`` on ``fs`` (one file when ``root`` is a file), the
    listing of ``source`` (the URL ``reach`` was given: its digest names it). Raises
    ``ContentError`` for more than ``MAX_FILES`` files or none, ``OSError`` (and the
    filesystem's own errors) when it cannot be read."""
    if not fs.isdir(root):  # a web server answers for a directory's index page too
        info = fs.info(root)
        entries = {PurePosixPath(root).name: info}
    else:
        found: dict[str, Any] = fs.find(root, detail=True)
        entries = {}
        for path, info in found.items():
            if info.get("type") == "directory":
                continue
            relative = str(path)[len(root) :].lstrip("/")
            if relative:  # a web server's index gives no size: its own answer does
                entries[relative] = info if info.get("size") is not None else fs.info(path)
            if len(entries) > MAX_FILES:
                raise ContentError(
                    f"the source holds more than {MAX_FILES} files; fix: name a sub-path "
                    "(spec.path), or split it into several datasets"
                )
    if not entries:
        raise ContentError("the source holds no file; fix: check the URL and the sub-path")
    files = tuple(
        sorted((path, int(info.get("size") or 0), _version(info)) for path, info in entries.items())
    )
    return Listing(files=files, digest=listing_digest(source, files))


def listing_digest(source: str, files: Sequence[tuple[str, int, str]]) -> str:
    """The digest of ``files`` listed at ``source``: the same files at another source
    digest otherwise, so a copy named by a digest is always of that source."""
    text = json.dumps([source, [list(file) for file in files]], separators=(",", ":"))
    return "sha256:" + hashlib.sha256(text.encode()).hexdigest()


def _version(info: Mapping[str, Any]) -> str:
    """What tells one content of a file from another without reading it."""
    for key in ("ETag", "etag", "mtime", "LastModified", "last_modified", "created"):
        if info.get(key) is not None:
            return str(info[key]).strip('"')
    return ""


def copy_listed(fs: Any, root: str, files: Sequence[tuple[str, int, str]], dest: Path) -> None:
    """Copy ``files`` (a listing's) from ``root`` on ``fs`` under ``dest``, each checked
    against its listed size. Raises ``ContentError`` for a size that differs or a path
    that would leave ``dest``, and what the filesystem raises."""
    single = len(files) == 1 and not fs.isdir(root)
    for path, size, _ in files:
        parts = PurePosixPath(path).parts
        if not parts or any(part in ("", ".", "..") for part in parts) or path.startswith("/"):
            raise ContentError(f"the listed path {path!r} would leave the dataset's directory")
        target = dest.joinpath(*parts)
        target.parent.mkdir(parents=True, exist_ok=True)
        written = 0
        source = root if single else f"{root}/{path}"
        with fs.open(source, "rb") as reader, open(target, "xb") as out:
            while chunk := reader.read(_CHUNK):
                written += len(chunk)
                if written > size:
                    break
                out.write(chunk)
            os.fsync(out.fileno())
        if written != size:
            raise ContentError(
                f"{path} holds {'more than ' if written > size else ''}{written} bytes, not "
                f"the {size} it was listed with: the data changed since it was listed; "
                "fix: list the dataset again (phalanx dataset refresh NAME)"
            )
