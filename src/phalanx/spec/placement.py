"""Placement constraints shared by jobs and clusters: tolerations, affinity terms, taints.

Each spec converts with ``to_domain()`` into the domain value of the same name and
is guaranteed to be internally consistent (an ``Exists`` toleration has no value,
an ``In`` term has values, a ``Gt`` term has exactly one integer).
"""

from __future__ import annotations

from typing import Annotated, Literal, Self

from pydantic import AfterValidator, Field, model_validator

from phalanx.domain.job import NodeSelectorRequirement, SelectorOperator
from phalanx.domain.node import Taint, TaintEffect, Toleration
from phalanx.spec.common import LabelKey, LabelValue, SpecModel, check_label_key, located

Effect = Literal["NoSchedule", "PreferNoSchedule", "NoExecute"]


def _empty_or_label_key(key: str) -> str:
    return check_label_key(key) if key else key


class TolerationSpec(SpecModel):
    """``{key, operator: Equal|Exists, value, effect}``; an empty key with Exists tolerates all."""

    key: Annotated[str, AfterValidator(_empty_or_label_key)] = ""
    """The taint key tolerated; empty with operator Exists: every taint."""
    operator: Literal["Equal", "Exists"] = "Equal"
    """Equal (the taint's value must be value) or Exists (any value)."""
    value: LabelValue = ""
    """The taint value tolerated, with operator Equal."""
    effect: Effect | None = None
    """The taint effect tolerated (NoSchedule, PreferNoSchedule, NoExecute); omitted: every
    effect."""

    @model_validator(mode="after")
    def _consistent(self) -> Self:
        if self.operator == "Exists" and self.value:
            raise located(
                "a toleration with operator Exists takes no value",
                "remove value, or use operator Equal",
                at=("value",),
            )
        if self.operator == "Equal" and not self.key:
            raise located(
                "a toleration with operator Equal needs a key",
                "set key, or use operator Exists to tolerate every taint",
                at=("key",),
            )
        return self

    def to_domain(self) -> Toleration:
        """The domain ``Toleration``."""
        effect = None if self.effect is None else TaintEffect(self.effect)
        return Toleration(key=self.key, operator=self.operator, value=self.value, effect=effect)


class AffinityTerm(SpecModel):
    """A required node-label condition ``{key, operator, values}`` (Kubernetes matchExpressions)."""

    key: LabelKey
    """The node label the condition is on."""
    operator: Literal["In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt"]
    """In, NotIn, Exists, DoesNotExist, Gt or Lt, as Kubernetes' matchExpressions."""
    values: list[LabelValue] = Field(default_factory=list)
    """The values In and NotIn compare with (one number for Gt and Lt)."""

    @model_validator(mode="after")
    def _values_fit_operator(self) -> Self:
        op = self.operator
        if op in ("In", "NotIn") and not self.values:
            raise located(f"operator {op} needs values", "list at least one value", at=("values",))
        if op in ("Exists", "DoesNotExist") and self.values:
            raise located(f"operator {op} takes no values", "remove values", at=("values",))
        if op in ("Gt", "Lt") and (len(self.values) != 1 or not self.values[0].isdigit()):
            raise located(
                f"operator {op} needs exactly one non-negative integer value",
                "write e.g. values: ['4']",
                at=("values",),
            )
        return self

    def to_domain(self) -> NodeSelectorRequirement:
        """The domain ``NodeSelectorRequirement``."""
        return NodeSelectorRequirement(
            key=self.key, operator=SelectorOperator(self.operator), values=tuple(self.values)
        )


class TaintSpec(SpecModel):
    """A node taint ``{key, value, effect}``; effect defaults to NoSchedule."""

    key: LabelKey
    """The taint's key."""
    value: LabelValue = ""
    """The taint's value."""
    effect: Effect = "NoSchedule"
    """NoSchedule (no new task without a toleration), PreferNoSchedule or NoExecute."""

    def to_domain(self) -> Taint:
        """The domain ``Taint``."""
        return Taint(key=self.key, value=self.value, effect=TaintEffect(self.effect))
