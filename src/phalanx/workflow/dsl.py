"""A Python DSL for Pipeline documents: a builder whose steps hand out their outputs.

Example (the issue's three steps)::

    p = PipelineBuilder("tri", params={"lr": 0.01},
                        defaults={"queue": "wf", "resources": {"cpu": 1, "memory": "256Mi"}})
    prep = p.step("prep", command=["sh", "-c", "python prep.py > {{outputs.data}}"],
                  outputs=["data"])
    train = p.step("train", depends_on=[prep],
                   inputs={"artifacts": {"data": prep.outputs.data}},
                   command=["sh", "-c", f"python train.py --lr {p.params.lr} "
                            "{{inputs.data}} {{outputs.model}}"],
                   outputs=["model"])
    p.step("validate", inputs={"artifacts": {"model": train.outputs.model}},
           command=["sh", "-c", "python validate.py {{inputs.model}}"])
    document = p.build()            # a validated PipelineDocument; .to_yaml() writes it

Keyword arguments are the document's fields in snake_case (``depends_on``,
``max_items`` inside dicts stay as documents write them: ``maxItems``); values are plain
data or spec models (``RetrySpec(...)``). ``outputs=["a", "b"]`` is short for
``{"artifacts": ["a", "b"]}``. ``p.params.NAME`` and ``step.outputs.NAME`` are the
``{{...}}`` references, refused (``AttributeError``) when the name was not declared;
``ITEM``, ``item_key(k)`` and ``RUN_ID`` are the others.

Guarantees: ``build`` validates exactly as ``load_pipelines`` does (``DocumentError``
naming the field); ``PipelineBuilder.from_document(d).build() == d`` for every valid
document ``d``, and ``load_pipelines(p.build().to_yaml())[0] == p.build()``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from pydantic import BaseModel
from pydantic.alias_generators import to_camel

from phalanx.spec.loader import build_pipeline
from phalanx.spec.pipeline.document import PipelineDocument

#: ``{{item}}`` of a foreach step, and ``{{run.id}}``.
ITEM: Final = "{{item}}"
RUN_ID: Final = "{{run.id}}"


def item_key(key: str) -> str:
    """``{{item.KEY}}``: a key of a mapping item."""
    return "{{item." + key + "}}"


class Names:
    """References under ``prefix`` by attribute or index: ``names.lr`` is
    ``{{prefix.lr}}``; an undeclared name raises ``AttributeError`` naming the known ones."""

    def __init__(self, prefix: str, names: Iterable[str]) -> None:
        self._prefix = prefix
        self._names = tuple(names)

    def __getattr__(self, name: str) -> str:
        if name.startswith("__"):
            raise AttributeError(name)
        if name not in self._names:
            known = ", ".join(self._names) or "none"
            raise AttributeError(f"{self._prefix} has no {name!r}; declared: {known}")
        return "{{" + f"{self._prefix}.{name}" + "}}"

    def __getitem__(self, name: str) -> str:
        return self.__getattr__(name)


def _plain(value: Any) -> Any:
    """``value`` as document data: models dumped as documents write them."""
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json", by_alias=True, exclude_unset=True)
    if isinstance(value, StepHandle):
        return value.name
    if isinstance(value, Mapping):
        return {key: _plain(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(item) for item in value]
    return value


def _fields(fields: Mapping[str, Any]) -> dict[str, Any]:
    document: dict[str, Any] = {}
    for name, value in fields.items():
        plain = _plain(value)
        if name == "outputs" and isinstance(plain, list):
            plain = {"artifacts": plain}
        document[to_camel(name)] = plain
    return document


@dataclass(slots=True)
class StepHandle:
    """A step of the builder: its name and fields (as the document writes them)."""

    name: str
    fields: dict[str, Any] = field(default_factory=dict)

    @property
    def outputs(self) -> Names:
        """``{{steps.NAME.outputs.X}}`` for each declared output X."""
        outputs = self.fields.get("outputs") or {}
        names = [*outputs.get("artifacts", []), *outputs.get("params", {})]
        return Names(f"steps.{self.name}.outputs", names)


class PipelineBuilder:
    """Builds one Pipeline document step by step (see the module docstring)."""

    def __init__(
        self,
        name: str,
        *,
        params: Mapping[str, Any] | None = None,
        defaults: Any = None,
        on_failure: str | None = None,
        concurrency: int | None = None,
        schedule: Any = None,
        labels: Mapping[str, str] | None = None,
        annotations: Mapping[str, str] | None = None,
    ) -> None:
        self.name = name
        self.metadata: dict[str, Any] = {"name": name}
        if labels:
            self.metadata["labels"] = dict(labels)
        if annotations:
            self.metadata["annotations"] = dict(annotations)
        self.spec: dict[str, Any] = _fields(
            {
                key: value
                for key, value in (
                    ("params", params),
                    ("defaults", defaults),
                    ("on_failure", on_failure),
                    ("concurrency", concurrency),
                    ("schedule", schedule),
                )
                if value is not None
            }
        )
        self.components: dict[str, dict[str, Any]] = {}
        self.steps: dict[str, StepHandle] = {}
        self.final: dict[str, StepHandle] = {}

    @property
    def params(self) -> Names:
        """``{{params.X}}`` for each declared parameter X."""
        return Names("params", self.spec.get("params", {}))

    def component(self, name: str, **fields: Any) -> str:
        """Declare a reusable component; returns its name, for ``uses``."""
        self.components[name] = _fields(fields)
        return name

    def step(self, name: str, **fields: Any) -> StepHandle:
        """Add a step (a name given twice replaces the earlier step)."""
        handle = StepHandle(name, _fields(fields))
        self.steps[name] = handle
        return handle

    def finally_step(self, name: str, **fields: Any) -> StepHandle:
        """Add a step of ``finally``: run once when every step has ended."""
        handle = StepHandle(name, _fields(fields))
        self.final[name] = handle
        return handle

    def to_dict(self) -> dict[str, Any]:
        """The document as plain data (not validated)."""
        spec = dict(self.spec)
        if self.components:
            spec["components"] = dict(self.components)
        spec["steps"] = {name: handle.fields for name, handle in self.steps.items()}
        if self.final:
            spec["finally"] = {name: handle.fields for name, handle in self.final.items()}
        return {
            "apiVersion": "phalanx/v1",
            "kind": "Pipeline",
            "metadata": dict(self.metadata),
            "spec": spec,
        }

    def build(self, *, source: str = "<dsl>") -> PipelineDocument:
        """The validated document; raises ``DocumentError`` as loading would."""
        return build_pipeline(self.to_dict(), source=source)

    def to_yaml(self) -> str:
        """The validated document as YAML."""
        return self.build().to_yaml()

    @classmethod
    def from_document(cls, document: PipelineDocument) -> PipelineBuilder:
        """A builder holding ``document``'s steps, to change and build again."""
        data = document.to_dict()
        metadata = data["metadata"]
        builder = cls(
            metadata["name"],
            labels=metadata.get("labels"),
            annotations=metadata.get("annotations"),
        )
        spec = dict(data["spec"])
        builder.components = dict(spec.pop("components", {}))
        builder.steps = {n: StepHandle(n, f) for n, f in spec.pop("steps").items()}
        builder.final = {n: StepHandle(n, f) for n, f in spec.pop("finally", {}).items()}
        builder.spec = spec
        return builder
