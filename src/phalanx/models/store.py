"""The model store: immutable, content-addressed model versions.

A root (a local directory or any fsspec URL) holds ``blobs/sha256/<aa>/<hex>``, the
bytes of one file, and ``manifests/sha256/<hex>.json``, one version's ``Manifest``.

Guarantees:
- a tenant's directory is read only through ``tenantfs.read_tree`` (no link followed or
  accepted, nothing that blocks, only what its reader could read, capped in bytes,
  files and time);
- a blob is written once, under the digest of the bytes actually read, and only when
  whole: identical files are stored once, whichever versions hold them;
- a manifest is written after all its blobs, so a version present is a version whole;
- on a local root everything is written 0600 in directories 0700, atomically (a
  temporary file renamed into place); on a remote one by a single put, which S3 makes
  atomic;
- what is read back is verified: a manifest against its digest, each file against its
  digest and size while it is copied out, and a mismatch leaves nothing behind;
- ``collect`` removes only what no kept version names; it must not run alongside an
  ``intake`` into the same root (one thread does both).
"""

from __future__ import annotations

import hashlib
import os
import shutil
import stat
import tempfile
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any, Final, Protocol

import fsspec

from phalanx.domain.errors import ContentError, InvalidInput
from phalanx.models.manifest import DIGEST, FileEntry, Manifest
from phalanx.tenantfs import CHUNK, Limits, Place, Reader, TenantPathRefused, read_tree

#: Temporary files older than this are a crashed intake's: ``collect`` removes them.
STALE_SECONDS: Final = 24 * 3600.0
_BLOBS: Final = "blobs/sha256"
_MANIFESTS: Final = "manifests/sha256"
_TMP: Final = "tmp"


class ModelMissing(ContentError):
    """A model version (a manifest) that the store does not hold."""


class ModelCorrupt(ContentError):
    """A stored file or manifest whose bytes are not what its digest says: the store was
    changed behind the server's back."""


def _blob_key(hexdigest: str) -> str:
    return f"{_BLOBS}/{hexdigest[:2]}/{hexdigest}"


def _manifest_key(hexdigest: str) -> str:
    return f"{_MANIFESTS}/{hexdigest}.json"


def _hex(digest: str) -> str:
    if not isinstance(digest, str) or not DIGEST.fullmatch(digest):
        raise InvalidInput(
            f"{digest!r:.80} is not a model version's digest",
            field="digest",
            fix="give it as sha256:<64 lowercase hex digits>",
        )
    return digest.removeprefix("sha256:")


def _spool(chunks: Iterable[bytes], out: IO[bytes]) -> tuple[str, int]:
    """Write ``chunks`` to ``out``: their sha256 (hex) and length."""
    digest, size = hashlib.sha256(), 0
    for piece in chunks:
        digest.update(piece)
        out.write(piece)
        size += len(piece)
    return digest.hexdigest(), size


class _Files(Protocol):
    """Where a store keeps its keys (``blobs/...``, ``manifests/...``)."""

    def add_blob(self, chunks: Iterable[bytes]) -> tuple[str, int]: ...
    def exists(self, key: str) -> bool: ...
    def write(self, key: str, data: bytes) -> None: ...
    def read(self, key: str) -> bytes: ...
    def open(self, key: str) -> IO[bytes]: ...
    def keys(self, prefix: str) -> list[str]: ...
    def remove(self, key: str) -> None: ...
    def clean(self) -> None: ...


