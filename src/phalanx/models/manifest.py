"""A model version's manifest: what files it holds, each by content digest.

Guarantees:
- a ``Manifest`` is valid whenever it exists: its files are sorted by path with no path
  twice, every path is relative and stays inside the model (no ``..``, ``.``, empty or
  absolute component, no file where another file's directory is), every digest is
  ``sha256:<64 hex>`` and every size a whole number of bytes;
- ``to_json`` is canonical (sorted keys, no spaces, ASCII), so equal manifests give
  equal bytes and ``digest``, the sha256 of those bytes, names the version whatever
  order its files were found in;
- ``Manifest.from_json`` accepts exactly the bytes ``to_json`` writes: anything else
  (bad JSON, a missing or extra field, a wrong type, a path out of the model, another
  spelling of the same manifest) is a ``ManifestError`` saying what is wrong.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterable
from dataclasses import dataclass
from itertools import pairwise
from typing import Any, Final

from phalanx.domain.errors import ContentError

#: A content digest, as every digest of the store is written.
DIGEST: Final = re.compile(r"sha256:[0-9a-f]{64}")
#: The manifest format this module writes and reads.
VERSION: Final = 1
_ENTRY_KEYS: Final = frozenset({"path", "digest", "size", "executable"})


class ManifestError(ContentError):
    """A manifest (or a file entry of one) that is not valid: what is wrong with it."""


def _check_path(path: object) -> str:
    if not isinstance(path, str) or not path:
        raise ManifestError(f"a file path must be a non-empty string, not {path!r:.80}")
    parts = path.split("/")
    if "\0" in path or any(part in ("", ".", "..") for part in parts):
        raise ManifestError(
            f"file path {path!r:.200} does not stay inside the model: it must be relative, "
            "'/'-separated, without '..', '.' or empty components"
        )
    return path


@dataclass(frozen=True, slots=True, kw_only=True)
class FileEntry:
    """One file of a model: its relative ``path``, content ``digest``, ``size`` in bytes
    and whether it is ``executable``."""

    path: str
    digest: str
    size: int
    executable: bool

    def __post_init__(self) -> None:
        _check_path(self.path)
        if not isinstance(self.digest, str) or not DIGEST.fullmatch(self.digest):
            raise ManifestError(f"{self.path}: digest {self.digest!r:.80} is not sha256:<64 hex>")
        if type(self.size) is not int or self.size < 0:
            raise ManifestError(f"{self.path}: size {self.size!r:.40} is not a whole number >= 0")
        if type(self.executable) is not bool:
            raise ManifestError(f"{self.path}: executable {self.executable!r:.40} is not a bool")

    def to_dict(self) -> dict[str, Any]:
        """This entry as the manifest's JSON holds it."""
        return {
            "path": self.path,
            "digest": self.digest,
            "size": self.size,
            "executable": self.executable,
        }


@dataclass(frozen=True, slots=True, kw_only=True)
class Manifest:
    """The files of one model version, sorted by path (``Manifest.of`` sorts them)."""

    files: tuple[FileEntry, ...]

    def __post_init__(self) -> None:
        paths = [entry.path for entry in self.files]
        for before, after in pairwise(paths):
            if before >= after:
                why = "is there twice" if before == after else f"comes after {after!r:.200}"
                raise ManifestError(f"file path {before!r:.200} {why}: paths must be sorted, once")
        directories = {
            path.rsplit("/", n)[0] for path in paths for n in range(1, path.count("/") + 1)
        }
        clash = directories.intersection(paths)
        if clash:
            path = min(clash)
            raise ManifestError(f"{path!r:.200} is both a file and a directory of other files")

    @classmethod
    def of(cls, files: Iterable[FileEntry]) -> Manifest:
        """The manifest of ``files``, in any order."""
        return cls(files=tuple(sorted(files, key=lambda entry: entry.path)))

    @property
    def size(self) -> int:
        """The bytes of all its files."""
        return sum(entry.size for entry in self.files)

    @property
    def digest(self) -> str:
        """``sha256:<hex>`` of ``to_json()``: the version's name in the store."""
        return "sha256:" + hashlib.sha256(self.to_json()).hexdigest()

    def to_json(self) -> bytes:
        """The canonical bytes of this manifest."""
        document = {"version": VERSION, "files": [entry.to_dict() for entry in self.files]}
        return json.dumps(document, sort_keys=True, separators=(",", ":")).encode("ascii")

    @classmethod
    def from_json(cls, data: bytes) -> Manifest:
        """The manifest whose canonical bytes are ``data``; ``ManifestError`` otherwise."""
        try:
            document = json.loads(data)
        except (UnicodeDecodeError, ValueError) as error:
            raise ManifestError(f"a manifest is not JSON: {error}") from None
        if not isinstance(document, dict) or set(document) != {"version", "files"}:
            raise ManifestError("a manifest is an object of exactly 'version' and 'files'")
        if document["version"] != VERSION or type(document["version"]) is not int:
            raise ManifestError(f"manifest version {document['version']!r:.40} is not {VERSION}")
        if not isinstance(document["files"], list):
            raise ManifestError("a manifest's 'files' is a list")
        manifest = cls(files=tuple(_entry(item) for item in document["files"]))
        if manifest.to_json() != data:
            raise ManifestError("a manifest is not in its canonical form (as the store writes it)")
        return manifest


def _entry(item: object) -> FileEntry:
    if not isinstance(item, dict) or set(item) != _ENTRY_KEYS:
        raise ManifestError(
            "each file of a manifest is an object of exactly " + ", ".join(sorted(_ENTRY_KEYS))
        )
    return FileEntry(
        path=item["path"], digest=item["digest"], size=item["size"], executable=item["executable"]
    )
