"""The Job a unit of a step runs as: its templates rendered, its defaults applied.

Guarantees of ``job_spec``: the result is a validated ``JobSpec`` (so it converts to a
domain Job and passes every limit of ``phalanx.spec.limits``) or ``InvalidInput``
naming the step, the field and the fix (a reference that does not resolve, a rendered
command over the limits). Templates are rendered by ``phalanx.spec.pipeline.templates``
(values quoted inside shell scripts). A command step becomes one role ``main`` of one
replica with the step's resources, image and env; a job step keeps its roles, each
role's command and env rendered, the pipeline's default env under each role's and the
step's image for roles without one. The queue is the step's (see ``dag``); the step's
``timeout`` becomes ``walltime`` (a job step's own walltime wins); ``maxRetry`` is 0:
the workflow controller retries a step by its ``retry`` policy, one job per attempt.
``PHALANX_RUN_ID`` and ``PHALANX_STEP`` (``train`` or ``train[3]``) are set in every
task's environment. The datasets the step reads are on its job's roles (a command
step's on ``main``), each pinned to the listing ``datasets`` gives it
(``workflow.datasets.pins``: ``NAME@sha256:...``), left by name where it gives none. ``attempt_ended`` says how an attempt whose job failed or was
preempted ended: the cause a retry policy's ``on`` names, and the unit's reason; one rule
for every driver of runs (the simulator's replay; the controller's ``_attempt_ended``
says the same).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping
from dataclasses import replace
from typing import Any, Final

from pydantic import ValidationError

from phalanx.domain.errors import InvalidInput
from phalanx.spec.diagnostics import problems_of
from phalanx.spec.job import JobSpec
from phalanx.spec.pipeline.dag import Graph, StepNode
from phalanx.spec.pipeline.parts import FailureCause
from phalanx.spec.pipeline.templates import Context, Template, Value, render_argv
from phalanx.workflow.planner import RunState, Start, Unit, base_context, render_value

#: The role of a command step's job.
MAIN_ROLE: Final = "main"
#: Longest job name (a DNS-1123 subdomain).
_MAX_NAME: Final = 253


def job_name(run_id: str, unit: Unit, attempt: int) -> str:
    """The name of the job of ``attempt`` (1-based) of ``unit`` in run ``run_id``: a valid
    DNS-1123 name, the same for the same arguments (so a restarted controller finds the
    job it submitted) and different for different ones (a long or unusual run id is
    shortened with a hash of it)."""
    cleaned = re.sub(r"[^a-z0-9-]+", "-", run_id.lower()).strip("-") or "run"
    if cleaned != run_id or len(cleaned) > 100:
        digest = hashlib.sha256(run_id.encode()).hexdigest()[:10]
        cleaned = f"{cleaned[:80].strip('-')}-{digest}".strip("-")
    index = "" if unit.index is None else f"-{unit.index}"
    return f"{cleaned}-{unit.step}{index}-{attempt}"[:_MAX_NAME]


def attempt_ended(job: str, *, failed: bool, reason: str, message: str) -> tuple[FailureCause, str]:
    """Why the attempt whose job ``job`` ended Failed (``failed``) or was preempted (its
    tasks evicted: the attempt is over, the job is cancelled) ended: the ``retry.on``
    cause and the unit's reason. ``preempted``; a walltime (``WalltimeExceeded``) is
    ``failed`` (timed out); ``nodeLost`` when the job's reason code or message says a
    node was lost; else ``failed`` (a non-zero exit)."""
    if not failed:
        return "preempted", f"job {job} was preempted: {message}"[:2000]
    if reason == "WalltimeExceeded":
        return "failed", f"job {job} timed out: {message}"[:2000]
    cause: FailureCause = "nodeLost" if "lost" in f"{reason} {message}".lower() else "failed"
    # The job's own retries are none (maxRetry 0): the step's policy decides.
    said = message.removesuffix("; no retries left (maxRetry 0)")
    return cause, f"job {job} failed: {said}"[:2000]


def _pinned(reference: str, datasets: Mapping[str, str]) -> str:
    """A role's dataset ``reference`` pinned to its listing in ``datasets``, if any."""
    name = reference.partition("@")[0]
    return f"{name}@{datasets[name]}" if name in datasets else reference


