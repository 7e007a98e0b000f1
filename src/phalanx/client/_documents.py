"""What ``Client.apply`` sends: documents checked here first, then sent as written.

Guarantees: every document is validated locally (``phalanx.spec``) before anything is
sent, so a bad file changes nothing on the server; that includes the size of the body
each becomes, which the API caps at ``MAX_INPUT_SIZE`` (10 MiB) as the loader does. A bad document raises
``DocumentError`` naming the source, the document, its line (when it came from text)
and the field, with the fix. Queues come first, then pipelines, then jobs, each in input
order, so a file can hold a queue and the jobs and pipelines that go to it. Each document is sent as the user wrote
it (a Volcano Job stays a Volcano Job; the server imports it the same way). A Secret
comes right after the queues (a job in the same file may name it); its values are never
part of a message, and a ``PreparedDocument``'s ``repr`` leaves its body out. A Dataset
comes right after the secrets (it may name one, and a job or pipeline may name it). A field
of a foreign document that phalanx reads but does not honour is told to ``warn``. A
``.py`` file is run (as on import, not as ``__main__``) and gives the documents it
builds with the workflow DSL: its module-level ``PipelineBuilder`` values and document
models, in assignment order.
"""

from __future__ import annotations

import ast
import json
import os
import re
import runpy
import traceback
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final, Literal, TypeAlias

import yaml
from pydantic import BaseModel

from phalanx.domain.errors import DocumentError
from phalanx.spec import ClusterDocument, JobDocument, QueueDocument
from phalanx.spec.dataset import DatasetDocument
from phalanx.spec.diagnostics import Warn
from phalanx.spec.inference import InferenceDocument
from phalanx.spec.limits import MAX_INPUT_SIZE, size
from phalanx.spec.loader import Document, build_document, load_documents, load_file
from phalanx.spec.pipeline.document import PipelineDocument
from phalanx.spec.scheduler import SchedulerConfigDocument
from phalanx.spec.secret import SecretDocument
from phalanx.spec.tuning import TuningDocument
from phalanx.workflow.dsl import PipelineBuilder

#: What ``apply`` accepts: a path, YAML/JSON text, one mapping or document, or a list of them.
ApplyInput: TypeAlias = (
    str | os.PathLike[str] | Mapping[str, Any] | BaseModel | Sequence[Mapping[str, Any] | BaseModel]
)

_STEP: Final = re.compile(
    r"\[(\d+)\]|\[('(?:[^'\\]|\\.)*'|\"(?:[^\"\\]|\\.)*\")\]|\.?([A-Za-z_][A-Za-z0-9_/-]*)"
)


#: The kinds ``apply`` sends.
Kind: TypeAlias = Literal["Queue", "Pipeline", "Job", "Inference", "Secret", "Dataset", "Tuning"]


@dataclass(frozen=True, slots=True, kw_only=True)
class PreparedDocument:
    """One validated document, ready to send (``Client.apply_prepared``)."""

    kind: Kind
    name: str
    body: bytes = field(repr=False)  # JSON of the document as written (a Secret's values)
    where: str  # "jobs.yaml document 2", for messages


def prepare_documents(
    documents: ApplyInput, *, source: str | None = None, warn: Warn | None = None
) -> list[PreparedDocument]:
    """The documents of ``documents``, validated, queues first; raises ``DocumentError``.
    Nothing is sent. ``warn`` gets one line per field read but not honoured (a Kubeflow
    job's ``restartPolicy``, say), naming the document and the field."""
    pairs = _pairs(documents, source, warn)
    if not pairs:
        raise DocumentError(
            f"{source or 'the input'} holds no documents",
            fix="give Queue, Secret, Dataset, Pipeline, Job, Inference or Tuning documents "
            "(apiVersion, kind, metadata, spec)",
        )
    prepared = [_prepared(raw, document, where) for raw, document, where in pairs]
    return queues_first(prepared)


def prepare_text(
    text: str, *, source: str = "<text>", warn: Warn | None = None
) -> list[PreparedDocument]:
    """``prepare_documents`` of YAML/JSON text that is never taken for a path (text from
    a person over the network, such as the web console's form, must not name a file the
    server would read or a ``.py`` it would run)."""
    pairs = _from_text(text, source, warn)
    if not pairs:
        raise DocumentError(
            f"{source} holds no documents",
            fix="give Queue, Secret, Dataset, Pipeline, Job, Inference or Tuning documents "
            "(apiVersion, kind, metadata, spec)",
        )
    return queues_first([_prepared(raw, document, where) for raw, document, where in pairs])


