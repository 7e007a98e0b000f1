"""The datasets cached on one node, under a byte quota: ``DatasetCache``.

Guarantees:
- the root is a passage (the server's own, mode 0711): a task can enter an entry it was
  given the path of, but cannot list which are there; entry ``sha256:<hex>`` (a dataset
  listing's digest) sits at ``ROOT/<hex>``, its index (size and last use, mode 0600) at
  ``ROOT/<hex>.json``;
- an entry appears whole or not at all: it is filled under a private temporary name,
  holds exactly the bytes declared (regular files and directories only, or it is
  refused), is made read-only (files 0444 or 0555, directories 0555), then renamed into
  place and indexed; an entry counts only with both its directory and its index, so a
  crash leaves nothing a later cache takes for an entry (``clean`` removes what it left);
- the entries held and being filled never take more than the quota: before a fill would
  take them above the high watermark, the least recently used entries that are not
  pinned are evicted until they are at the low one (counting the fill); a fill that
  does not fit even then is refused (``CacheFull``) and evicts nothing;
- a pinned entry (a task reads it) is never evicted, nor one being filled; pinning a
  key before ``ensure`` holds the entry from the moment it lands;
- one fill of a key at a time: an ``ensure`` of a key being filled waits for that fill
  and returns its entry, or fills itself if that fill failed;
- a new cache on the same root knows the entries, their sizes and last uses.

One process owns a root; its methods may be called from any number of threads. A fill
runs outside the cache's lock: it blocks neither lookups nor fills of other keys.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import shutil
import stat
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from phalanx.domain.errors import ContentError, InvalidInput
from phalanx.tenantfs import kind_of, passage

#: Writes an entry's files under the (empty, new) directory it is given; raises on failure.
Fill = Callable[[Path], None]

#: The prefix of a temporary in the root: an entry being filled, an index being written.
_PARTIAL: Final = ".partial-"
#: The prefix of an evicted entry's directory while it is removed.
_EVICTED: Final = ".evicted-"
_PREFIX: Final = "sha256:"
_HEX: Final = re.compile(r"[0-9a-f]{64}")
_FIX: Final = "give sha256: and 64 lowercase hex digits (a dataset listing's digest)"


class CacheFull(ContentError):
    """A dataset that does not fit in a node's cache, even with every entry that is not
    pinned evicted: its ``size``, the ``quota`` and the ``pinned`` bytes."""

    def __init__(self, message: str, *, size: int, quota: int, pinned: int) -> None:
        self.size, self.quota, self.pinned = size, quota, pinned
        super().__init__(message)


@dataclass(frozen=True, slots=True, kw_only=True)
class CacheLimits:
    """How much a cache holds: ``quota`` bytes; once a fill would take it above
    ``high`` (a fraction of the quota), entries are evicted down to ``low``."""

    quota: int
    high: float = 0.95
    low: float = 0.8

    def __post_init__(self) -> None:
        if self.quota <= 0:
            raise InvalidInput(
                f"{self.quota} bytes is no quota", field="quota", fix="give a positive size"
            )
        fix = "give watermarks with 0 < low < high <= 1"
        if not 0 < self.high <= 1:
            raise InvalidInput(f"{self.high} is not in (0, 1]", field="high", fix=fix)
        if not 0 < self.low < self.high:
            raise InvalidInput(f"{self.low} is not in (0, high={self.high})", field="low", fix=fix)


@dataclass(frozen=True, slots=True, kw_only=True)
class CacheEntry:
    """A complete entry: its ``key``, ``size`` in bytes, ``last_used`` (the cache's
    clock) and how many times it is ``pinned``."""

    key: str
    size: int
    last_used: float
    pinned: int


@dataclass(frozen=True, slots=True)
class _Index:
    """What ``<hex>.json`` holds."""

    size: int
    last_used: float


def _hex(key: str) -> str:
    hexdigest = key.removeprefix(_PREFIX)
    if not key.startswith(_PREFIX) or _HEX.fullmatch(hexdigest) is None:
        raise InvalidInput(f"{key!r} is not a sha256 digest", field="key", fix=_FIX)
    return hexdigest


class DatasetCache:
    """The datasets cached under ``root`` (see the module docstring)."""

    def __init__(
        self, root: Path, limits: CacheLimits, *, clock: Callable[[], float] = time.time
    ) -> None:
        self.root, self.limits, self._clock = root, limits, clock
        passage(root)  # the server's own, 0711, or OSError
        self._changed = threading.Condition(threading.Lock())  # guards all below
        #: The complete entries by hex, least recently used first.
        self._entries: OrderedDict[str, _Index] = OrderedDict(
            sorted(self._read_indexes().items(), key=lambda item: item[1].last_used)
        )
        self._pins: dict[str, int] = {}
        #: The sizes of the fills under way, by hex.
        self._filling: dict[str, int] = {}
        #: The temporaries in the root this process is using (``clean`` leaves them).
        self._own: set[str] = set()

    def path(self, key: str) -> Path:
        """Where entry ``key`` is (or will be)."""
        return self.root / _hex(key)

    def lookup(self, key: str) -> Path | None:
        """Entry ``key``'s path if it is complete here (it is used now), else None."""
        hexdigest = _hex(key)
        with self._changed:
            return self._touch(hexdigest)

    def ensure(self, key: str, size: int, fill: Fill) -> Path:
        """Entry ``key``, filled by ``fill`` with ``size`` bytes unless it is here; used
        now. Raises ``CacheFull`` when it does not fit, ``ContentError`` when ``fill``
        writes other than ``size`` bytes or other than files and directories, and what
        ``fill`` raises; then nothing of the fill is left."""
        hexdigest = _hex(key)
        if size < 0:
            raise InvalidInput(f"{size} is not a size", field="size", fix="give bytes, >= 0")
        with self._changed:
            while hexdigest in self._filling:
                self._changed.wait()
            found = self._touch(hexdigest)
            if found is not None:
                return found
            evicted = self._make_room(key, size)
            partial = self.root / f"{_PARTIAL}{secrets.token_hex(8)}"
            self._filling[hexdigest] = size
            self._own.add(partial.name)
        try:
            self._dispose(evicted)
            os.mkdir(partial, 0o700)
            fill(partial)
            _seal(partial, key, size)
            with self._changed:
                return self._install(hexdigest, partial, size)
        except BaseException:
            _remove(partial)
            raise
        finally:
            with self._changed:
                del self._filling[hexdigest]
                self._own.discard(partial.name)
                self._changed.notify_all()

    def pin(self, key: str) -> None:
        """Hold entry ``key`` (here or still to be filled) against eviction, once more."""
        hexdigest = _hex(key)
        with self._changed:
            self._pins[hexdigest] = self._pins.get(hexdigest, 0) + 1

    def unpin(self, key: str) -> None:
        """Release one ``pin`` of entry ``key``."""
        hexdigest = _hex(key)
        with self._changed:
            count = self._pins.get(hexdigest, 0)
            if count == 0:
                raise InvalidInput(f"{key} is not pinned", field="key", fix="unpin once per pin")
            if count == 1:
                del self._pins[hexdigest]
            else:
                self._pins[hexdigest] = count - 1

    def evict(self, key: str) -> bool:
        """Remove entry ``key`` now if it is here and not pinned; whether it was."""
        hexdigest = _hex(key)
        with self._changed:
            if hexdigest not in self._entries or hexdigest in self._pins:
                return False
            evicted = self._detach(hexdigest)
        self._dispose([evicted])
        return True

    def entries(self) -> list[CacheEntry]:
        """The complete entries, least recently used first."""
        with self._changed:
            return [
                CacheEntry(
                    key=_PREFIX + hexdigest,
                    size=index.size,
                    last_used=index.last_used,
                    pinned=self._pins.get(hexdigest, 0),
                )
                for hexdigest, index in self._entries.items()
            ]

    def held(self) -> frozenset[str]:
        """The keys of the complete entries (what the engine's locality reads)."""
        with self._changed:
            return frozenset(_PREFIX + hexdigest for hexdigest in self._entries)

    def usage(self) -> int:
        """The bytes the complete entries hold."""
        with self._changed:
            return sum(index.size for index in self._entries.values())

    def clean(self) -> int:
        """Remove from the root what is not a complete entry (temporaries and index-less
        directories a crash left, unreadable indexes); how many went. Call it at start."""
        with self._changed:
            kept = {*self._entries, *(f"{h}.json" for h in self._entries), *self._own}
            leftovers = [Path(e.path) for e in os.scandir(self.root) if e.name not in kept]
            for leftover in leftovers:
                _remove(leftover)
        return len(leftovers)

    # The methods below are called with the lock held.

    def _touch(self, hexdigest: str) -> Path | None:
        """Mark the entry used now, in its index too; its path, or None if not here."""
        index = self._entries.get(hexdigest)
        if index is None:
            return None
        index = _Index(index.size, self._clock())
        self._write_index(hexdigest, index)
        self._entries[hexdigest] = index
        self._entries.move_to_end(hexdigest)
        return self.root / hexdigest

    def _make_room(self, key: str, size: int) -> list[Path]:
        """Detach what the watermarks say to evict before a fill of ``size`` bytes (none
        when it does not fit anyway: ``CacheFull``); the directories to remove."""
        quota, reserved = self.limits.quota, sum(self._filling.values())
        held = sum(index.size for index in self._entries.values()) + reserved + size
        if held <= self.limits.high * quota:
            return []
        pinned = {h: i.size for h, i in self._entries.items() if h in self._pins}
        if sum(pinned.values()) + reserved + size > quota:
            held_by = ", ".join(f"{_PREFIX}{h} ({n} bytes)" for h, n in pinned.items())
            raise CacheFull(
                f"{key} needs {size} bytes and the cache holds {quota}: "
                f"{sum(pinned.values())} bytes are pinned ({held_by or 'none'}) and "
                f"{reserved} being filled",
                size=size,
                quota=quota,
                pinned=sum(pinned.values()),
            )
        evicted: list[Path] = []
        for hexdigest in [h for h in self._entries if h not in self._pins]:
            if held <= self.limits.low * quota:
                break
            held -= self._entries[hexdigest].size
            evicted.append(self._detach(hexdigest))
        return evicted

    def _detach(self, hexdigest: str) -> Path:
        """Unindex the entry and move its directory aside; where it went, to remove."""
        del self._entries[hexdigest]
        (self.root / f"{hexdigest}.json").unlink(missing_ok=True)
        aside = self.root / f"{_EVICTED}{secrets.token_hex(8)}"
        os.rename(self.root / hexdigest, aside)
        self._own.add(aside.name)
        return aside

    def _install(self, hexdigest: str, partial: Path, size: int) -> Path:
        """Rename the sealed ``partial`` into place and index it; its path."""
        target = self.root / hexdigest
        _remove(target)  # a crash's leftover, if anything: not indexed, so no entry
        os.rename(partial, target)
        index = _Index(size, self._clock())
        try:
            self._write_index(hexdigest, index)
        except BaseException:
            _remove(target)
            raise
        self._entries[hexdigest] = index
        return target

    def _write_index(self, hexdigest: str, index: _Index) -> None:
        """Write ``<hex>.json`` whole (a temporary, then renamed over), mode 0600."""
        temporary = self.root / f"{_PARTIAL}{secrets.token_hex(8)}.json"
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC
        try:
            with os.fdopen(os.open(temporary, flags, 0o600), "w") as file:
                json.dump({"size": index.size, "last_used": index.last_used}, file)
            os.replace(temporary, self.root / f"{hexdigest}.json")
        except BaseException:
            temporary.unlink(missing_ok=True)
            raise

    # The methods below are called without the lock.

    def _read_indexes(self) -> dict[str, _Index]:
        """The complete entries on disk: a directory and a readable index each."""
        found: dict[str, _Index] = {}
        for entry in os.scandir(self.root):
            hexdigest = entry.name.removesuffix(".json")
            if hexdigest == entry.name or _HEX.fullmatch(hexdigest) is None:
                continue
            directory = self.root / hexdigest
            if directory.is_symlink() or not directory.is_dir():
                continue
            try:
                data = json.loads(Path(entry.path).read_text())
                size, last_used = data["size"], data["last_used"]
            except (OSError, ValueError, TypeError, KeyError):
                continue
            if type(size) is int and size >= 0 and isinstance(last_used, int | float):
                found[hexdigest] = _Index(size, float(last_used))
        return found

    def _dispose(self, directories: list[Path]) -> None:
        """Remove directories moved aside by ``_detach``."""
        for directory in directories:
            _remove(directory)
            with self._changed:
                self._own.discard(directory.name)


