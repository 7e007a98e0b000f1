"""Import an OpenPAI job protocol document (``protocolVersion: 2``, ``type: job``).

The result is a ``JobDocument``, validated like a hand-written one. A malformed
OpenPAI document raises ``ValidationError`` whose paths are OpenPAI's own
(``taskRoles.worker.resourcePerInstance.gpu``), each with its fix.

Mapping:

- ``name`` becomes ``metadata.name`` and each task role name a role name, made
  DNS-1123 deterministically: capitals become lowercase, ``_`` becomes ``-``, and
  leading and trailing ``-`` are dropped (``TF_cifar10_`` -> ``tf-cifar10``). A name
  with nothing left, or longer than phalanx allows (253 for a job, 63 for a role),
  is refused; so are two task roles that become the same name. The original job
  name is kept in the ``phalanx.io/openpai-name`` annotation.
- ``defaults.virtualCluster`` becomes ``queue`` (named the same way); without it the
  job names no queue, and goes to its user's default queue, else to the queue named
  ``default`` (as in OpenPAI).
- ``jobRetryCount`` becomes ``maxRetry`` (OpenPAI's default 0, not phalanx's 3).
- ``extras.gangAllocation`` (default true) becomes ``minAvailable``: every replica of
  the job when true, 1 when false.
- A task role becomes a role: ``instances`` -> ``replicas``; ``resourcePerInstance``
  ``cpu`` (cores), ``memoryMB`` (as ``Mi``, like OpenPAI's launcher) and ``gpu``;
  ``extraContainerOptions.infiniband: true`` adds ``rdma/hca: 1``.
- a task role's ``dockerImage`` prerequisite's ``uri`` becomes the role's ``image`` (an
  OCI reference, checked at the prerequisite's ``uri``).
- ``commands`` become one shell string (run as ``/bin/sh -c``): the selected
  deployment's ``preCommands``, the commands, then its ``postCommands``, each trimmed
  and joined with `` && `` (as OpenPAI's rest-server does), after
  ``<% $parameters.x %>``, ``<% $script.x %>``, ``<% $data.x %>`` and
  ``<% $output.x %>`` are substituted (see ``openpai_commands`` for what is refused
  where OpenPAI would render an empty string).

Read but not honoured, each reported as a ``Notice`` to ``note`` naming its OpenPAI
path and what phalanx does instead (worded in ``openpai_schema``): the job's
``version``, ``contributor``, ``description`` and ``secrets`` (never copied; a
``$secrets`` reference in a command is refused); per task role a ``completion`` other
than OpenPAI's default (a phalanx job fails at its first failed task and succeeds
when all its tasks have), a ``taskRetryCount`` other than 0 (phalanx retries whole jobs),
``resourcePerInstance.ports``, ``extraContainerOptions`` other than ``infiniband``, and
a listed prerequisite that names a runtime ``plugin``; a ``dockerimage``
prerequisite's ``auth``; every other extension of a prerequisite (but its
``protocolVersion``, ``version``, ``contributor`` and ``description``), a deployment or
``extras`` (every entry but ``gangAllocation``: ``hivedScheduler``,
``com.microsoft.pai.runtimeplugin``, ``storages`` ...). Script, data and output
prerequisites are used as OpenPAI uses them: values the commands refer to (the
commands fetch them). An unknown field is refused where the protocol is closed (see
``openpai_schema``). Still checked, because a broken reference is a broken document:
``dockerImage``, ``script``, ``data``, ``output`` and a task role's
``prerequisites`` must name a prerequisite of the right type, ``defaults.deployment``
a deployment; a prerequisite a task role lists must not carry runtime-plugin
``callbacks`` (their commands would be lost).

The limits of ``phalanx.spec.limits`` hold for imported jobs too; ``instances``,
``jobRetryCount`` and the number of task roles are reported at the OpenPAI field.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any, Final

from pydantic import TypeAdapter, ValidationError
from pydantic_core import InitErrorDetails, PydanticCustomError

from phalanx.spec.common import API_VERSION, ImageRef, Loc, located
from phalanx.spec.diagnostics import Notice
from phalanx.spec.importers import openpai_commands, openpai_schema
from phalanx.spec.importers.openpai_schema import Deployment, OpenPaiJob, Prerequisite, TaskRole
from phalanx.spec.job import JobDocument
from phalanx.spec.limits import MAX_LABEL, MAX_NAME

#: The key that marks a mapping as an OpenPAI document (it has no apiVersion or kind).
PROTOCOL_KEY: Final = "protocolVersion"

#: Annotation that keeps the job's name as OpenPAI wrote it.
OPENPAI_NAME_ANNOTATION: Final = "phalanx.io/openpai-name"

_OPENPAI_NAME: Final = re.compile(r"[A-Za-z0-9_-]+")
_MAX_JOB_NAME: Final = MAX_NAME
_MAX_ROLE_NAME: Final = MAX_LABEL

_IMAGE: Final = TypeAdapter(ImageRef)


def is_openpai(raw: Mapping[str, Any]) -> bool:
    """Whether ``raw`` is meant as an OpenPAI document: ``protocolVersion`` and no
    ``apiVersion`` or ``kind`` (its version and type are then checked by the import)."""
    return PROTOCOL_KEY in raw and "apiVersion" not in raw and "kind" not in raw


def import_openpai_job(
    raw: Mapping[str, Any], *, note: Callable[[Notice], None] | None = None
) -> JobDocument:
    """The ``JobDocument`` for an OpenPAI job; raises ``ValidationError`` naming the
    OpenPAI field and the fix. ``note`` gets a ``Notice`` for every field read but not
    honoured."""
    job = OpenPaiJob.model_validate(raw)
    try:
        built = _job_document(job)
    except PydanticCustomError as error:
        details = InitErrorDetails(type=error, loc=(), input=None)
        raise ValidationError.from_exception_data("OpenPAI job", [details]) from None
    document = JobDocument.model_validate(built)
    if note is not None:
        for notice in openpai_schema.notices(job):
            note(notice)
    return document


def dns_name(name: str, *, max_length: int, at: Loc = ()) -> str:
    """The DNS-1123 form of an OpenPAI name (see the module docstring); raises a
    validation error located at ``at`` when there is none."""
    if not _OPENPAI_NAME.fullmatch(name):
        raise located(
            f"{name[:60]!r} holds characters other than letters, digits, '_' and '-'",
            "rename it with letters, digits, '_' and '-' only",
            at=at,
        )
    result = name.lower().replace("_", "-").strip("-")
    if not result:
        raise located(
            f"{name[:60]!r} has no letter or digit, so it has no DNS-1123 form",
            "put at least one letter or digit in the name",
            at=at,
        )
    if len(result) > max_length:
        raise located(
            f"{len(result)} characters is more than the {max_length} phalanx allows here",
            f"shorten it to {max_length} characters",
            at=at,
        )
    return result


def _job_document(job: OpenPaiJob) -> dict[str, Any]:
    prerequisites = _prerequisites(job.prerequisites)
    selected = _selected_deployment(job)
    roles: list[dict[str, Any]] = []
    origin: dict[str, str] = {}
    for written, role in job.task_roles.items():
        at: Loc = ("taskRoles", written)
        name = dns_name(written, max_length=_MAX_ROLE_NAME, at=at)
        if name in origin:
            raise located(
                f"becomes role {name!r}, as {origin[name]!r} does",
                "rename one of the two task roles",
                at=at,
            )
        origin[name] = written
        scopes = _scopes(job, written, role, prerequisites)
        roles.append(
            {
                "name": name,
                "replicas": role.instances,
                "resources": _resources(role),
                "command": _command(written, role, selected, scopes),
            }
        )
        if role.docker_image is not None:
            roles[-1]["image"] = prerequisites["dockerimage", role.docker_image].uri
    total = sum(role.instances for role in job.task_roles.values())
    spec: dict[str, Any] = {
        "minAvailable": total if job.extras.gang_allocation else 1,
        "maxRetry": job.job_retry_count,
        "roles": roles,
    }
    queue = job.defaults.virtual_cluster
    if queue is not None:
        at = ("defaults", "virtualCluster")
        spec["queue"] = dns_name(queue, max_length=_MAX_JOB_NAME, at=at)
    return {
        "apiVersion": API_VERSION,
        "kind": "Job",
        "metadata": {
            "name": dns_name(job.name, max_length=_MAX_JOB_NAME, at=("name",)),
            "annotations": {OPENPAI_NAME_ANNOTATION: job.name},
        },
        "spec": spec,
    }


def _prerequisites(items: list[Prerequisite]) -> dict[tuple[str, str], Prerequisite]:
    found: dict[tuple[str, str], Prerequisite] = {}
    for i, item in enumerate(items):
        if (item.type, item.name) in found:
            raise located(
                f"a {item.type} prerequisite named {item.name!r} is defined twice",
                "keep one of them, or rename one",
                at=("prerequisites", i, "name"),
            )
        if item.type == "dockerimage":
            _check_image(item.uri, at=("prerequisites", i, "uri"))
        found[item.type, item.name] = item
    return found


def _check_image(uri: Any, *, at: Loc) -> None:
    """``uri`` names a container image as ``image`` of a role takes it."""
    try:
        _IMAGE.validate_python(uri, strict=True)
    except ValidationError:
        shown = repr(uri)[:60] if isinstance(uri, str) else f"a {type(uri).__name__}"
        raise located(
            f"{shown} is not an image reference",
            "write the image as registry/path:tag (for example openpai/standard:python_3.6)",
            at=at,
        ) from None


def _selected_deployment(job: OpenPaiJob) -> tuple[int, Deployment] | None:
    names = [deployment.name for deployment in job.deployments]
    for i, name in enumerate(names):
        if name in names[:i]:
            raise located(
                f"deployment {name!r} is defined twice",
                "keep one of them, or rename one",
                at=("deployments", i, "name"),
            )
        for role in job.deployments[i].task_roles:
            if role not in job.task_roles:
                raise located(
                    f"{role!r} is not a task role of this job",
                    f"name one of: {', '.join(job.task_roles)}",
                    at=("deployments", i, "taskRoles", role),
                )
    chosen = job.defaults.deployment
    if chosen is None:
        return None
    if chosen not in names:
        raise located(
            f"no deployment is named {chosen!r}",
            f"name one of: {', '.join(names)}" if names else "remove defaults.deployment",
            at=("defaults", "deployment"),
        )
    return names.index(chosen), job.deployments[names.index(chosen)]


def _scopes(
    job: OpenPaiJob,
    written: str,
    role: TaskRole,
    prerequisites: Mapping[tuple[str, str], Prerequisite],
) -> dict[str, Any]:
    """What the task role's commands may refer to; checks the role's references."""
    scopes: dict[str, Any] = {"parameters": job.parameters}
    for field, kind, name in (
        ("dockerImage", "dockerimage", role.docker_image),
        ("script", "script", role.script),
        ("data", "data", role.data),
        ("output", "output", role.output),
    ):
        if name is None:
            scopes[kind] = None
            continue
        if (kind, name) not in prerequisites:
            raise located(
                f"no {kind} prerequisite is named {name!r}",
                _choose(kind, prerequisites),
                at=("taskRoles", written, field),
            )
        scopes[kind] = prerequisites[kind, name].model_dump(by_alias=True)
    by_name = {name: item for (_, name), item in prerequisites.items()}
    for i, name in enumerate(role.prerequisites):
        at: Loc = ("taskRoles", written, "prerequisites", i)
        if name not in by_name:
            raise located(
                f"no prerequisite is named {name!r}",
                f"name one of: {', '.join(by_name) or 'none is defined'}",
                at=at,
            )
        if by_name[name].callbacks:
            raise located(
                f"prerequisite {name!r} runs commands through an OpenPAI runtime plugin, "
                "which phalanx does not run",
                f"move its commands into taskRoles.{written}.commands and drop it here",
                at=at,
            )
    return scopes


def _choose(kind: str, prerequisites: Mapping[tuple[str, str], Prerequisite]) -> str:
    names = [name for (k, name) in prerequisites if k == kind]
    if names:
        return f"name one of: {', '.join(names)}"
    return f"add a {kind} prerequisite under prerequisites, or remove this field"


def _resources(role: TaskRole) -> dict[str, int | str]:
    wanted = role.resource_per_instance
    resources: dict[str, int | str] = {
        "cpu": wanted.cpu,
        "memory": f"{wanted.memory_mb}Mi",
        "gpu": wanted.gpu,
    }
    if role.extra_container_options.infiniband:
        resources["rdma/hca"] = 1
    return resources


def _command(
    written: str,
    role: TaskRole,
    selected: tuple[int, Deployment] | None,
    scopes: Mapping[str, Any],
) -> str:
    """The task role's lines (deployment pre- and post-commands around its own),
    rendered and joined; each line is located for errors."""
    lines: list[tuple[str, Loc]] = []
    extra = None if selected is None else selected[1].task_roles.get(written)
    base: Loc = ()
    if selected is not None:
        base = ("deployments", selected[0], "taskRoles", written)
    if extra is not None:
        lines += [(line, (*base, "preCommands", i)) for i, line in enumerate(extra.pre_commands)]
    lines += [(line, ("taskRoles", written, "commands", i)) for i, line in enumerate(role.commands)]
    if extra is not None:
        lines += [(line, (*base, "postCommands", i)) for i, line in enumerate(extra.post_commands)]
    rendered = []
    for line, at in lines:
        text = openpai_commands.render(line, scopes, at=at, role=written).strip()
        if not text:
            raise located("the command line is empty", "remove the line, or write a command", at=at)
        rendered.append(text)
    return openpai_commands.join(rendered)
