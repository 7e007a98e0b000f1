"""Cache keys of steps (the content hashes that go into them: ``workflow.contents``).

A step's key is the SHA-256 of one canonical JSON document (``KeyMaterial.document``):

- ``version``: ``CACHE_VERSION`` (phalanx's own; bumped when this document changes) and
  the step's ``cache.version``;
- ``templates``: every template of the step (command, env, inputs, when, foreach, job
  roles) rendered with ``key_context``: real values of params, items and upstream output
  params, but stable placeholders (``<outputs.model>``, ``<run.id>``) for what differs
  from run to run without changing the result: paths in the run's workspace and the run
  id; an excluded param is a placeholder too;
- ``image``, the job spec of a job step (less what only schedules it: queue, user,
  priority, preemptible, walltime, estimates, maxRetry), ``params`` (those the step reads, minus
  ``cache.excludeParams``) and ``item``;
- ``content``: the content hash of every artifact the step reads (its input artifacts and
  upstream artifacts it refers to) and of every file of ``cache.files``;
- ``datasets``: the listing digest of each dataset the step reads (``StepNode.datasets``),
  by name, as pinned when the unit started (``workflow.datasets.pins``): the very
  listing its job is pinned to;
- ``outputs``: the names of the step's outputs;
- ``user``: the run's user, so that no run of another user is ever served an entry, or
  overwrites one (a user reads the artifacts of their own runs only).

Guarantees: the same material gives the same key on any machine and Python (keys sorted,
no whitespace, UTF-8, no NaN); changing one used param, one byte of an input artifact or
listed file, the listing of a dataset it reads, the image, the command, the item or
either version changes it; the order of env keys, of params or of datasets does not, nor
do the run id and workspace paths. ``servable``
tells whether an entry may be used:
never past its ttl, never with a recorded artifact gone (a miss, not an error).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any, Final

from phalanx.spec.pipeline.dag import Graph, StepNode
from phalanx.spec.pipeline.templates import Context, Kind, Template, Value, render_argv

#: Phalanx's part of every key: bumped whenever what goes into a key changes.
CACHE_VERSION: Final = "phalanx-cache/3"
#: Fields of a job step's job that decide where and when it runs, not what it computes:
#: left out of the key (a command step's queue is not in it either).
_SCHEDULING_ONLY: Final = {
    "queue",
    "user",
    "priority",
    "preemptible",
    "walltime",
    "runtime_estimate",
    "starvation_threshold",
    "max_retry",
}


def placeholder(ref: str) -> str:
    """What a run-specific value stands as in a key: ``<outputs.model>``."""
    return f"<{ref}>"


def artifact_references(graph: Graph, node: StepNode) -> tuple[str, ...]:
    """What the step reads whose *content* goes into its key, as ``inputs.NAME`` and
    ``steps.STEP.outputs.NAME``; the controller hashes each (``hash_content``)."""
    found = [f"inputs.{name}" for name in node.inputs.artifacts]
    for loc, text in node.templates:
        if loc[0] == "when" or loc[:2] == ("inputs", "artifacts"):
            continue  # a condition reads values; an input artifact is inputs.NAME above
        for ref in Template.parse(text).references:
            if ref.kind is Kind.STEPS and ref.name in graph.node(ref.step).outputs.artifacts:
                found.append(f"steps.{ref.step}.outputs.{ref.name}")
    return tuple(dict.fromkeys(found))


def key_context(graph: Graph, node: StepNode, context: Context) -> Context:
    """``context`` with run-specific values replaced by placeholders (see the module
    docstring): output and input artifact paths, upstream artifacts, the run id and the
    params of ``cache.excludeParams``."""
    excluded = set(node.cache.exclude_params)
    params = {
        name: placeholder(f"params.{name}") if name in excluded else value
        for name, value in context.params.items()
    }
    inputs = {
        name: placeholder(f"inputs.{name}") if name in node.inputs.artifacts else value
        for name, value in context.inputs.items()
    }
    outputs = {name: placeholder(f"outputs.{name}") for name in node.outputs.names}
    steps: dict[str, dict[str, Value]] = {}
    for step, values in context.steps.items():
        artifacts = set(graph.node(step).outputs.artifacts)
        steps[step] = {
            name: placeholder(f"steps.{step}.outputs.{name}") if name in artifacts else value
            for name, value in values.items()
        }
    return replace(
        context,
        params=params,
        inputs=inputs,
        outputs=outputs,
        steps=steps,
        run_id=placeholder("run.id"),
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class KeyMaterial:
    """Everything a step's key is made of (see the module docstring)."""

    step: str
    templates: Mapping[str, str]
    image: str | None
    job: Mapping[str, Any] | None
    params: Mapping[str, Value]
    item: Value = None
    content: Mapping[str, str] = field(default_factory=dict)
    datasets: Mapping[str, str] = field(default_factory=dict)  # name -> listing digest
    outputs: tuple[str, ...] = ()
    version: str = ""
    user: str = ""

    def document(self) -> dict[str, Any]:
        """The canonical document hashed into the key (shown by ``cache show``)."""
        return {
            "version": [CACHE_VERSION, self.version],
            "step": self.step,
            "templates": dict(self.templates),
            "image": self.image,
            "job": None if self.job is None else dict(self.job),
            "params": dict(self.params),
            "item": self.item,
            "content": dict(self.content),
            "datasets": dict(self.datasets),
            "outputs": sorted(self.outputs),
            "user": self.user,
        }

    def key(self) -> str:
        """The hex SHA-256 of the canonical JSON of ``document``."""
        text = json.dumps(
            self.document(),
            sort_keys=True,
            separators=(",", ":"),
            ensure_ascii=False,
            allow_nan=False,
        )
        return hashlib.sha256(text.encode()).hexdigest()


