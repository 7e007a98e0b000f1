"""The read schema of the OpenPAI job protocol (``phalanx.spec.importers.openpai``), and
what phalanx says of each field it reads but does not honour.

Guarantees: a field is checked for its shape, and a failure names its OpenPAI path. An
unknown field is refused at the top level, in a task role, its ``resourcePerInstance``
and ``completion``, in ``defaults`` and in a deployment's task role; prerequisites,
deployments, ``extras`` and ``extraContainerOptions`` are open to extensions and keep
theirs (``Lenient``). ``notices`` gives a ``Notice`` naming its OpenPAI path and what
phalanx does instead for every field given that phalanx does not honour (the list is
in the ``openpai`` module's docstring): every extension of a lenient part but a
prerequisite's descriptive fields (values commands may refer to, as in OpenPAI), and
the declared fields phalanx reads but does not apply, where their value asks for
something other than what phalanx does (``taskRetryCount: 0`` asks for nothing more).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Annotated, Any, ClassVar, Final, Literal

from pydantic import Field

from phalanx.spec.common import Loc, SpecModel
from phalanx.spec.diagnostics import Notice, format_path
from phalanx.spec.importers.kubeflow_schema import ReadModel
from phalanx.spec.limits import MAX_REPLICAS, MAX_RETRY, MAX_ROLES

_ProtocolVersion = Literal[2, "2"]
_Count = Annotated[int, Field(ge=0)]

_PLUGIN: Final = "phalanx runs no OpenPAI runtime plugin"


class Lenient(ReadModel):
    """A part of the protocol open to extensions: unknown fields are kept, not checked,
    and reported (``notices``) unless ``silent``."""


class Prerequisite(Lenient):
    name: str
    type: Literal["dockerimage", "script", "data", "output"]
    uri: Any = None
    callbacks: list[Any] | None = None

    # Descriptive fields are values commands may refer to, as in OpenPAI. A runtime
    # plugin acts only for a task role that lists the prerequisite: it is reported (or,
    # with callbacks, refused) there.
    silent: ClassVar[frozenset[str]] = frozenset(
        {"protocolVersion", "version", "contributor", "description", "plugin"}
    )
    unhonoured: ClassVar[Mapping[str, str]] = {
        "auth": "phalanx pulls images as the node's runtime is logged in (or not at all: "
        "PHALANX_CONTAINER_PULL); these credentials are neither used nor kept"
    }


class Completion(SpecModel):
    min_failed_instances: int | None = None
    min_succeeded_instances: int | None = None


class ContainerOptions(Lenient):
    shm_mb: Annotated[_Count | None, Field(alias="shmMB")] = None
    infiniband: bool = False

    def notices(self, path: Loc) -> Iterator[Notice]:
        """Extensions, and ``shmMB`` when given."""
        yield from super().notices(path)
        if self.shm_mb is not None:
            reason = "phalanx sets no /dev/shm size: a container gets its runtime's default"
            yield _notice((*path, "shmMB"), reason)


class Resources(SpecModel):
    cpu: _Count
    memory_mb: Annotated[_Count, Field(alias="memoryMB")]
    gpu: _Count
    ports: dict[str, _Count] = Field(default_factory=dict)


class TaskRole(SpecModel):
    protocol_version: _ProtocolVersion | None = None
    instances: Annotated[int, Field(ge=1, le=MAX_REPLICAS)] = 1
    completion: Completion = Completion()
    task_retry_count: _Count = 0
    docker_image: str | None = None
    script: str | None = None
    data: str | None = None
    output: str | None = None
    prerequisites: list[str] = Field(default_factory=list)
    extra_container_options: ContainerOptions = ContainerOptions()
    resource_per_instance: Resources
    commands: Annotated[list[str], Field(min_length=1)]


class DeploymentRole(SpecModel):
    pre_commands: list[str] = Field(default_factory=list)
    post_commands: list[str] = Field(default_factory=list)


class Deployment(Lenient):
    name: str
    task_roles: dict[str, DeploymentRole]


class Defaults(SpecModel):
    virtual_cluster: str | None = None
    deployment: str | None = None


class Extras(Lenient):
    gang_allocation: bool = True

    unhonoured: ClassVar[Mapping[str, str]] = {
        "hivedScheduler": "phalanx places every task itself (gang, topology-aware): "
        "HiveD's SKUs and cells are not read",
        "com.microsoft.pai.runtimeplugin": f"{_PLUGIN} (ssh, tensorboard, storage ...)",
        "storages": "phalanx mounts no OpenPAI storage: the commands fetch their data",
        "jobStatusChangeNotification": "phalanx sends no notification of a job's end",
    }


class OpenPaiJob(SpecModel):
    protocol_version: _ProtocolVersion
    name: str
    type: Literal["job"]
    version: str | int | float | None = None
    contributor: str | None = None
    description: str | None = None
    prerequisites: list[Prerequisite] = Field(default_factory=list)
    parameters: dict[str, Any] = Field(default_factory=dict)
    secrets: dict[str, Any] = Field(default_factory=dict)
    job_retry_count: Annotated[int, Field(ge=0, le=MAX_RETRY)] = 0
    task_roles: Annotated[dict[str, TaskRole], Field(min_length=1, max_length=MAX_ROLES)]
    deployments: list[Deployment] = Field(default_factory=list)
    defaults: Defaults = Defaults()
    extras: Extras = Extras()


_KEPT_NOT: Final[Mapping[str, str]] = {
    "version": "phalanx keeps no version of a job",
    "contributor": "phalanx keeps no contributor: a job belongs to the user who submits it",
    "description": "phalanx keeps no description of a job",
}


def notices(job: OpenPaiJob) -> Iterator[Notice]:
    """A ``Notice`` for every field of ``job`` given but not honoured (module docstring)."""
    for field, reason in _KEPT_NOT.items():
        if getattr(job, field) is not None:
            yield _notice((field,), reason)
    if job.secrets:
        reason = (
            "phalanx keeps no secrets (a command that refers to one is refused): give "
            "them to the task in its environment or a file"
        )
        yield _notice(("secrets",), reason)
    for i, prerequisite in enumerate(job.prerequisites):
        yield from prerequisite.notices(("prerequisites", i))
    by_name = {prerequisite.name: prerequisite for prerequisite in job.prerequisites}
    for written, role in job.task_roles.items():
        yield from _role_notices(("taskRoles", written), role, len(job.task_roles), by_name)
    for i, deployment in enumerate(job.deployments):
        yield from deployment.notices(("deployments", i))
    yield from job.extras.notices(("extras",))


def _role_notices(
    at: Loc, role: TaskRole, roles: int, by_name: Mapping[str, Prerequisite]
) -> Iterator[Notice]:
    completion = role.completion
    failed, succeeded = completion.min_failed_instances, completion.min_succeeded_instances
    if "min_failed_instances" in completion.model_fields_set and failed != 1:
        reason = "a phalanx job fails at its first failed task (minFailedInstances: 1)"
        yield _notice((*at, "completion", "minFailedInstances"), reason)
    if succeeded not in (None, -1) and not (roles == 1 and succeeded == role.instances):
        reason = (
            f"a phalanx job succeeds when all its tasks have, not once {succeeded} of this "
            "role's tasks have (minSucceededInstances: null)"
        )
        yield _notice((*at, "completion", "minSucceededInstances"), reason)
    if role.task_retry_count != 0:
        reason = "phalanx retries a failed job whole (jobRetryCount), not one task"
        yield _notice((*at, "taskRetryCount"), reason)
    if role.resource_per_instance.ports:
        reason = (
            "phalanx reserves no ports: a task listens on the host's network on ports it "
            "chooses (phalanx's rendezvous: MASTER_PORT, PHALANX_HOSTS_*)"
        )
        yield _notice((*at, "resourcePerInstance", "ports"), reason)
    yield from role.extra_container_options.notices((*at, "extraContainerOptions"))
    for i, name in enumerate(role.prerequisites):
        plugin = (by_name[name].model_extra or {}).get("plugin") if name in by_name else None
        if plugin is not None:
            path = format_path((*at, "prerequisites", i))
            yield Notice(path=path, detail=f"not run: {_PLUGIN} ({plugin!r:.60})")


def _notice(loc: Loc, reason: str) -> Notice:
    return Notice(path=format_path(loc), detail=f"not honoured: {reason}")
