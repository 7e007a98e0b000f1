"""Model versions copied out for the tasks that read them: ``ModelCache``.

Guarantees:
- the cache root is a passage (the server's own, mode 0711): a task can enter a version
  it was given the path of, but cannot list which versions are there; each version sits
  at ``ROOT/<hex of its manifest digest>`` (64 hex digits a user only learns for their
  own versions);
- a version's directory appears whole or not at all: it is written under a private
  temporary name, every file verified against its digest (``ModelStore.materialize``),
  then renamed into place (two copies made at once: the first to land stays), read-only (files 0444 or 0555, directories 0555), so a
  task sees exactly the bytes registered and cannot change them for another;
- ``collect`` removes the versions not kept, and any temporary left by a crash.
"""

from __future__ import annotations

import os
import re
import secrets
import shutil
import stat
from collections.abc import Iterable
from pathlib import Path
from typing import Final

from phalanx.domain.errors import InvalidInput
from phalanx.models.store import ModelStore
from phalanx.tenantfs import passage

#: The prefix of a version's directory while it is written.
_PARTIAL: Final = ".partial-"
_PREFIX: Final = "sha256:"
_HEX: Final = re.compile(r"[0-9a-f]{64}")


def _hex(digest: str) -> str:
    hexdigest = digest.removeprefix(_PREFIX)
    if not digest.startswith(_PREFIX) or _HEX.fullmatch(hexdigest) is None:
        raise InvalidInput(
            f"{digest!r} is not a sha256 digest",
            field="digest",
            fix="give sha256: and 64 hex digits",
        )
    return hexdigest


class ModelCache:
    """The versions copied out under ``root`` (see the module docstring)."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def path(self, digest: str) -> Path:
        """Where version ``digest`` is (or will be) for its tasks."""
        return self.root / _hex(digest)

    def ensure(self, store: ModelStore, digest: str) -> Path:
        """Version ``digest`` copied out of ``store`` and verified, unless it is already
        there; its path. Raises what ``ModelStore.materialize`` raises, and ``OSError``."""
        passage(self.root)  # the server's own, 0711, or OSError
        target = self.path(digest)
        if target.is_dir() and not target.is_symlink():
            return target
        partial = self.root / f"{_PARTIAL}{secrets.token_hex(8)}"
        try:
            store.materialize(digest, partial)
            partial.chmod(0o555)
            os.rename(partial, target)
        except OSError:
            _remove(partial)
            if target.is_dir() and not target.is_symlink():
                return target  # another copy of the same version got there first
            raise
        except BaseException:
            _remove(partial)
            raise
        return target

    def collect(self, keep: Iterable[str]) -> int:
        """Remove every version not among the digests ``keep``, and temporaries; how many
        directories went."""
        if not self.root.is_dir():
            return 0
        kept = {_hex(digest) for digest in keep}
        removed = 0
        for entry in os.scandir(self.root):
            if entry.name not in kept:
                _remove(Path(entry.path))
                removed += 1
        return removed


def _remove(path: Path) -> None:
    """Remove ``path`` and what is under it, read-only directories included."""
    if path.is_symlink() or not path.is_dir():
        path.unlink(missing_ok=True)
        return
    for directory, _, _ in os.walk(path):
        os.chmod(directory, stat.S_IRWXU)
    shutil.rmtree(path, ignore_errors=True)
