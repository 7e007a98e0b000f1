"""Load documents from YAML or JSON text (JSON is read as YAML).

Guarantees: ``load_documents`` returns validated documents in stream order (empty
documents are skipped) or raises ``DocumentError``; bad input never escapes as any
other exception. Hostile input is refused: more than ``MAX_INPUT_SIZE``
characters, YAML aliases (the "billion laughs"), nesting deeper than
``MAX_DEPTH``, duplicate keys, and names outside the DNS-1123 rules.

A document is dispatched on its ``(apiVersion, kind)``; a mapping with
``protocolVersion`` and neither of them is an OpenPAI job (see
``phalanx.spec.importers.openpai``). Kubeflow's ``kubeflow.org/v1`` PyTorchJob, TFJob
and MPIJob become Jobs (``phalanx.spec.importers.kubeflow``). ``load_pipelines`` and
``build_pipeline`` read Pipelines alone (``phalanx.spec.pipeline.document``), with the
same guarantees, and a hint where an unquoted ``{{...}}`` broke the YAML.

Warnings: every field of a foreign document that is read but not honoured is given to
``warn`` (when passed) as one line naming the source, the document, the field and what
phalanx does instead (``diagnostics.notice_line``); nothing is dropped without a word.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Mapping
from typing import Any, Final, TypeAlias

import yaml
from pydantic import ValidationError

from phalanx.domain.errors import DocumentError
from phalanx.spec.cluster import ClusterDocument
from phalanx.spec.common import API_VERSION
from phalanx.spec.dataset import DatasetDocument
from phalanx.spec.diagnostics import (
    Notice,
    Problem,
    Warn,
    document_error,
    notice_line,
    problems_of,
)
from phalanx.spec.importers.kubeflow import (
    KUBEFLOW_API_VERSION,
    KUBEFLOW_KINDS,
    import_kubeflow_job,
)
from phalanx.spec.importers.openpai import import_openpai_job, is_openpai
from phalanx.spec.importers.volcano import (
    BATCH_API_VERSION,
    SCHEDULING_API_VERSION,
    import_volcano_job,
    import_volcano_queue,
)
from phalanx.spec.inference import InferenceDocument
from phalanx.spec.job import JobDocument
from phalanx.spec.limits import MAX_INPUT_SIZE
from phalanx.spec.pipeline.document import PipelineDocument
from phalanx.spec.queue import QueueDocument
from phalanx.spec.scheduler import SchedulerConfigDocument
from phalanx.spec.secret import SecretDocument
from phalanx.spec.tuning import TuningDocument

#: Deepest nesting of mappings and lists accepted.
MAX_DEPTH: Final = 64

Document: TypeAlias = (
    "QueueDocument | JobDocument | ClusterDocument | SchedulerConfigDocument | PipelineDocument"
    " | InferenceDocument | SecretDocument | DatasetDocument | TuningDocument"
)

#: Turns a raw document into a validated one, giving each ``Notice`` to its second argument.
Builder: TypeAlias = Callable[[dict[str, Any], Callable[[Notice], None]], Document]


def _quiet(build: Callable[[dict[str, Any]], Document]) -> Builder:
    """A builder for a document of which phalanx honours every field it reads."""
    return lambda raw, _note: build(raw)


def _kubeflow(raw: dict[str, Any], note: Callable[[Notice], None]) -> Document:
    return import_kubeflow_job(raw, note=note)


def _volcano_job(raw: dict[str, Any], note: Callable[[Notice], None]) -> Document:
    return import_volcano_job(raw, note=note)


def _volcano_queue(raw: dict[str, Any], note: Callable[[Notice], None]) -> Document:
    return import_volcano_queue(raw, note=note)


def _openpai(raw: dict[str, Any], note: Callable[[Notice], None]) -> Document:
    return import_openpai_job(raw, note=note)


_BUILDERS: Final[Mapping[tuple[str, str], Builder]] = {
    (API_VERSION, "Queue"): _quiet(QueueDocument.model_validate),
    (API_VERSION, "Job"): _quiet(JobDocument.model_validate),
    (API_VERSION, "Cluster"): _quiet(ClusterDocument.model_validate),
    (API_VERSION, "SchedulerConfig"): _quiet(SchedulerConfigDocument.model_validate),
    (API_VERSION, "Pipeline"): _quiet(PipelineDocument.model_validate),
    (API_VERSION, "Inference"): _quiet(InferenceDocument.model_validate),
    (API_VERSION, "Secret"): _quiet(SecretDocument.model_validate),
    (API_VERSION, "Dataset"): _quiet(DatasetDocument.model_validate),
    (API_VERSION, "Tuning"): _quiet(TuningDocument.model_validate),
    (BATCH_API_VERSION, "Job"): _volcano_job,
    (SCHEDULING_API_VERSION, "Queue"): _volcano_queue,
    **{(KUBEFLOW_API_VERSION, kind): _kubeflow for kind in KUBEFLOW_KINDS},
}

#: Every accepted ``apiVersion kind`` pair.
KNOWN_KINDS: Final = tuple(f"{api} {kind}" for api, kind in _BUILDERS)


class _Refused(yaml.MarkedYAMLError, DocumentError):
    """YAML that parses but that phalanx refuses; carries its own fix. A PyYAML error
    (with its mark) for the loader, a ``DocumentError`` in the tree."""

    def __init__(self, problem: str, fix: str, mark: yaml.Mark | None) -> None:
        DocumentError.__init__(self, problem, fix=fix)
        yaml.MarkedYAMLError.__init__(self, problem=problem, problem_mark=mark)


class _GuardedLoader(yaml.SafeLoader):
    """PyYAML's safe loader without aliases, duplicate keys or deep nesting."""

    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        self._depth = 0

    def compose_node(self, parent: yaml.Node | None, index: Any) -> yaml.Node | None:
        if self.check_event(yaml.AliasEvent):
            raise _Refused(
                "YAML aliases (*name) are not accepted",
                "write the value out in full instead of referring to an anchor",
                self.peek_event().start_mark,  # type: ignore[no-untyped-call]
            )
        self._depth += 1
        try:
            if self._depth > MAX_DEPTH:
                raise _Refused(
                    f"nested more than {MAX_DEPTH} levels deep",
                    "flatten the document",
                    self.peek_event().start_mark,  # type: ignore[no-untyped-call]
                )
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: set[tuple[str, Any]] = set()
        for key_node, _ in node.value:
            if isinstance(key_node, yaml.ScalarNode):
                key = (key_node.tag, key_node.value)
                if key in seen:
                    raise _Refused(
                        f"key {key_node.value[:60]!r} appears twice in one mapping",
                        "keep one of them",
                        key_node.start_mark,
                    )
                seen.add(key)
        return super().construct_mapping(node, deep=deep)


