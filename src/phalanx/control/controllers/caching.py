"""The step cache as the workflow controller uses it: a unit's key, the entry it may be
served from, and the entry written when it succeeds (``CacheEntryRow``).

The key is ``phalanx.workflow.cache``'s: this module gathers what goes into it that
needs I/O, the content hashes of the artifacts the step reads and of its
``cache.files``, and the state of the datasets it reads (``listings``: what
``workflow.datasets.pins`` pins the unit's key and job to). A cached unit's outputs are
the producing unit's, so a downstream step reads the artifact where the producing run
wrote it (``WORKSPACE/runs/RUN/STEP/NAME``);
an entry with an artifact gone is a miss (never an error), and the step runs again and
writes its entry anew. A failure is never written, so never served. A key includes the
run's user, so an entry is made, replaced and served for that user's runs alone (its
artifacts are theirs), and every file hashed is read as that user
(``workflow.contents``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from phalanx.control.store import Session, cache
from phalanx.control.store import datasets as stored_datasets
from phalanx.control.store import jobs as stored_jobs
from phalanx.control.store.models import CacheEntryRow
from phalanx.spec.pipeline.dag import Graph, StepNode
from phalanx.spec.pipeline.templates import Context, Value
from phalanx.tenantfs import TenantPathRefused
from phalanx.workflow.cache import (
    CacheEntry,
    KeyMaterial,
    artifact_references,
    key_material,
    servable,
)
from phalanx.workflow.contents import Access, MissingContent, written
from phalanx.workflow.datasets import Listing, Waiting, disagreement, keyed_by, pins

#: A run's cache modes: read and write entries; write only; neither.
MODES = ("use", "refresh", "off")


def _referenced(context: Context, ref: str) -> Value:
    """The value of ``inputs.NAME`` or ``steps.STEP.outputs.NAME`` in ``context``."""
    parts = ref.split(".")
    if parts[0] == "inputs":
        return context.inputs.get(parts[1])
    return context.steps.get(parts[1], {}).get(parts[3])


def _urls(value: Value) -> list[Value]:
    return value if isinstance(value, list) else [value]


def key_contents(graph: Graph, node: StepNode, context: Context) -> list[str]:
    """Every URL and path whose content ``material_of`` hashes for ``node`` in
    ``context``: the artifacts it reads, then its ``cache.files``."""
    found = [
        url
        for ref in artifact_references(graph, node)
        for url in _urls(_referenced(context, ref))
        if isinstance(url, str)
    ]
    return [*found, *node.cache.files]


def artifact_urls(node: StepNode, outputs: dict[str, Value]) -> list[str]:
    """The URLs of the output artifacts ``store`` hashes (one that is not a URL: none)."""
    return [url for name in node.outputs.artifacts if isinstance(url := outputs.get(name), str)]


def listings(session: Session, user: str, names: Sequence[str]) -> dict[str, Listing | None]:
    """The state of each of ``user``'s datasets ``names`` (None: no such dataset): its
    listing's digest, and why its last listing failed, if it did."""
    found: dict[str, Listing | None] = {}
    for name in names:
        row = stored_datasets.get(session, user, name)
        if row is None:
            found[name] = None
            continue
        failure = (
            (row.message or "its listing failed") if row.phase == stored_datasets.FAILED else ""
        )
        found[name] = Listing(digest=row.digest, failure=failure)
    return found


def step_listings(
    session: Session, user: str, node: StepNode
) -> tuple[dict[str, str], Waiting | None]:
    """The listing each dataset ``node`` reads is pinned to now (``user``'s datasets as
    the store holds them), and those never listed yet (``workflow.datasets.pins``, which
    raises ``InvalidInput`` for one not there or whose only listing failed)."""
    if not node.datasets:
        return {}, None
    return pins(node, listings(session, user, node.datasets), user=user)


def keyed_listings(session: Session, job: str) -> str | None:
    """The listings the key of job ``job``'s unit was made with, as its stored document
    records them (``workflow.datasets.KEYED``); None when it does not, or is gone."""
    held = stored_jobs.owner_and_document(session, job)
    return None if held is None else keyed_by(held[1])


def other_data(session: Session, node: StepNode, job: str) -> str:
    """Why ``job``, which ran a unit of cached ``node``, read other listings of its
    datasets than its key names (``workflow.datasets.disagreement``: its entry is then
    not written), or ""."""
    if not node.datasets:
        return ""
    held = stored_jobs.owner_and_document(session, job)
    why = f"its job {job} is gone" if held is None else disagreement(node, held[1])
    return "" if why is None else f"not written to the cache: {why}"[:2000]


def material_of(
    graph: Graph,
    node: StepNode,
    context: Context,
    *,
    user: str,
    hash_of: Callable[[str], str],
    datasets: Mapping[str, str] | None = None,
) -> KeyMaterial:
    """The key material of ``node`` run in ``context`` (``unit_context``) by ``user``,
    the content of each of ``key_contents`` given by ``hash_of`` (the hashes
    ``Hashes.batch`` made as that user) and the listing each dataset it reads is pinned
    to by ``datasets`` (every one; none for a step that reads none); raises
    ``TemplateError`` as rendering does."""
    content: dict[str, str] = {}
    for ref in artifact_references(graph, node):
        content[ref] = ",".join(
            hash_of(url) if isinstance(url, str) else "none"
            for url in _urls(_referenced(context, ref))
        )
    files = {path: hash_of(path) for path in node.cache.files}
    return key_material(
        graph, node, context, content=content, files=files, user=user, datasets=datasets
    )


def lookup(
    session: Session, key: str, *, user: str, ttl: float | None, now: float, access: Access
) -> CacheEntryRow | None:
    """The entry of ``key`` if it may be served now to a run of ``user`` (made by a run of
    theirs, within ``ttl``, every artifact still there as a file or directory that user
    can read), else None: a miss."""

    def exists(url: str) -> bool:
        try:
            return written(url, access)
        except (TenantPathRefused, OSError, ValueError):
            return False

    row = cache.entry(session, key, owner=user)
    if row is None:
        return None
    entry = CacheEntry(
        key=row.key,
        pipeline=row.pipeline,
        step=row.step,
        run_id=row.run_id,
        created=row.created_at,
        params=row.outputs,
        artifacts={name: str(found["url"]) for name, found in row.artifacts.items()},
    )
    return row if servable(entry, ttl=ttl, now=now, exists=exists) else None


def store(
    session: Session,
    *,
    key: str,
    material: dict[str, Any],
    pipeline: str,
    node: StepNode,
    unit: str,
    run_id: str,
    user: str,
    outputs: dict[str, Value],
    now: float,
    hash_of: Callable[[str], str],
) -> None:
    """Write (or replace) the entry of ``key`` for a unit that succeeded with ``outputs``,
    the content of each of ``artifact_urls`` given by ``hash_of``."""
    artifacts: dict[str, Any] = {}
    for name in node.outputs.artifacts:
        url = outputs[name]
        if not isinstance(url, str):
            raise MissingContent(f"output {name} is not a URL")
        artifacts[name] = {"url": url, "hash": hash_of(url)}
    ttl = node.cache.ttl
    cache.put(
        session,
        CacheEntryRow(
            key=key,
            pipeline=pipeline,
            step=node.name,
            unit=unit,
            run_id=run_id,
            user=user,
            created_at=now,
            expires_at=None if ttl is None else now + ttl,
            outputs=dict(outputs),
            artifacts=artifacts,
            material=material,
        ),
    )
