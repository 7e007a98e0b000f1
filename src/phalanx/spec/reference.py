"""The reference of every document kind, rendered from the spec models themselves.

Each field's meaning is its docstring in the model (``SpecModel`` takes attribute
docstrings as descriptions), so the page cannot drift from what is validated:
``python -m phalanx.spec.reference > docs/reference.md`` writes it, and a test checks
that the committed page is what this renders and that no field lacks a meaning.
Field names are as documents write them (camelCase); a default is the value taken when
the field is left out, and "required" marks a field that must be given.
"""

from __future__ import annotations

import sys
import types
from collections.abc import Iterator
from typing import Annotated, Any, Final, Literal, Union, get_args, get_origin

from pydantic import BaseModel
from pydantic.fields import FieldInfo
from pydantic_core import PydanticUndefined

from phalanx.domain.errors import PhalanxError
from phalanx.spec.cluster import ClusterDocument
from phalanx.spec.dataset import DatasetDocument
from phalanx.spec.inference import InferenceDocument
from phalanx.spec.job import JobDocument
from phalanx.spec.pipeline.document import PipelineDocument
from phalanx.spec.queue import QueueDocument
from phalanx.spec.scheduler import SchedulerConfigDocument
from phalanx.spec.secret import SecretDocument
from phalanx.spec.tuning import TuningDocument

#: The kinds, in the order the page gives them.
KINDS: Final[tuple[type[BaseModel], ...]] = (
    ClusterDocument,
    QueueDocument,
    JobDocument,
    SchedulerConfigDocument,
    PipelineDocument,
    InferenceDocument,
    SecretDocument,
    DatasetDocument,
    TuningDocument,
)
#: Types known by their validator, as a person reads them.
_BY_VALIDATOR: Final = {
    "_check_quantity": "quantity (2, 500m, 16Gi)",
    "_duration": "duration (90, 30m, 8h, 1h30m, 2d, 250ms)",
    "_percent": "percent (5%), or a fraction of 1 (0.05)",
    "_shell_string": "argv list, or one shell string",
    "_topology_form": "preset name, `nvidia-smi topo -m` text, or a "
    "[TopologyMatrixSpec](#topologymatrixspec)",
}

INTRO: Final = """\
# Document reference

Every field of every kind phalanx reads, generated from the models that validate them
(`python -m phalanx.spec.reference > docs/reference.md`; a test keeps this page equal to
that output). Documents are YAML or JSON: `apiVersion: phalanx/v1`, `kind`, `metadata`,
`spec`. Field names are camelCase. A field left out takes its default; an unknown field is
refused with the closest known name. Examples of each kind are in
[Getting started](getting-started.md).
"""


class MissingMeaning(PhalanxError):
    """A field has no docstring: the reference would not say what it means."""


def render() -> str:
    """The whole page (Markdown)."""
    parts = [INTRO]
    seen: list[type[BaseModel]] = []  # each model is described once, where first met
    for kind in KINDS:
        name = kind.model_fields["kind"].default
        parts.append(f"\n## {name}\n\n")
        for model in _models(kind, seen):
            parts.append(_table(model, top=model is kind))
    return "".join(parts)


def _models(root: type[BaseModel], seen: list[type[BaseModel]]) -> Iterator[type[BaseModel]]:
    """``root`` and every model its fields reach not in ``seen`` (which grows), in the
    order first met."""
    pending = [root]
    while pending:
        model = pending.pop(0)
        if model in seen:
            continue
        seen.append(model)
        yield model
        for info in model.model_fields.values():
            pending.extend(m for m in _nested(info.annotation) if m not in seen)


def _nested(annotation: Any) -> list[type[BaseModel]]:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    return [model for arg in get_args(annotation) for model in _nested(arg)]


def _table(model: type[BaseModel], *, top: bool) -> str:
    title = f"### {model.__name__}\n\n" if not top else ""
    doc = " ".join((model.__doc__ or "").strip().split("\n\n")[0].split()).replace("``", "`")
    rows = ["| field | type | default | meaning |", "|---|---|---|---|"]
    for name, info in model.model_fields.items():
        if not info.description:
            raise MissingMeaning(f"{model.__name__}.{name} has no docstring")
        meaning = " ".join(info.description.split()).replace("|", "\\|")
        field = info.alias or name
        rows.append(f"| `{field}` | {_type_of(info)} | {_default_of(info)} | {meaning} |")
    return f"{title}{doc}\n\n" + "\n".join(rows) + "\n\n"


def _type_of(info: FieldInfo) -> str:
    known = _known(info.metadata)
    return (known or _describe(info.annotation)).replace("|", "\\|")


def _known(metadata: Any) -> str | None:
    """What a validator among ``metadata`` says the type is, if it is a known one."""
    for item in metadata:
        function = getattr(item, "func", None) or getattr(item, "discriminator", None)
        name = getattr(function, "__name__", "")
        if name in _BY_VALIDATOR:
            return _BY_VALIDATOR[name]
    return None


def _describe(annotation: Any) -> str:
    origin = get_origin(annotation)
    args = get_args(annotation)
    if origin is Annotated:
        return _known(annotation.__metadata__) or _describe(args[0])
    if origin is Literal:
        values = ", ".join(f"`{a}`" for a in args)
        return values if len(args) == 1 else f"one of {values}"
    if origin in (Union, types.UnionType):
        return " or ".join(_describe(a) for a in args if a is not type(None))
    if origin is list:
        return f"list of {_describe(args[0])}"
    if origin is dict:
        return f"map of {_describe(args[0])} to {_describe(args[1])}"
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return f"[{annotation.__name__}](#{annotation.__name__.lower()})"
    return {str: "string", int: "integer", float: "number", bool: "boolean"}.get(
        annotation, getattr(annotation, "__name__", str(annotation))
    )


def _default_of(info: FieldInfo) -> str:
    if info.is_required():
        return "required"
    value = info.default_factory() if info.default_factory is not None else info.default  # type: ignore[call-arg]
    if value is PydanticUndefined or value is None:
        return "none"
    if isinstance(value, BaseModel):
        return "all defaults"
    if isinstance(value, bool):
        return f"`{str(value).lower()}`"
    if isinstance(value, dict | list) and not value:
        return "`{}`" if isinstance(value, dict) else "`[]`"
    return f"`{value}`"


if __name__ == "__main__":
    sys.stdout.write(render())
