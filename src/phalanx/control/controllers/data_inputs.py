"""The datasets a job reads, made ready before it is scheduled and handed to its tasks:
``DatasetInputs``, which the model fetcher (``controllers.model_fetch``) asks for each
job that names datasets, and the controller for each task it starts.

Guarantees of ``read`` then ``copy`` (outside the session ``read`` used):
- ``read`` answers None (the job waits) while a dataset the job names has never been
  listed;
- each dataset is pinned to its listing at that moment (or stays pinned to the listing
  the job names, when that is a listing of its source still kept); where tasks run on the
  server's host (``cache`` given), the job reads that copy in the host's cache
  (``data.cache.DatasetCache``), filled once from the source with the dataset's own
  secret (``data.copies``), every file of the listing at its listed size, a copy
  already there shared; where they run on other hosts (no ``cache``: Ray nodes), each
  task's node copies it there just before the task starts (``for_task``);
- what cannot be made ready (a dataset deleted, one whose source never listed, a
  secret deleted, a copy that fails or does not fit the cache) is a problem naming the
  dataset and why, never a secret's value (each is masked in what a store's error says).

``for_task`` gives what a task's node needs to copy the datasets the task's job is
pinned to, by the pinned listing (kept while a job not yet ended names it, however
often the dataset was listed since), with the dataset's credentials now.

``keep`` pins, in the host's cache, the copies the jobs not yet ended read (and unpins
the rest), so that making room for a new copy never evicts one a task reads; it
returns the digests those jobs are pinned to, whose listings the store keeps.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace

from phalanx.control.store import Session
from phalanx.control.store import datasets as stored
from phalanx.data.cache import DatasetCache
from phalanx.data.copies import CopyFailed, DatasetCopy
from phalanx.data.source import listing_digest
from phalanx.domain.errors import InvalidInput
from phalanx.spec.dataset import DatasetDocument

#: The values of a user's secret by key, or None when the user has no such secret.
SecretValues = Callable[[str, str], Mapping[str, bytes] | None]


@dataclass(frozen=True, slots=True)
class _Listed:
    """A dataset's copy as read in one session (no credentials yet), and its secret."""

    copy: DatasetCopy
    secret: str | None


class DatasetInputs:
    """See the module docstring. ``cache`` is the server's host's, where its executor
    runs tasks there; None where tasks run on other hosts (Ray nodes)."""

    def __init__(self, cache: DatasetCache | None, secret_values: SecretValues) -> None:
        self.cache = cache
        self._secret_values = secret_values
        self._pinned: set[str] = set()

    def read(
        self, session: Session, user: str, refs: Sequence[tuple[str, str | None]]
    ) -> tuple[list[_Listed], list[str]] | None:
        """What ``copy`` needs of each of ``user``'s datasets ``refs`` (name, and the
        listing it is pinned to already or None: its current one), and the problems
        found already (each naming its dataset); None while one of them waits for its
        first listing."""
        listed: list[_Listed] = []
        problems: list[str] = []
        first: dict[str, str | None] = {}
        for name, pin in refs:
            first.setdefault(name, pin)
        for name, pinned in first.items():
            row = stored.get(session, user, name)
            if row is None:
                problems.append(f"dataset {name}: it was deleted")
            elif pinned is None and row.digest is None and row.phase == stored.FAILED:
                problems.append(f"dataset {name}: its source could not be listed: {row.message}")
            elif pinned is None and row.digest is None:
                return None
            else:
                found = self._listed(session, user, name, pinned or row.digest or "")
                if isinstance(found, str):
                    problems.append(found)
                else:
                    listed.append(found)
        return listed, problems

    def copy(self, user: str, listed: Sequence[_Listed]) -> tuple[dict[str, str], list[str]]:
        """The digest each of ``listed`` is pinned to (copied into the host's cache, when
        there is one), and the problems (each naming its dataset)."""
        pins: dict[str, str] = {}
        problems: list[str] = []
        for dataset in listed:
            name, digest = dataset.copy.name, dataset.copy.digest
            try:
                copy = self._with_credentials(user, dataset)
                if self.cache is not None:
                    if digest not in self._pinned:  # held from the moment it lands
                        self.cache.pin(digest)
                        self._pinned.add(digest)
                    copy.into(self.cache)
            except (CopyFailed, InvalidInput) as error:
                problems.append(f"dataset {name} ({digest}): {error}")
            else:
                pins[name] = digest
        return pins, problems

    def for_task(
        self, session: Session, user: str, pinned: Sequence[tuple[str, str | None]]
    ) -> tuple[DatasetCopy, ...]:
        """What a task's node copies for the datasets ``pinned`` (``(name, digest)``, as
        the task's role names them), with their credentials. Raises ``InvalidInput``
        naming the dataset when one cannot be read any more (the start fails with it)."""
        copies: list[DatasetCopy] = []
        for name, digest in pinned:
            if digest is None:
                raise InvalidInput(
                    f"dataset {name} is not pinned to a listing",
                    field="datasets",
                    fix="submit the job again",
                )
            found = self._listed(session, user, name, digest)
            if isinstance(found, str):
                raise InvalidInput(found, field="datasets", fix="submit the job again")
            copies.append(self._with_credentials(user, found))
        return tuple(copies)

    def keep(self, readers: Iterable[Mapping[str, object]]) -> set[str]:
        """Pin the copies the job ``readers`` (documents of jobs not yet ended) read, and
        unpin the others this pinned; the digests those jobs are pinned to."""
        wanted = {digest for document in readers for digest in _pinned_digests(document)}
        if self.cache is None:
            return wanted
        for digest in wanted - self._pinned:
            self.cache.pin(digest)
        for digest in self._pinned - wanted:
            self.cache.unpin(digest)
        self._pinned = set(wanted)
        return wanted

    def _listed(self, session: Session, user: str, name: str, digest: str) -> _Listed | str:
        """``user``'s dataset ``name`` pinned to listing ``digest``, or why it cannot be."""
        row = stored.get(session, user, name)
        files = stored.listed_files(session, digest)
        if row is None:
            return f"dataset {name}: it was deleted"
        if files is None:
            return f"dataset {name}: its listing {digest} is not kept (never made, or forgotten)"
        spec = DatasetDocument.model_validate(row.document).spec
        if listing_digest(spec.url, files) != digest:  # another source's (another user's)
            return f"dataset {name}: listing {digest} is not of its source {spec.url}"
        size = sum(size for _, size, _ in files)
        copy = DatasetCopy(name=name, url=spec.url, digest=digest, size=size, files=files)
        return _Listed(copy, spec.secret)

    def _with_credentials(self, user: str, dataset: _Listed) -> DatasetCopy:
        """``dataset``'s copy with its secret's values; ``InvalidInput`` when it is gone."""
        if dataset.secret is None:
            return dataset.copy
        values = self._secret_values(user, dataset.secret)
        if values is None:
            raise InvalidInput(f"its secret {dataset.secret!r} was deleted", fix="create it again")
        return replace(dataset.copy, credentials=values)


def _pinned_digests(document: Mapping[str, object]) -> set[str]:
    """The listing digests a stored job document's roles are pinned to."""
    spec = document.get("spec")
    roles = spec.get("roles", []) if isinstance(spec, dict) else []
    found: set[str] = set()
    for role in roles if isinstance(roles, list) else []:
        for reference in role.get("datasets", []) if isinstance(role, dict) else []:
            digest = str(reference).partition("@")[2]
            if digest:
                found.add(digest)
    return found