class _Local:
    """A local directory, 0700, written 0600 through temporary files renamed into place."""

    def __init__(self, root: Path) -> None:
        self.root = root
        root.mkdir(mode=0o700, parents=True, exist_ok=True)
        for sub in (_BLOBS, _MANIFESTS, _TMP):
            self._mkdirs(sub)

    def _mkdirs(self, relative: str) -> None:
        """Each directory of ``relative`` under the root, made 0700 where missing."""
        path = self.root
        for part in relative.split("/"):
            path /= part
            path.mkdir(mode=0o700, exist_ok=True)

    @contextmanager
    def _staged(self) -> Iterator[tuple[IO[bytes], str]]:
        """A new 0600 file in the root's ``tmp/``, removed unless renamed away."""
        fd, name = tempfile.mkstemp(dir=self.root / _TMP)
        try:
            with os.fdopen(fd, "wb") as out:
                yield out, name
        finally:
            Path(name).unlink(missing_ok=True)

    def _place(self, out: IO[bytes], name: str, key: str) -> None:
        out.flush()
        os.fsync(out.fileno())  # the bytes are on disk before a name (or a manifest) says so
        self._mkdirs(key.rsplit("/", 1)[0])
        os.replace(name, self.root / key)

    def add_blob(self, chunks: Iterable[bytes]) -> tuple[str, int]:
        with self._staged() as (out, name):
            hexdigest, size = _spool(chunks, out)
            if not self.exists(_blob_key(hexdigest)):
                self._place(out, name, _blob_key(hexdigest))
        return hexdigest, size

    def exists(self, key: str) -> bool:
        return (self.root / key).exists()

    def write(self, key: str, data: bytes) -> None:
        with self._staged() as (out, name):
            out.write(data)
            self._place(out, name, key)

    def read(self, key: str) -> bytes:
        return (self.root / key).read_bytes()

    def open(self, key: str) -> IO[bytes]:
        return (self.root / key).open("rb")

    def keys(self, prefix: str) -> list[str]:
        base = self.root / prefix
        return sorted(
            str(path.relative_to(self.root)) for path in base.rglob("*") if path.is_file()
        )

    def remove(self, key: str) -> None:
        (self.root / key).unlink(missing_ok=True)

    def clean(self) -> None:
        stale = time.time() - STALE_SECONDS
        for path in (self.root / _TMP).iterdir():
            if path.lstat().st_mtime < stale:
                path.unlink(missing_ok=True)


class _Remote:
    """An fsspec filesystem (S3 ...): each key written by one put of its whole bytes."""

    def __init__(self, url: str) -> None:
        fs, path = fsspec.core.url_to_fs(url)
        self.fs: Any = fs
        self.root = str(path).rstrip("/")

    def _path(self, key: str) -> str:
        return f"{self.root}/{key}"

    def add_blob(self, chunks: Iterable[bytes]) -> tuple[str, int]:
        # Its digest is known only once read: spooled here (0600, unnamed) to be put whole.
        with tempfile.TemporaryFile() as spool:
            hexdigest, size = _spool(chunks, spool)
            if not self.exists(_blob_key(hexdigest)):
                spool.seek(0)
                with self.fs.open(self._path(_blob_key(hexdigest)), "wb") as out:
                    shutil.copyfileobj(spool, out, CHUNK)
        return hexdigest, size

    def exists(self, key: str) -> bool:
        return bool(self.fs.exists(self._path(key)))

    def write(self, key: str, data: bytes) -> None:
        self.fs.pipe_file(self._path(key), data)

    def read(self, key: str) -> bytes:
        return bytes(self.fs.cat_file(self._path(key)))

    def open(self, key: str) -> IO[bytes]:
        opened: IO[bytes] = self.fs.open(self._path(key), "rb")
        return opened

    def keys(self, prefix: str) -> list[str]:
        found = self.fs.find(self._path(prefix))
        return sorted(str(path).removeprefix(self.root + "/") for path in found)

    def remove(self, key: str) -> None:
        self.fs.rm_file(self._path(key))

    def clean(self) -> None:
        """Nothing: a remote blob is never staged there."""