def load_documents(
    text: str, *, source: str = "<input>", warn: Warn | None = None
) -> list[Document]:
    """Every non-empty document of ``text``, validated; raises ``DocumentError``.
    ``warn`` gets a line for each field read but not honoured (see the module docstring)."""
    if len(text) > MAX_INPUT_SIZE:
        raise DocumentError(
            f"{source}: input of {len(text)} characters is over the {MAX_INPUT_SIZE} limit",
            fix="split it into several files",
        )
    raws = _parse(text, source)
    return [_build(raw, source, n, warn) for n, raw in enumerate(raws, start=1) if raw is not None]


def load_file(path: str | os.PathLike[str], *, warn: Warn | None = None) -> list[Document]:
    """Every document of the UTF-8 file at ``path``; raises ``DocumentError``; ``warn`` as
    for ``load_documents``."""
    source = os.fspath(path)
    try:
        with open(path, "rb") as stream:
            data = stream.read(MAX_INPUT_SIZE + 1)
    except OSError as error:
        raise DocumentError(
            f"{source}: cannot read: {error.strerror}", fix="check the path and its permissions"
        ) from None
    if len(data) > MAX_INPUT_SIZE:
        raise DocumentError(
            f"{source}: file is over the {MAX_INPUT_SIZE}-byte limit",
            fix="split it into several files",
        )
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as error:
        raise DocumentError(
            f"{source}: byte {error.start} is not UTF-8", fix="save the file as UTF-8"
        ) from None
    return load_documents(text, source=source, warn=warn)


def build_document(raw: Any, *, source: str = "<request>", warn: Warn | None = None) -> Document:
    """One already-parsed document (a JSON body, say) validated like ``load_documents``
    validates each document of a stream. Raises ``DocumentError``."""
    return _build(raw, source, 1, warn)


def load_pipelines(text: str, *, source: str = "<input>") -> list[PipelineDocument]:
    """Every non-empty document of ``text``, each a validated Pipeline; raises
    ``DocumentError`` (source, document number, kind and name, field, fix)."""
    if len(text) > MAX_INPUT_SIZE:
        raise DocumentError(
            f"{source}: input of {len(text)} characters is over the {MAX_INPUT_SIZE} limit",
            fix="split it into several files",
        )
    try:
        raws = _parse(text, source)
    except DocumentError as error:
        raise _with_quoting_hint(error, text) from None
    return [
        build_pipeline(raw, source=source, number=n)
        for n, raw in enumerate(raws, 1)
        if raw is not None
    ]


_QUOTE_HINT: Final = 'quote every value holding {{...}} references, e.g. "{{params.lr}}"'


def _with_quoting_hint(error: DocumentError, text: str) -> DocumentError:
    """``error`` with a hint when the YAML it reports is on a line with ``{{``: an
    unquoted reference reads as a YAML mapping."""
    found = re.search(r", line (\d+), column", str(error))
    lines = text.splitlines()
    if found is None or not 0 < int(found[1]) <= len(lines) or "{{" not in lines[int(found[1]) - 1]:
        return error
    message = str(error).removesuffix(f"; fix: {error.fix}")
    return DocumentError(message, fix=f"{_QUOTE_HINT}; {error.fix}")


