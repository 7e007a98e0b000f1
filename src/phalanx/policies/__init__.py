"""Shipped scheduling policies: SchedulerConfig documents selectable by name.

``fifo``, ``sjf-oracle``, ``tiresias-las``, ``tiresias-pollux``, ``drf``,
``volcano-default``, ``pollux``, ``sia`` and ``phalanx-default`` live beside this module
as YAML; any SchedulerConfig file works too.
"""

from __future__ import annotations

from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from phalanx.domain.errors import DocumentError
from phalanx.engine.framework.config import SchedulerConfig
from phalanx.spec import SchedulerConfigDocument, load_documents

ORACLE_ANNOTATION = "phalanx.io/oracle-runtime"


@dataclass(frozen=True, slots=True, kw_only=True)
class Policy:
    """A named scheduler configuration and what it asks of a simulator."""

    name: str
    config: SchedulerConfig
    oracle_runtime: bool = False  # jobs' runtime estimates must be their true durations


def policy_names() -> tuple[str, ...]:
    """Names of the shipped policies, sorted."""
    folder = resources.files(__package__)
    return tuple(
        sorted(p.name.removesuffix(".yaml") for p in folder.iterdir() if p.name.endswith(".yaml"))
    )


def load_policy(name_or_path: str) -> Policy:
    """A shipped policy by name, or the SchedulerConfig document at a path."""
    if name_or_path in policy_names():
        text = resources.files(__package__).joinpath(f"{name_or_path}.yaml").read_text()
        source = f"policy {name_or_path}"
    else:
        path = Path(name_or_path)
        if not path.is_file():
            raise DocumentError(
                f"{name_or_path!r} is neither a shipped policy nor a file",
                field="--scheduler",
                fix=f"use one of {', '.join(policy_names())}, or a SchedulerConfig YAML file",
            )
        text, source = path.read_text(encoding="utf-8"), str(path)
    documents = [
        d for d in load_documents(text, source=source) if isinstance(d, SchedulerConfigDocument)
    ]
    if len(documents) != 1:
        raise DocumentError(
            f"{source} must hold exactly one SchedulerConfig document",
            field="kind",
            fix="put one `kind: SchedulerConfig` document in the file",
        )
    document = documents[0]
    return Policy(
        name=document.metadata.name,
        config=document.to_engine(),
        oracle_runtime=document.metadata.annotations.get(ORACLE_ANNOTATION) == "true",
    )