def _seal(partial: Path, key: str, size: int) -> None:
    """Check that ``partial`` holds ``size`` bytes, in regular files and directories
    only, and make it read-only (directories 0555, files 0444, or 0555 if executable)."""
    written = 0
    for directory, subdirectories, files in os.walk(partial):
        os.chmod(directory, 0o555)
        for name in [*subdirectories, *files]:  # a link to a directory is among the first
            path = os.path.join(directory, name)
            status = os.lstat(path)
            if stat.S_ISDIR(status.st_mode):
                continue  # walked in its turn
            if not stat.S_ISREG(status.st_mode):
                what = os.path.relpath(path, partial)
                raise ContentError(f"the fill of {key} left {what}, {kind_of(status.st_mode)}")
            written += status.st_size
            os.chmod(path, 0o555 if status.st_mode & 0o111 else 0o444)
    if written != size:
        raise ContentError(f"the fill of {key} wrote {written} bytes, not the {size} declared")


def _remove(path: Path) -> None:
    """Remove ``path`` and what is under it, read-only directories included."""
    if path.is_symlink() or not path.is_dir():
        path.unlink(missing_ok=True)
        return
    for directory, _, _ in os.walk(path):
        os.chmod(directory, stat.S_IRWXU)
    shutil.rmtree(path, ignore_errors=True)
