"""The datasets a step's job reads, pinned when its unit starts: one listing for the key
and for the job.

A step names datasets of the run's user (a command step's ``datasets``, a job step's
roles' ``datasets``: ``StepNode.datasets``). When a unit starts, the workflow
controller reads each one's state in the store (``Listing``) and asks ``pins``:

- every dataset listed (it has a digest; after a failed relisting, the last good one,
  which jobs go on reading): the pins, ``{name: "sha256:..."}``. The same pins go into
  the unit's cache key (``cache.key_material``) and onto its job's roles
  (``jobs.job_spec``: ``NAME@sha256:...``), so a cached result was made from the data
  its key names;
- one never listed yet (its first listing under way): ``Waiting``, naming it; the unit
  stays Pending and is asked again on a later tick, as a job waits for its dataset's
  first listing (a retry's job names it unpinned instead: the fetcher waits for it);
- one the run's user has no dataset of that name, or one whose only listing failed:
  ``InvalidInput`` naming the step's field, the dataset and the fix; the unit fails
  (as the fetcher fails a job whose dataset's listing failed).

The data a job reads is fixed when the server copies it, after the job was stored: a
dataset listed again in between is read at its new listing. So the listings a unit's
key was made with are recorded on its job (``keyed``, the annotation ``KEYED``), and
``disagreement`` compares them with the listings the job was pinned to when it ran: a
unit whose job read other data than its key names is not written to the cache.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from phalanx.domain.errors import InvalidInput
from phalanx.spec.pipeline.dag import StepNode

#: The annotation of a cached unit's job: the listings its key was made with,
#: ``NAME@sha256:...`` by name, comma-separated.
KEYED: Final = "phalanx.run/datasets"


@dataclass(frozen=True, slots=True, kw_only=True)
class Listing:
    """What the store holds of one dataset: its listing's digest (None: never listed)
    and why its last listing failed ("" when it did not)."""

    digest: str | None
    failure: str = ""


@dataclass(frozen=True, slots=True)
class Waiting:
    """The unit waits for the first listing of these datasets."""

    names: tuple[str, ...]

    @property
    def reason(self) -> str:
        """What the unit's record says while it waits."""
        first = self.names[0]
        return (
            f"waiting for the first listing of dataset {', '.join(self.names)} "
            f"(phalanx describe dataset {first})"
        )


def dataset_fields(node: StepNode) -> dict[str, str]:
    """Where in the document each dataset the step reads is named:
    ``steps.count.datasets[0]``, or ``steps.dist.job.roles[1].datasets[0]`` (the first
    role naming it); ``finally.NAME...`` for a finally step."""
    step = f"{'finally' if node.final else 'steps'}.{node.name}"
    if node.job is None:
        return {name: f"{step}.datasets[{i}]" for i, name in enumerate(node.datasets)}
    found: dict[str, str] = {}
    for r, role in enumerate(node.job.roles):
        for d, reference in enumerate(role.datasets):
            name = reference.partition("@")[0]
            found.setdefault(name, f"{step}.job.roles[{r}].datasets[{d}]")
    return found


def pins(
    node: StepNode, listings: Mapping[str, Listing | None], *, user: str
) -> tuple[dict[str, str], Waiting | None]:
    """The digest each listed dataset of ``node`` is pinned to, from ``listings`` (each
    name's state; None: ``user`` has no such dataset), and ``Waiting`` for those never
    listed (None when there is none). Raises ``InvalidInput`` naming the field and the
    fix for a dataset that is not there or whose only listing failed (the first,
    in the step's order)."""
    fields = dataset_fields(node)
    pinned: dict[str, str] = {}
    waiting: list[str] = []
    for name in node.datasets:
        listing = listings.get(name)
        if listing is None:
            raise InvalidInput(
                f"user {user} has no dataset {name!r}",
                field=fields[name],
                fix="create it (phalanx apply -f DATASET.yaml), or name one of theirs "
                "(phalanx get datasets)",
            )
        if listing.digest is not None:
            pinned[name] = listing.digest
        elif listing.failure:
            raise InvalidInput(
                f"dataset {name} could not be listed: {listing.failure}"[:1500],
                field=fields[name],
                fix=f"correct its source or secret, then phalanx dataset refresh {name}",
            )
        else:
            waiting.append(name)
    return pinned, (Waiting(tuple(waiting)) if waiting else None)


def keyed(pinned: Mapping[str, str]) -> str:
    """The value of the ``KEYED`` annotation for the listings ``pinned``."""
    return ",".join(f"{name}@{pinned[name]}" for name in sorted(pinned))


def _keyed_of(document: Mapping[str, Any]) -> dict[str, str] | None:
    """The listings a stored job document's ``KEYED`` annotation names; None without it."""
    metadata = document.get("metadata")
    annotations = metadata.get("annotations") if isinstance(metadata, dict) else None
    text = annotations.get(KEYED) if isinstance(annotations, dict) else None
    if not isinstance(text, str):
        return None
    found: dict[str, str] = {}
    for reference in filter(None, text.split(",")):
        name, _, digest = reference.partition("@")
        found[name] = digest
    return found


def _pinned_of(document: Mapping[str, Any]) -> dict[str, str]:
    """The listing each dataset a stored job document's roles name is pinned to ("" for
    one not pinned)."""
    spec = document.get("spec")
    roles = spec.get("roles") if isinstance(spec, dict) else None
    found: dict[str, str] = {}
    for role in roles if isinstance(roles, list) else []:
        for reference in role.get("datasets", []) if isinstance(role, dict) else []:
            name, _, digest = str(reference).partition("@")
            found[name] = digest
    return found


def keyed_by(document: Mapping[str, Any]) -> str | None:
    """The ``KEYED`` annotation of a stored job document, as written (None without it):
    what the next attempt of the same unit carries over."""
    found = _keyed_of(document)
    return None if found is None else keyed(found)


def disagreement(node: StepNode, document: Mapping[str, Any]) -> str | None:
    """Why the job of ``document`` (as stored when it ended) read other data than its
    unit's key names, or None when it read just that: for each dataset of ``node``, the
    listing the job was pinned to and the one its ``KEYED`` annotation names."""
    if not node.datasets:
        return None
    key = _keyed_of(document)
    if key is None:
        return "the listings of its datasets that its key was made with are not on its job"
    read = _pinned_of(document)
    for name in node.datasets:
        if read.get(name, "") != key.get(name):
            return (
                f"its job read dataset {name} at {read.get(name) or 'no pinned listing'}, "
                f"but its key was made with {key.get(name) or 'none'} (listed again meanwhile)"
            )
    return None