class ModelStore:
    """Immutable, content-addressed: ``ROOT/blobs/sha256/<aa>/<hex>`` (a file's bytes)
    and ``ROOT/manifests/sha256/<hex>.json`` (a version's ``Manifest``). See the module
    docstring for what it guarantees."""

    def __init__(self, root: str) -> None:
        """``root``: a local directory (made 0700 if missing) or an fsspec URL
        (``s3://bucket/prefix``), whose filesystem is reached only when used."""
        self.root = root
        protocol = fsspec.core.split_protocol(root)[0]
        local = protocol in (None, "file", "local")
        path = fsspec.core.strip_protocol(root) if local and protocol else root
        self._files: _Files = _Local(Path(os.path.abspath(path))) if local else _Remote(root)

    def intake(self, place: Place, *, reader: Reader | None, limits: Limits) -> Manifest:
        """Copy the tenant's directory at ``place`` (read as ``tenantfs.read_tree`` reads,
        as ``reader``, within ``limits``) into the store: its manifest, stored last. An
        empty directory, or anything ``read_tree`` refuses, is ``TenantPathRefused``."""
        entries = []
        for found in read_tree(place, reader=reader, limits=limits):
            hexdigest, size = self._files.add_blob(found.chunks)
            entries.append(
                FileEntry(
                    path=found.path,
                    digest=f"sha256:{hexdigest}",
                    size=size,
                    executable=found.executable,
                )
            )
        if not entries:
            why = "it holds no file: a model is the files in that directory"
            raise TenantPathRefused(str(place), why, fix="write the model's files there")
        manifest = Manifest.of(entries)
        key = _manifest_key(_hex(manifest.digest))
        if not self._files.exists(key):
            self._files.write(key, manifest.to_json())
        return manifest

    def manifest(self, digest: str) -> Manifest:
        """The version ``digest`` (``sha256:<hex>``), verified: ``InvalidInput`` for a
        malformed digest, ``ModelMissing`` when not stored, ``ModelCorrupt`` or
        ``ManifestError`` when what is stored is not that version."""
        key = _manifest_key(_hex(digest))
        try:
            data = self._files.read(key)
        except FileNotFoundError:
            raise ModelMissing(f"the model store {self.root} holds no version {digest}") from None
        found = "sha256:" + hashlib.sha256(data).hexdigest()
        if found != digest:
            raise ModelCorrupt(f"{key} in {self.root}: its bytes are {found}, not {digest}")
        return Manifest.from_json(data)

    def materialize(self, digest: str, dest: Path) -> Manifest:
        """Write version ``digest``'s files under ``dest`` (new, or an empty directory),
        each verified against its digest and size: files 0444 (0555 executable),
        directories 0555. On any failure (``ModelCorrupt`` naming the file and both
        digests, for one) nothing it wrote is left. Its manifest."""
        manifest = self.manifest(digest)
        made = not dest.exists()
        if made:
            dest.mkdir(mode=0o700)
        elif not dest.is_dir() or dest.is_symlink() or any(dest.iterdir()):
            raise InvalidInput(
                f"{dest} is not an empty directory",
                field="dest",
                fix="give a new or empty directory",
            )
        try:
            for entry in manifest.files:
                self._copy_out(entry, dest)
            for directory in _directories(manifest, dest):
                directory.chmod(0o555)
        except BaseException:
            _undo(dest, made=made)
            raise
        return manifest

    def _copy_out(self, entry: FileEntry, dest: Path) -> None:
        """Write ``entry``'s blob to its path under ``dest``, verified, then read-only."""
        target = dest / entry.path
        for parent in reversed(target.relative_to(dest).parents[:-1]):
            (dest / parent).mkdir(mode=0o700, exist_ok=True)
        key = _blob_key(_hex(entry.digest))
        try:
            source = self._files.open(key)
        except FileNotFoundError:
            raise ModelCorrupt(f"{entry.path}: its blob {entry.digest} is missing") from None
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
        with source, os.fdopen(os.open(target, flags, 0o600), "wb") as out:
            hexdigest, size = _spool(iter(lambda: source.read(CHUNK), b""), out)
        if f"sha256:{hexdigest}" != entry.digest or size != entry.size:
            raise ModelCorrupt(
                f"{entry.path}: its blob has sha256:{hexdigest} ({size} bytes), the manifest "
                f"says {entry.digest} ({entry.size} bytes)"
            )
        target.chmod(0o555 if entry.executable else 0o444)

    def collect(self, keep: Iterable[str]) -> int:
        """Remove every manifest not in ``keep`` (digests), then every blob no kept
        manifest names (and a crashed intake's leftovers); how many blobs it removed. A
        kept manifest that cannot be read stops it before any blob is removed."""
        kept = {_hex(digest) for digest in keep}
        referenced: set[str] = set()
        for key in self._files.keys(_MANIFESTS):
            hexdigest = key.rsplit("/", 1)[-1].removesuffix(".json")
            if hexdigest not in kept:
                self._files.remove(key)
                continue
            manifest = self.manifest(f"sha256:{hexdigest}")
            referenced.update(_hex(entry.digest) for entry in manifest.files)
        removed = 0
        for key in self._files.keys(_BLOBS):
            if key.rsplit("/", 1)[-1] not in referenced:
                self._files.remove(key)
                removed += 1
        self._files.clean()
        return removed


def _directories(manifest: Manifest, dest: Path) -> list[Path]:
    """``dest`` and every directory under it that ``manifest`` implies."""
    found = {dest}
    for entry in manifest.files:
        found.update(dest / parent for parent in Path(entry.path).parents[:-1])
    return sorted(found)


def _undo(dest: Path, *, made: bool) -> None:
    """Remove what ``materialize`` wrote under ``dest`` (and ``dest``, when it made it)."""
    for path in [dest, *dest.rglob("*")]:
        if path.is_dir() and not path.is_symlink():
            path.chmod(stat.S_IRWXU)
    if made:
        shutil.rmtree(dest, ignore_errors=True)
        return
    for child in dest.iterdir():
        if child.is_dir() and not child.is_symlink():
            shutil.rmtree(child, ignore_errors=True)
        else:
            child.unlink(missing_ok=True)
