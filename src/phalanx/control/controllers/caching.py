"""The step cache as the workflow controller uses it: a unit's key, the entry it may be
served from, and the entry written when it succeeds (``CacheEntryRow``).

The key is ``phalanx.workflow.cache``'s: this module gathers what goes into it that
needs I/O, the content hashes of the artifacts the step reads and of its
``cache.files``. A cached unit's outputs are the producing unit's, so a downstream step
reads the artifact where the producing run wrote it (``WORKSPACE/runs/RUN/STEP/NAME``);
an entry with an artifact gone is a miss (never an error), and the step runs again and
writes its entry anew. A failure is never written, so never served. A key includes the
run's user, so an entry is made, replaced and served for that user's runs alone (its
artifacts are theirs), and every file hashed is read as that user
(``workflow.contents``).
"""

from __future__ import annotations

from typing import Any

from sqlalchemy.orm import Session

from phalanx.control.store.models import CacheEntryRow
from phalanx.tenantfs import TenantPathRefused
from phalanx.workflow.cache import (
    CacheEntry,
    KeyMaterial,
    artifact_references,
    key_material,
    servable,
)
from phalanx.workflow.contents import Access, MissingContent, content_hash, written
from phalanx.workflow.dag import Graph, StepNode
from phalanx.workflow.templates import Context, Value

#: A run's cache modes: read and write entries; write only; neither.
MODES = ("use", "refresh", "off")


def _referenced(context: Context, ref: str) -> Value:
    """The value of ``inputs.NAME`` or ``steps.STEP.outputs.NAME`` in ``context``."""
    parts = ref.split(".")
    if parts[0] == "inputs":
        return context.inputs.get(parts[1])
    return context.steps.get(parts[1], {}).get(parts[3])


def material_of(
    graph: Graph, node: StepNode, context: Context, *, user: str, access: Access
) -> KeyMaterial:
    """The key material of ``node`` run in ``context`` (``unit_context``) by ``user``,
    its artifacts and files hashed with ``access`` (as that user); raises
    ``MissingContent`` when one is gone, ``TenantPathRefused`` for one the user could
    not read or that is not a file or directory, ``TemplateError`` as rendering does."""
    content: dict[str, str] = {}
    for ref in artifact_references(graph, node):
        value = _referenced(context, ref)
        urls = value if isinstance(value, list) else [value]
        content[ref] = ",".join(
            content_hash(url, access) if isinstance(url, str) else "none" for url in urls
        )
    files = {path: content_hash(path, access) for path in node.cache.files}
    return key_material(graph, node, context, content=content, files=files, user=user)


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

    row = session.get(CacheEntryRow, key)
    if row is None or row.user != user:
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
    access: Access,
) -> None:
    """Write (or replace) the entry of ``key`` for a unit that succeeded with ``outputs``
    (its artifacts hashed with ``access``); raises ``MissingContent`` if an artifact is
    already gone, ``TenantPathRefused`` if it is not a file or directory."""
    artifacts: dict[str, Any] = {}
    for name in node.outputs.artifacts:
        url = outputs[name]
        if not isinstance(url, str):
            raise MissingContent(f"output {name} is not a URL")
        artifacts[name] = {"url": url, "hash": content_hash(url, access)}
    ttl = node.cache.ttl
    session.merge(
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
        )
    )
