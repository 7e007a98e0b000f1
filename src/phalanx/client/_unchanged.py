"""Whether a document sent again is the one the server holds, and if not, where not.

Guarantees: a document is compared in the form the server stores it (validated, then
dumped as ``phalanx.spec`` dumps it; a Volcano or OpenPAI job in its imported form), so
the same file applied twice compares equal (defaults spelled out or left out alike,
except in a pipeline, which is stored as written; a quantity written another way,
``1Gi`` for ``1024Mi``, is a change). A job's ``spec.user`` and ``spec.queue`` (which
the server fills in: the caller, and the user's default queue) are compared only when
the document sets them (a queue in any of its forms: a Kubeflow job's
``runPolicy.schedulingPolicy.queue`` ...). A Secret is never the one the server holds:
its values are never read back to compare, so applying one always replaces it.
"""

from __future__ import annotations

import json
from typing import Any, Final

from phalanx.client._documents import PreparedDocument
from phalanx.spec.job import JobDocument
from phalanx.spec.loader import build_document

#: Differing fields a message names, at most.
SHOWN: Final = 5


def stored_form(document: PreparedDocument) -> dict[str, Any]:
    """``document`` as the server would store it (a pipeline as written, defaults left
    out: whether a job step names its queue decides which queue it runs in; a job that
    names no queue without ``spec.queue``: the server fills it in)."""
    built = build_document(json.loads(document.body))
    dumped: dict[str, Any] = built.model_dump(
        mode="json", by_alias=True, exclude_none=True, exclude_unset=document.kind == "Pipeline"
    )
    if isinstance(built, JobDocument) and "queue" not in built.spec.model_fields_set:
        dumped["spec"].pop("queue", None)
    return dumped


def differences(sent: PreparedDocument, stored: dict[str, Any]) -> list[str]:
    """The fields (document paths, ``spec.roles[0].command``) where ``sent`` and the
    ``stored`` document differ; empty when they are the same (never for a Secret)."""
    if sent.kind == "Secret":
        return ["spec (a secret's values are never read back)"]
    mine = stored_form(sent)
    theirs = json.loads(json.dumps(stored))
    if sent.kind == "Job" and "user" not in json.loads(sent.body).get("spec", {}):
        mine.get("spec", {}).pop("user", None)
        theirs.get("spec", {}).pop("user", None)
    if sent.kind == "Job" and "queue" not in mine.get("spec", {}):
        theirs.get("spec", {}).pop("queue", None)
    found: list[str] = []
    _diff(mine, theirs, "", found)
    return found


def describe(fields: list[str]) -> str:
    """``a, b and 3 more`` for messages."""
    shown = ", ".join(fields[:SHOWN])
    return f"{shown} and {len(fields) - SHOWN} more" if len(fields) > SHOWN else shown


def _diff(mine: Any, theirs: Any, path: str, found: list[str]) -> None:
    if isinstance(mine, dict) and isinstance(theirs, dict):
        for key in [*mine, *(k for k in theirs if k not in mine)]:
            child = f"{path}.{key}" if path else str(key)
            _diff(mine.get(key), theirs.get(key), child, found)
    elif isinstance(mine, list) and isinstance(theirs, list) and len(mine) == len(theirs):
        for index, (a, b) in enumerate(zip(mine, theirs, strict=True)):
            _diff(a, b, f"{path}[{index}]", found)
    elif mine != theirs:
        found.append(path or "the document")