def _env(env: dict[str, str], context: Context, field: str) -> dict[str, str]:
    return {
        name: Template.parse(value).render(context, field=f"{field}.{name}")
        for name, value in env.items()
    }


def unit_context(
    graph: Graph, state: RunState, start: Start, *, outputs: Mapping[str, str]
) -> Context:
    """The full context of a unit the planner started: params, upstream outputs, its item,
    its inputs rendered (an input that is one reference keeps the value: a list stays a
    list) and ``outputs`` (``Workspace.outputs``). Raises ``TemplateError``."""
    node = graph.node(start.unit.step)
    base = base_context(graph, state, start.unit, item=start.item, has_item=start.has_item)
    inputs: dict[str, Value] = {}
    for kind, table in (("artifacts", node.inputs.artifacts), ("params", node.inputs.params)):
        for name, text in table.items():
            inputs[name] = render_value(text, base, field=f"inputs.{kind}.{name}")
    return replace(base, inputs=inputs, outputs=dict(outputs))


def job_spec(
    node: StepNode,
    context: Context,
    *,
    unit: str | None = None,
    mounts: tuple[str, ...] = (),
    datasets: Mapping[str, str] | None = None,
) -> JobSpec:
    """The job of ``node`` run in ``context`` (with its inputs, outputs and item);
    ``unit``: its name in ``PHALANX_STEP`` (default: the step's); ``mounts``: host
    directories every role with an image mounts (the workspace, so that a container
    reads and writes artifacts at the paths the templates give); ``datasets``: the
    listing each dataset the step reads is pinned to. Raises ``InvalidInput`` (a
    ``TemplateError`` for a reference that does not resolve)."""
    ours = {"PHALANX_RUN_ID": context.run_id, "PHALANX_STEP": unit or node.name}
    data: dict[str, Any]
    if node.job is None:
        assert node.command is not None  # the graph guarantees one of them
        data = {
            "queue": node.queue,
            "roles": [
                {
                    "name": MAIN_ROLE,
                    "replicas": 1,
                    "resources": dict(node.resources or {}),
                    "command": render_argv(node.command, context, field="command"),
                    "env": {**_env(dict(node.env), context, "env"), **ours},
                    **({"image": node.image} if node.image else {}),
                    **({"model": node.model.model_dump(mode="json")} if node.model else {}),
                    **({"datasets": list(node.datasets)} if node.datasets else {}),
                }
            ],
        }
    else:
        data = node.job.model_dump(mode="json", by_alias=True, exclude_unset=True)
        data["queue"] = node.queue
        defaults = _env(dict(node.env), context, "env")
        for i, role in enumerate(data["roles"]):
            field = f"job.roles[{i}]"
            role["command"] = render_argv(
                role.get("command", []), context, field=f"{field}.command"
            )
            role["env"] = {**defaults, **_env(role.get("env", {}), context, f"{field}.env"), **ours}
            if node.image and "image" not in role:
                role["image"] = node.image
    for role in data["roles"]:
        if role.get("datasets"):
            role["datasets"] = [_pinned(str(ref), datasets or {}) for ref in role["datasets"]]
        if mounts and role.get("image"):
            role["mounts"] = list(dict.fromkeys([*role.get("mounts", []), *mounts]))
    if node.timeout is not None and "walltime" not in data:
        data["walltime"] = node.timeout
    data["maxRetry"] = 0
    try:
        return JobSpec.model_validate(data)
    except ValidationError as error:
        problem = problems_of(error)[0]
        raise InvalidInput(
            f"step {unit or node.name}: the rendered job: {problem.detail}".removesuffix(
                f"; fix: {problem.fix}"
            ),
            field=problem.path or None,
            fix=problem.fix or "check the values the templates insert",
        ) from None
