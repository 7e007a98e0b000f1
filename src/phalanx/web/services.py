"""How the console shows an inference service: its document as YAML, and a rollout's
steps with the one it stands at marked.

Guarantees: ``document_text`` is the document the API gave, every key and value kept in
its order, as YAML text (the template escapes it: a value is never markup);
``steps_of`` gives every step of a rollout in order, exactly one of them ``current``
(the API's ``step``, clamped into the list), those before it ``taken`` and those after
it ``ahead``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

import yaml

from phalanx.client import RolloutView

StepState = Literal["taken", "current", "ahead"]


@dataclass(frozen=True, slots=True, kw_only=True)
class Step:
    """One step of a rollout: the new version's share of the predictor's traffic at it,
    in percent, and whether the rollout is past it, at it, or not there yet."""

    share: int
    state: StepState


def steps_of(rollout: RolloutView) -> list[Step]:
    """``rollout``'s steps in order, the one it stands at (``rollout.step``) ``current``."""
    if not rollout.steps:
        return []
    at = min(max(rollout.step, 0), len(rollout.steps) - 1)
    return [
        Step(share=share, state="taken" if i < at else "current" if i == at else "ahead")
        for i, share in enumerate(rollout.steps)
    ]


def document_text(document: Mapping[str, Any]) -> str:
    """``document`` as block-style YAML, in the order the API gave its keys."""
    return yaml.safe_dump(
        dict(document), sort_keys=False, allow_unicode=True, default_flow_style=False
    )