def queues_first(documents: Sequence[PreparedDocument]) -> list[PreparedDocument]:
    """``documents`` with every queue first, then every secret, every dataset (which
    may name a secret), every pipeline, every job, every inference service, and every
    tuning (which names a service), each kind in its given order."""
    order = {
        "Queue": 0,
        "Secret": 1,
        "Dataset": 2,
        "Pipeline": 3,
        "Job": 4,
        "Inference": 5,
        "Tuning": 6,
    }
    return sorted(documents, key=lambda d: order[d.kind])


def _pairs(
    documents: ApplyInput, source: str | None, warn: Warn | None
) -> list[tuple[Any, Document, str]]:
    if isinstance(documents, BaseModel | Mapping):
        return [_one(documents, source or "<argument>", warn)]
    if isinstance(documents, os.PathLike) or (
        isinstance(documents, str) and _looks_like_a_path(documents)
    ):
        return _from_file(Path(documents), source, warn)
    if isinstance(documents, str):
        return _from_text(documents, source or "<text>", warn)
    return [_one(item, f"{source or '<argument>'}[{i}]", warn) for i, item in enumerate(documents)]


def _looks_like_a_path(text: str) -> bool:
    stripped = text.strip()
    return (
        bool(stripped) and "\n" not in stripped and ": " not in stripped and stripped[0] not in "{["
    )


def _one(item: Any, source: str, warn: Warn | None) -> tuple[Any, Document, str]:
    if isinstance(item, PipelineBuilder):
        item = item.build()
    raw = (
        # As written: a default left out stays left out (a pipeline's job step without a
        # queue runs in the pipeline's default queue).
        item.model_dump(mode="json", by_alias=True, exclude_none=True, exclude_unset=True)
        if isinstance(item, BaseModel)
        else item
    )
    return raw, build_document(raw, source=source, warn=warn), f"{source} document 1"


def _from_file(
    path: Path, source: str | None, warn: Warn | None
) -> list[tuple[Any, Document, str]]:
    where = source or os.fspath(path)
    if path.suffix == ".py":
        built = _from_python(path, where)
        return [_one(item, f"{where}:{name}", warn) for name, item in built]
    try:
        documents = load_file(path, warn=warn)
    except DocumentError as error:
        if error.field is None:
            raise
        raise _with_line(error, _read(path), where) from None
    return _zip(_read(path), documents, where)


#: Document models a Python file may build (apply refuses clusters and scheduler
#: configs with the fix, as from YAML).
_DOCUMENT_MODELS: Final = (
    PipelineDocument,
    JobDocument,
    QueueDocument,
    InferenceDocument,
    SecretDocument,
    DatasetDocument,
    TuningDocument,
)


def _from_python(path: Path, where: str) -> list[tuple[str, Any]]:
    """The documents a Python file builds with the DSL: every module-level
    ``PipelineBuilder`` (built) or document model, by variable name, in the order they
    were assigned. The file runs as a module does on import (``__name__`` is not
    ``"__main__"``); an exception it raises is a ``DocumentError`` naming its line."""
    try:
        names = runpy.run_path(os.fspath(path), run_name="__phalanx_apply__")
    except DocumentError as error:
        raise DocumentError(f"{where}: {error}", field=error.field, fix=error.fix) from None
    except (Exception, SystemExit) as error:  # the user's script: report, never a traceback
        lines = [
            f.lineno
            for f in traceback.extract_tb(error.__traceback__)
            if f.filename == os.fspath(path)
        ]
        at = f" at line {lines[-1]}" if lines else ""
        raise DocumentError(
            f"{where}: running it raised {type(error).__name__}{at}: {error}",
            fix="fix the script (python FILE shows the whole traceback)",
        ) from None
    found = [
        (name, value)
        for name, value in names.items()
        if not name.startswith("_") and isinstance(value, (PipelineBuilder, *_DOCUMENT_MODELS))
    ]
    if not found:
        raise DocumentError(
            f"{where} builds no document",
            fix="assign a PipelineBuilder or a built document to a module-level name "
            "(pipeline = p.build())",
        )
    return found


