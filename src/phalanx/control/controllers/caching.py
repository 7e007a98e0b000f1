"""The step cache as the workflow controller uses it: a unit's key, the entry it may be
served from, and the entry written when it succeeds (``CacheEntryRow``).

The key is ``phalanx.workflow.cache``'s: this module gathers what goes into it that
needs I/O, the content hashes of the artifacts the step reads and of its
``cache.files``. A cached unit's outputs are the producing unit's, so a downstream step
reads the artifact where the producing run wrote it (``WORKSPACE/runs/RUN/STEP/NAME``);
an entry with an artifact gone is a miss (never an error), and the step runs again and
writes its entry anew. A failure is never written, so never served. An entry is served
to runs of the user whose run made it (its artifacts are theirs).
"""

from __future__ import annotations

from typing import Any

import fsspec
from sqlalchemy.orm import Session

from phalanx.control.store.models import CacheEntryRow
from phalanx.workflow.cache import (
    CacheEntry,
    KeyMaterial,
    MissingContent,
    artifact_references,
    hash_content,
    key_material,
    servable,
)
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


def material_of(graph: Graph, node: StepNode, context: Context) -> KeyMaterial:
    """The key material of ``node`` run in ``context`` (``unit_context``), its artifacts
    and files hashed; raises ``MissingContent`` when one is gone, ``TemplateError`` as
    rendering does."""
    content: dict[str, str] = {}
    for ref in artifact_references(graph, node):
        value = _referenced(context, ref)
        urls = value if isinstance(value, list) else [value]
        content[ref] = ",".join(
            hash_content(url) if isinstance(url, str) else "none" for url in urls
        )
    files = {path: hash_content(path) for path in node.cache.files}
    return key_material(graph, node, context, content=content, files=files)


def _exists(url: str) -> bool:
    try:
        fs, path = fsspec.core.url_to_fs(url)
        return bool(fs.exists(path))
    except (OSError, ValueError):
        return False


def lookup(
    session: Session, key: str, *, user: str, ttl: float | None, now: float
) -> CacheEntryRow | None:
    """The entry of ``key`` if it may be served now to a run of ``user`` (made by a run of
    theirs, within ``ttl``, every artifact still there), else None: a miss."""
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
    return row if servable(entry, ttl=ttl, now=now, exists=_exists) else None


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
) -> None:
    """Write (or replace) the entry of ``key`` for a unit that succeeded with ``outputs``;
    raises ``MissingContent`` if an artifact is already gone."""
    artifacts: dict[str, Any] = {}
    for name in node.outputs.artifacts:
        url = outputs[name]
        if not isinstance(url, str):
            raise MissingContent(f"output {name} is not a URL")
        artifacts[name] = {"url": url, "hash": hash_content(url)}
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