def build_pipeline(raw: Any, *, source: str = "<request>", number: int = 1) -> PipelineDocument:
    """One already-parsed document validated as a Pipeline; raises ``DocumentError``."""
    header = _header(source, number, raw)
    if not isinstance(raw, dict):
        raise document_error(header, [_not_a_mapping(raw)])
    for key, wanted in (("apiVersion", API_VERSION), ("kind", "Pipeline")):
        if raw.get(key) != wanted:
            fix = f"write {key}: {wanted}"
            got = "is required" if key not in raw else f"{str(raw[key])[:40]!r} is not {wanted}"
            problem = Problem(path=key, detail=f"{got}; fix: {fix}", fix=fix)
            raise document_error(header, [problem])
    try:
        return PipelineDocument.model_validate(raw)
    except ValidationError as error:
        raise document_error(header, problems_of(error)) from None


def _parse(text: str, source: str) -> list[Any]:
    raws: list[Any] = []
    try:
        loader = _GuardedLoader(text)  # the reader refuses control characters right here
    except yaml.reader.ReaderError as error:
        line, column = _line_column(text, error.position)
        raise DocumentError(
            f"{source}, line {line}, column {column}: "
            f"character U+{error.character:04X} is not allowed in YAML",
            fix="remove it, or write it as an escape inside double quotes",
        ) from None
    try:
        while loader.check_data():  # type: ignore[no-untyped-call]
            raws.append(loader.get_data())
    except yaml.MarkedYAMLError as error:
        mark = error.problem_mark or error.context_mark
        where = f", line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        raise DocumentError(
            f"{source} document {len(raws) + 1}{where}: {error.problem or error.context}",
            fix=getattr(error, "fix", "check the YAML there: indentation, quotes, brackets, tags"),
        ) from None
    except ValueError as error:  # int() and date() of a scalar YAML resolved by its looks
        raise DocumentError(
            f"{source} document {len(raws) + 1}: a value cannot be read: {error}",
            fix="quote the value if it is meant as text",
        ) from None
    finally:
        loader.dispose()
    return raws


def _line_column(text: str, position: int) -> tuple[int, int]:
    line_start = text.rfind("\n", 0, position) + 1
    return text.count("\n", 0, position) + 1, position - line_start + 1


def _build(raw: Any, source: str, number: int, warn: Warn | None) -> Document:
    header = _header(source, number, raw)
    if not isinstance(raw, dict):
        raise document_error(header, [_not_a_mapping(raw)])
    notices: list[Notice] = []
    try:
        document = _builder(raw, header)(raw, notices.append)
    except ValidationError as error:
        raise document_error(header, problems_of(error)) from None
    if warn is not None:
        for notice in notices:
            warn(notice_line(header, notice))
    return document


def _builder(raw: dict[str, Any], header: str) -> Builder:
    """What turns ``raw`` into a document: by ``(apiVersion, kind)``, or the OpenPAI
    importer for a mapping with ``protocolVersion`` and neither of them."""
    if is_openpai(raw):
        return _openpai
    api_version, kind = raw.get("apiVersion"), raw.get("kind")
    builder = None
    if isinstance(api_version, str) and isinstance(kind, str):
        builder = _BUILDERS.get((api_version, kind))
    if builder is None:
        raise document_error(header, [_unknown_kind(api_version, kind)])
    return builder


def _header(source: str, number: int, raw: Any) -> str:
    header = f"{source} document {number}"
    if not isinstance(raw, dict):
        return header
    metadata = raw.get("metadata")
    name = metadata.get("name") if isinstance(metadata, dict) else None
    kind = raw.get("kind")
    if is_openpai(raw):
        kind, name = "OpenPAI job", raw.get("name")
    known = [_printable(value) for value in (kind, name) if isinstance(value, str)]
    return f"{header} ({' '.join(known)})" if known else header


def _printable(text: str) -> str:
    return text if text.isprintable() and len(text) <= 63 else repr(text[:40])


def _not_a_mapping(raw: Any) -> Problem:
    fix = "write a mapping with apiVersion, kind, metadata and spec"
    got = "a list" if isinstance(raw, list) else type(raw).__name__
    return Problem(path="", detail=f"expected a mapping, got {got}; fix: {fix}", fix=fix)


def _unknown_kind(api_version: Any, kind: Any) -> Problem:
    known = ", ".join(KNOWN_KINDS)
    if api_version is None:
        fix = f"add apiVersion: {API_VERSION}"
        return Problem(path="apiVersion", detail=f"is required; fix: {fix}", fix=fix)
    if kind is None:
        fix = f"add kind, one of: {known}"
        return Problem(path="kind", detail=f"is required; fix: {fix}", fix=fix)
    versions = [api for api, k in _BUILDERS if k == kind]
    if versions:
        fix = f"for kind {kind} use apiVersion {' or '.join(versions)}"
        detail = f"{_printable(str(api_version))} is not known; fix: {fix}"
        return Problem(path="apiVersion", detail=detail, fix=fix)
    fix = f"use one of: {known}"
    shown = f"{_printable(str(kind))} of apiVersion {_printable(str(api_version))}"
    return Problem(path="kind", detail=f"{shown} is not a known kind; fix: {fix}", fix=fix)