def key_material(
    graph: Graph,
    node: StepNode,
    context: Context,
    *,
    content: Mapping[str, str],
    files: Mapping[str, str],
    user: str = "",
    datasets: Mapping[str, str] | None = None,
) -> KeyMaterial:
    """The key material of ``node`` run in ``context`` (with its inputs and outputs) by
    ``user``; ``content``: the hash of each of ``artifact_references``; ``files``: of
    each of ``cache.files``; ``datasets``: the listing each of ``node.datasets`` is
    pinned to (every one of them: ``KeyError`` for one missing, a caller's bug). Raises
    ``TemplateError`` as rendering does."""
    keyed = key_context(graph, node, context)
    templates: dict[str, str] = {}
    if node.command is not None:
        for i, text in enumerate(render_argv(node.command, keyed, field="command")):
            templates[f"command[{i}]"] = text
    for loc, text in node.templates:
        place = ".".join(str(part) for part in loc)
        if loc[0] in ("command", "when"):
            continue  # the command is rendered above; when decides whether, not what
        templates[place] = Template.parse(text).render(keyed, field=place)
    params = {
        name: context.params[name]
        for name in sorted(node.params_used - set(node.cache.exclude_params))
        if name in context.params
    }
    job = None
    if node.job is not None:
        job = node.job.model_dump(mode="json", by_alias=True, exclude=_SCHEDULING_ONLY)
    return KeyMaterial(
        step=node.name,
        templates=templates,
        image=node.image,
        job=job,
        params=params,
        item=context.item if context.has_item else None,
        content={**{f"file:{k}": v for k, v in files.items()}, **dict(content)},
        datasets={name: (datasets or {})[name] for name in node.datasets},
        outputs=node.outputs.names,
        version=node.cache.version,
        user=user,
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class CacheEntry:
    """A cached result: the step's outputs and where its artifacts are, with lineage (the
    run and step that produced them). Written only when a step succeeded."""

    key: str
    pipeline: str
    step: str
    run_id: str
    created: float  # seconds since the epoch
    params: Mapping[str, Value] = field(default_factory=dict)  # output params
    artifacts: Mapping[str, str] = field(default_factory=dict)  # output artifact -> URL


def servable(
    entry: CacheEntry, *, ttl: float | None, now: float, exists: Callable[[str], bool]
) -> bool:
    """Whether ``entry`` may be served at ``now``: within ``ttl`` of its creation and
    every artifact still present (``exists(url)``). A false answer is a miss."""
    if ttl is not None and now - entry.created > ttl:
        return False
    return all(exists(url) for url in entry.artifacts.values())
