"""One dataset as a node copies it into its cache: ``DatasetCopy``.

The server pins a job to a dataset's listing; whatever host the job's task lands on
(the server's own, a Ray node) makes its copy from this value alone: the source, the
pinned listing, and the dataset's own credentials.

Guarantees of ``DatasetCopy.into``:
- the copy lands in the cache under the listing's digest, whole or not at all
  (``DatasetCache.ensure``), every file of the listing at its listed size
  (``source.copy_listed``), read with the dataset's own credentials only
  (``source.reach``); a copy already there is shared;
- what fails is raised as ``ContentError`` (or ``InvalidInput``) whose message names
  why and never holds a credential's value (``masked``); ``retriable`` on the error
  says whether asking again may help (the source or the network failed, or the cache
  is full of copies tasks read now; not the data);
- the credentials are never part of the value's ``repr``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from phalanx.data.cache import CacheFull, DatasetCache
from phalanx.data.source import copy_listed, reach
from phalanx.domain.errors import ContentError, InvalidInput


class CopyFailed(ContentError):
    """A dataset that could not be copied into a node's cache; ``retriable`` when the
    source or the network failed (not the data or the cache)."""

    def __init__(self, message: str, *, retriable: bool) -> None:
        self.retriable = retriable
        super().__init__(message)


@dataclass(frozen=True, slots=True, kw_only=True)
class DatasetCopy:
    """Dataset ``name`` pinned to listing ``digest``: ``files`` (``(path, size,
    version)`` each) below ``url``, ``size`` bytes in all, read with ``credentials``
    (a secret's keys and values; None: anonymously)."""

    name: str
    url: str
    digest: str
    size: int
    files: tuple[tuple[str, int, str], ...]
    credentials: Mapping[str, bytes] | None = field(default=None, repr=False)

    def into(self, cache: DatasetCache) -> Path:
        """The copy's directory in ``cache``, filled from the source unless it is there
        (see the module docstring). Raises ``CopyFailed``."""
        try:
            fs, root = reach(self.url, self.credentials)
            return cache.ensure(
                self.digest, self.size, lambda dest: copy_listed(fs, root, self.files, dest)
            )
        except CacheFull as error:  # room comes back as the tasks reading the cache end
            raise CopyFailed(str(error), retriable=True) from None
        except (InvalidInput, ContentError) as error:
            raise CopyFailed(masked(str(error), self.credentials), retriable=False) from None
        except Exception as error:  # the store's own errors (s3fs, botocore, a network)
            message = masked(f"it could not be copied: {error}", self.credentials)
            raise CopyFailed(message, retriable=True) from None


def masked(message: str, values: Mapping[str, bytes] | None) -> str:
    """``message`` with every value of the secret ``values`` replaced by ``***``."""
    for value in (values or {}).values():
        text = value.decode(errors="replace")
        if len(text) >= 4:
            message = message.replace(text, "***")
    return message[:2000]
