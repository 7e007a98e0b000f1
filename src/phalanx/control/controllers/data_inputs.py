"""The datasets a job reads, made ready on the server's host before it is scheduled:
``DatasetInputs``, which the model fetcher (``controllers.model_fetch``) asks for each
job that names datasets.

Guarantees of ``read`` then ``copy`` (outside the session ``read`` used):
- ``read`` answers None (the job waits) while a dataset the job names has never been
  listed;
- each dataset is pinned to its listing at that moment: the job reads that copy, in
  the node's cache (``data.cache.DatasetCache``), filled once from the source with the
  dataset's own secret (``data.source``), every file of the listing at its listed size;
  a copy already there is shared;
- what cannot be made ready (a dataset deleted, one whose source never listed, a copy
  that fails or does not fit the cache) is a problem naming the dataset and why, never
  a secret's value (each is masked in what a store's error says).

``keep`` pins, in the cache, the copies the jobs not yet ended read (and unpins the
rest), so that making room for a new copy never evicts one a task reads.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass

from phalanx.control.store import Session
from phalanx.control.store import datasets as stored
from phalanx.data.cache import DatasetCache
from phalanx.data.source import copy_listed, reach
from phalanx.domain.errors import ContentError, InvalidInput
from phalanx.spec.dataset import DatasetDocument

#: The values of a user's secret by key, or None when the user has no such secret.
SecretValues = Callable[[str, str], Mapping[str, bytes] | None]


@dataclass(frozen=True, slots=True)
class _Listed:
    """What a copy needs of a dataset, read in one session."""

    name: str
    url: str
    secret: str | None
    digest: str
    size: int
    files: tuple[tuple[str, int, str], ...]


class DatasetInputs:
    """See the module docstring. ``cache`` is None where tasks run on other hosts (their
    datasets are not yet copied there: such a job is refused with the reason)."""

    def __init__(self, cache: DatasetCache | None, secret_values: SecretValues) -> None:
        self.cache = cache
        self._secret_values = secret_values
        self._pinned: set[str] = set()

    def read(
        self, session: Session, user: str, names: Sequence[str]
    ) -> tuple[list[_Listed], list[str]] | None:
        """What ``copy`` needs of each of ``user``'s datasets ``names``, and the problems
        found already (each naming its dataset); None while one of them waits for its
        first listing."""
        listed: list[_Listed] = []
        problems: list[str] = []
        for name in dict.fromkeys(names):
            row = stored.get(session, user, name)
            if row is None:
                problems.append(f"dataset {name}: it was deleted")
            elif row.digest is None and row.phase == stored.FAILED:
                problems.append(f"dataset {name}: its source could not be listed: {row.message}")
            elif row.digest is None:
                return None
            else:
                spec = DatasetDocument.model_validate(row.document).spec
                files = tuple((str(p), int(s), str(v)) for p, s, v in row.listing)
                listed.append(_Listed(name, spec.url, spec.secret, row.digest, row.size, files))
        return listed, problems

    def copy(self, user: str, listed: Sequence[_Listed]) -> tuple[dict[str, str], list[str]]:
        """The digest each of ``listed`` is pinned to, its copy in the cache, and the
        problems (each naming its dataset)."""
        pins: dict[str, str] = {}
        problems: list[str] = []
        for dataset in listed:
            why = self._copy(user, dataset)
            if why is None:
                pins[dataset.name] = dataset.digest
            else:
                problems.append(f"dataset {dataset.name} ({dataset.digest}): {why}")
        return pins, problems

    def _copy(self, user: str, dataset: _Listed) -> str | None:
        """Why ``dataset`` cannot be copied into the cache (None: it is there)."""
        if self.cache is None:
            return (
                "datasets reach tasks on the server's host only, not Ray nodes yet; fix: "
                "run the job on a server with the local executor"
            )
        values: Mapping[str, bytes] | None = None
        if dataset.secret is not None:
            values = self._secret_values(user, dataset.secret)
            if values is None:
                return f"its secret {dataset.secret!r} was deleted; fix: create it again"
        if dataset.digest not in self._pinned:  # held from the moment it lands
            self.cache.pin(dataset.digest)
            self._pinned.add(dataset.digest)
        try:
            fs, root = reach(dataset.url, values)
            self.cache.ensure(
                dataset.digest,
                dataset.size,
                lambda dest: copy_listed(fs, root, dataset.files, dest),
            )
        except (InvalidInput, ContentError) as error:
            return masked(str(error), values)
        except Exception as error:  # the store's own errors (s3fs, botocore, a network)
            return masked(f"it could not be copied: {error}", values)
        return None

    def keep(self, readers: Iterable[Mapping[str, object]]) -> None:
        """Pin the copies the job ``readers`` (documents of jobs not yet ended) read, and
        unpin the others this pinned."""
        if self.cache is None:
            return
        wanted = {digest for document in readers for digest in _pinned_digests(document)}
        for digest in wanted - self._pinned:
            self.cache.pin(digest)
        for digest in self._pinned - wanted:
            self.cache.unpin(digest)
        self._pinned = wanted


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


def masked(message: str, values: Mapping[str, bytes] | None) -> str:
    """``message`` with every value of the secret ``values`` replaced by ``***``."""
    for value in (values or {}).values():
        text = value.decode(errors="replace")
        if len(text) >= 4:
            message = message.replace(text, "***")
    return message[:2000]