def _from_text(text: str, source: str, warn: Warn | None) -> list[tuple[Any, Document, str]]:
    try:
        documents = load_documents(text, source=source, warn=warn)
    except DocumentError as error:
        if error.field is None:
            raise
        raise _with_line(error, text, source) from None
    return _zip(text, documents, source)


def _read(path: Path) -> str:
    return path.read_bytes().decode("utf-8-sig")


def _zip(text: str, documents: list[Document], source: str) -> list[tuple[Any, Document, str]]:
    # The loader has accepted this text (no aliases, bounded depth), so PyYAML's safe loader
    # reads the same documents; their numbers count empty documents as the loader does.
    numbered = [
        (n, raw) for n, raw in enumerate(yaml.safe_load_all(text), start=1) if raw is not None
    ]
    assert len(numbered) == len(documents), "the loader and PyYAML disagree on the documents"
    return [
        (raw, document, f"{source} document {n}")
        for (n, raw), document in zip(numbered, documents, strict=True)
    ]


def _prepared(raw: Any, document: Document, where: str) -> PreparedDocument:
    if isinstance(document, ClusterDocument | SchedulerConfigDocument):
        option = "--cluster" if isinstance(document, ClusterDocument) else "--scheduler"
        raise DocumentError(
            f"{where} is a {document.kind} document, which apply does not send",
            field="kind",
            fix=f"give it to the server at start: phalanx up {option} FILE",
        )
    kind: Kind = (
        "Queue"
        if isinstance(document, QueueDocument)
        else "Job"
        if isinstance(document, JobDocument)
        else "Inference"
        if isinstance(document, InferenceDocument)
        else "Secret"
        if isinstance(document, SecretDocument)
        else "Dataset"
        if isinstance(document, DatasetDocument)
        else "Tuning"
        if isinstance(document, TuningDocument)
        else "Pipeline"
    )
    body = json.dumps(raw, default=_jsonable).encode()
    if len(body) > MAX_INPUT_SIZE:
        raise DocumentError(
            f"{where} is {len(body)} bytes as JSON, over the API's limit of "
            f"{MAX_INPUT_SIZE} bytes ({size(MAX_INPUT_SIZE)})",
            fix="split it into several documents, and keep large data in files the job reads",
        )
    return PreparedDocument(kind=kind, name=document.metadata.name, body=body, where=where)


def _jsonable(value: Any) -> Any:
    iso = getattr(value, "isoformat", None)  # YAML dates and timestamps
    return iso() if callable(iso) else str(value)


def _with_line(error: DocumentError, text: str, source: str) -> DocumentError:
    """``error`` with the line of its field in ``text`` after the document's header."""
    message = str(error)
    header = re.match(rf"{re.escape(source)} document (\d+)(?: \([^)\n]*\))?", message)
    if header is None or error.field is None:
        return error
    line = _line_of(text, int(header.group(1)), error.field)
    if line is None:
        return error
    located = DocumentError(f"{message[: header.end()]}, line {line}{message[header.end() :]}")
    located.field, located.fix = error.field, error.fix
    return located


def _line_of(text: str, number: int, field: str) -> int | None:
    """The 1-based line of ``field`` (document syntax) in document ``number`` of ``text``,
    or of its nearest enclosing node that exists."""
    try:
        nodes = list(yaml.compose_all(text, Loader=yaml.SafeLoader))
    except yaml.YAMLError:
        return None
    if not 1 <= number <= len(nodes) or nodes[number - 1] is None:
        return None
    node: yaml.Node = nodes[number - 1]
    line = node.start_mark.line + 1
    for step in _steps(field):
        found = _child(node, step)
        if found is None:
            break
        mark, node = found
        line = mark.line + 1
    return line


def _steps(field: str) -> list[str | int]:
    steps: list[str | int] = []
    for match in _STEP.finditer(field.partition(" (the key)")[0]):
        index, quoted, name = match.groups()
        if index is not None:
            steps.append(int(index))
        elif quoted is not None:
            steps.append(str(ast.literal_eval(quoted)))
        else:
            steps.append(name)
    return steps


def _child(node: yaml.Node, step: str | int) -> tuple[yaml.Mark, yaml.Node] | None:
    if isinstance(node, yaml.MappingNode) and isinstance(step, str):
        for key, value in node.value:
            if isinstance(key, yaml.ScalarNode) and key.value == step:
                return key.start_mark, value
    if isinstance(node, yaml.SequenceNode) and isinstance(step, int) and step < len(node.value):
        item = node.value[step]
        return item.start_mark, item
    return None
