"""The ``Job`` document: a gang of roles submitted to a leaf queue.

A validated ``JobDocument`` is guaranteed to convert to a domain ``Job``: role
names are unique, ``minAvailable`` lies in 1..total replicas, every ``dependsOn``
names another role of the job and the dependencies have no cycle. Job-level
``nodeSelector``, ``tolerations`` and ``affinity`` apply to every role; a role's
own entries are merged over them (its selector keys win, lists are added).
``networkTopology.groupSize``, when given, is at most the job's replicas; a role's
``hostfile`` names a role of the job; a role's ``gpuTypes`` names each type once. Every bound
of ``phalanx.spec.limits`` holds: replicas and roles, priority, ``maxRetry``, the
durations, and each role's command and environment fit what ``execve`` accepts.
"""

from __future__ import annotations

import re
from typing import Annotated, Any, Final, Literal, Self

from pydantic import AfterValidator, BeforeValidator, Field, model_validator

from phalanx.domain.job import (
    DataLocality,
    Elastic,
    Hostfile,
    Job,
    NetworkPlacement,
    RescaleMode,
    Role,
    ServiceClass,
    data_variable,
)
from phalanx.domain.resources import GPU
from phalanx.spec.common import (
    API_VERSION,
    DnsLabel,
    EnvName,
    ImageRef,
    JobDuration,
    JobDurationOrZero,
    LabelKey,
    LabelValue,
    Metadata,
    Name,
    Priority,
    SpecModel,
    UserName,
    located,
)
from phalanx.spec.limits import (
    MAX_COMMAND_ARG,
    MAX_COMMAND_ARGS,
    MAX_COMMAND_BYTES,
    MAX_ENV_BYTES,
    MAX_ENV_ENTRY,
    MAX_ENV_VARS,
    MAX_NAME,
    MAX_REPLICAS,
    MAX_RETRY,
    MAX_ROLES,
    size,
)
from phalanx.spec.model import ModelOutput, ModelReference, model_reference
from phalanx.spec.placement import AffinityTerm, TolerationSpec
from phalanx.spec.quantity import ResourceMap, resources_of

SHELL: Final = ("/bin/sh", "-c")


def _shell_string(value: Any) -> Any:
    """A command written as one string runs through the shell."""
    if isinstance(value, str):
        if not value.strip():
            raise located("the command is empty", "write the command, or omit the field")
        return [*SHELL, value]
    return value


def _no_nul(argv: list[str]) -> list[str]:
    for i, arg in enumerate(argv):
        if "\x00" in arg:
            raise located("contains a NUL character", "remove it", at=(i,))
    return argv


_TOO_BIG_FIX: Final = "put large data in a file the task reads (or a script it runs)"


def _fits_execve(argv: list[str]) -> list[str]:
    """The command fits what the kernel passes to a program (see ``phalanx.spec.limits``)."""
    if len(argv) > MAX_COMMAND_ARGS:
        raise located(
            f"{len(argv)} arguments is more than the limit of {MAX_COMMAND_ARGS}", _TOO_BIG_FIX
        )
    total = 0
    for i, arg in enumerate(argv):
        length = len(arg.encode())
        if length > MAX_COMMAND_ARG:
            raise located(
                f"{length} bytes is more than the limit of {size(MAX_COMMAND_ARG)} "
                "for one argument",
                _TOO_BIG_FIX,
                at=(i,),
            )
        total += length
    if total > MAX_COMMAND_BYTES:
        raise located(
            f"{total} bytes in all is more than the limit of {size(MAX_COMMAND_BYTES)}",
            _TOO_BIG_FIX,
        )
    return argv


def _env_fits_execve(env: dict[str, str]) -> dict[str, str]:
    """The environment fits what the kernel passes to a program, as ``NAME=value``
    strings (see ``phalanx.spec.limits``)."""
    if len(env) > MAX_ENV_VARS:
        raise located(
            f"{len(env)} variables is more than the limit of {MAX_ENV_VARS}", _TOO_BIG_FIX
        )
    total = 0
    for name, value in env.items():
        length = len(name.encode()) + 1 + len(value.encode())
        if length > MAX_ENV_ENTRY:
            raise located(
                f"{name}=... is {length} bytes, more than the limit of {size(MAX_ENV_ENTRY)} "
                "for one variable",
                _TOO_BIG_FIX,
                at=(name,),
            )
        total += length
    if total > MAX_ENV_BYTES:
        raise located(
            f"{total} bytes of NAME=value in all is more than the limit of {size(MAX_ENV_BYTES)}",
            _TOO_BIG_FIX,
        )
    return env


def _no_nul_text(value: str) -> str:
    if "\0" in value:
        raise located("contains a NUL character", "remove it")
    return value


Command = Annotated[
    list[str],
    BeforeValidator(_shell_string),
    AfterValidator(_no_nul),
    AfterValidator(_fits_execve),
]

#: Host directories a role's containers may mount, at most.
MAX_MOUNTS: Final = 32


def _mount_path(value: str) -> str:
    if not value.startswith("/") or "\0" in value:
        raise located(f"{value!r} is not an absolute path", "give a path starting with /")
    if any(c in value for c in ":,") or any(part == ".." for part in value.split("/")):
        raise located(
            f"{value!r} holds ':', ',' or '..', which a container's volume cannot name",
            "give a plain absolute directory path",
        )
    if value.rstrip("/") == "":
        raise located("the root directory cannot be mounted", "give the directory the task needs")
    return value.rstrip("/")


MountPath = Annotated[str, Field(min_length=1, max_length=4096), AfterValidator(_mount_path)]

#: Most GPU types one role names.
MAX_GPU_TYPES: Final = 32


def _gpu_types(value: list[str]) -> list[str]:
    if not value:
        raise located(
            "the list of GPU types is empty",
            "name the types the role accepts (such as [A100, H100]), or omit gpuTypes to "
            "accept any",
        )
    for i, name in enumerate(value):
        if not name:
            raise located(
                "a GPU type is empty",
                "give a model as the nodes' label phalanx.io/gpu-model names it (Cluster "
                "nodeGroups[].gpus.model), such as A100-SXM4-80GB",
                at=(i,),
            )
        if name in value[:i]:
            raise located(f"GPU type {name!r} is named twice", "name each type once", at=(i,))
    return value


GpuTypes = Annotated[list[LabelValue], Field(max_length=MAX_GPU_TYPES), AfterValidator(_gpu_types)]


class Dependency(SpecModel):
    """``{role, phase: Running}``: the role waits until ``role`` is Running."""

    role: DnsLabel
    """The role to wait for."""
    phase: Literal["Running"] = "Running"
    """The phase it must reach: Running (all of its tasks run)."""


#: Most MPI slots one hostfile line gives a host (``hostfile.slots``).
MAX_SLOTS: Final = 4096


#: Most secrets one role reads.
MAX_SECRETS: Final = 16
#: Most datasets one role reads.
MAX_DATASETS: Final = 16


def _dataset_reference(value: str) -> str:
    name = value.partition("@")[0]
    if not DATASET_REFERENCE.fullmatch(value) or len(name) > MAX_NAME:
        raise located(
            f"{value[:80]!r} is not a dataset reference",
            "give the dataset's name (phalanx get datasets); the server pins it to its "
            "listing's digest (NAME@sha256:...)",
        )
    return value


#: ``NAME`` or ``NAME@sha256:<hex>`` (pinned to a listing by the server).
DATASET_REFERENCE: Final = re.compile(
    r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*(@sha256:[0-9a-f]{64})?"
)
DatasetReference = Annotated[str, AfterValidator(_dataset_reference)]


class SecretUse(SpecModel):
    """``{name: s3, as: env}``: a secret of the job's user that each task gets."""

    name: Name
    """The secret (phalanx get secrets): one of the job's user's own."""
    as_: Literal["env", "files"] = Field("env", alias="as")
    """env: each key as an environment variable (the keys must be variable names, and
    the role's env may not set them); files: each key in $PHALANX_SECRETS_DIR/NAME/KEY,
    mode 0600, owned by the task's user."""


class HostfileSpec(SpecModel):
    """``{role: worker, slots: 2}``: each task of the role gets a hostfile naming every
    task of ``role``, one ``host slots=N`` line each in rank order (an MPI launcher's
    ``mpirun --hostfile $PHALANX_HOSTFILE``)."""

    role: DnsLabel
    """The role whose tasks the hostfile lists (its addresses as the rendezvous gives them)."""
    slots: Annotated[int, Field(ge=1, le=MAX_SLOTS)] = 1
    """The slots of each host (MPI processes per task: an MPIJob's slotsPerWorker)."""

    def to_domain(self) -> Hostfile:
        """The domain ``Hostfile``."""
        return Hostfile(role=self.role, slots=self.slots)


class Placement(SpecModel):
    """Where tasks may run: shared by the job and each of its roles."""

    node_selector: dict[LabelKey, LabelValue] = Field(default_factory=dict)
    """Node labels every task's node must carry (a role's entries add to the job's)."""
    tolerations: list[TolerationSpec] = Field(default_factory=list)
    """Taints the tasks tolerate (a role's add to the job's)."""
    affinity: list[AffinityTerm] = Field(default_factory=list)
    """Required node-label conditions (Kubernetes' matchExpressions; a role's add to the
    job's)."""


class NetworkTopologySpec(SpecModel):
    """``{tier: tor, mode: hard, groupSize: 4}``: keep the gang (or each group of
    ``groupSize`` consecutive tasks) under one switch of ``tier`` or a lower tier;
    ``hard`` never spans more, ``soft`` prefers it."""

    tier: DnsLabel
    """The highest network tier (e.g. tor, spine) the gang, or each group, may span."""
    mode: Literal["hard", "soft"] = "hard"
    """hard: never span more; soft: prefer it and fall back to spanning more."""
    group_size: Annotated[int, Field(ge=1)] | None = None
    """Keep each run of this many consecutive tasks under one switch of tier instead of the
    whole gang."""

    def to_domain(self) -> NetworkPlacement:
        """The domain ``NetworkPlacement``."""
        return NetworkPlacement(tier=self.tier, mode=self.mode, group=self.group_size)


class ElasticSpec(SpecModel):
    """``{minReplicas: 2, maxReplicas: 8}``: the role runs at any size in the range and
    follows the cluster: the engine grows it into capacity no waiting job can use and
    shrinks it (its growth first, never below minReplicas) when others need the room;
    ``phalanx scale`` changes the size its owner asks for (``replicas``)."""

    min_replicas: Annotated[int, Field(ge=1, le=MAX_REPLICAS)]
    """The fewest replicas it runs with (the gang: placed together or not at all)."""
    max_replicas: Annotated[int, Field(ge=1, le=MAX_REPLICAS)]
    """The most replicas it may grow to."""
    mode: Literal["rendezvous", "restart"] = "rendezvous"
    """rendezvous: replicas join and leave a running torchrun rendezvous (PET_* variables
    are set); restart: every rescale stops the replicas (SIGTERM: checkpoint) and starts
    them again at the new size."""
    rescale_interval: JobDurationOrZero = 60.0
    """The least time between two rescales the engine makes (hysteresis, e.g. 5m)."""
    rescale_cost: JobDurationOrZero = 30.0
    """The work a rescale costs the job (re-forming the world, reloading a checkpoint); the
    engine grows a job only where that pays off."""

    @model_validator(mode="after")
    def _range(self) -> Self:
        if self.min_replicas > self.max_replicas:
            raise located(
                f"minReplicas {self.min_replicas} is above maxReplicas {self.max_replicas}",
                "give minReplicas <= maxReplicas",
                at=("minReplicas",),
            )
        return self

    def to_domain(self) -> Elastic:
        """The domain ``Elastic``."""
        return Elastic(
            min_replicas=self.min_replicas,
            max_replicas=self.max_replicas,
            mode=RescaleMode(self.mode),
            interval=self.rescale_interval,
            cost=self.rescale_cost,
        )


class RoleSpec(Placement):
    """One role: ``replicas`` identical tasks with their resources and command."""

    name: DnsLabel
    """The role's name (e.g. master, worker); task names are <job>-<role>-<index>."""
    replicas: Annotated[int, Field(ge=1, le=MAX_REPLICAS)]
    """How many identical tasks the role has."""
    resources: ResourceMap
    """What each task needs: cpu (2 or 500m), memory (16Gi), gpu (whole GPUs, or a share of
    one below 1 such as 0.5), gpu-memory, and extended resources."""
    command: Command = Field(default_factory=list)
    """What each task runs: an argv list, or one shell string (run by /bin/sh -c)."""
    env: Annotated[
        dict[EnvName, Annotated[str, AfterValidator(_no_nul_text)]],
        AfterValidator(_env_fits_execve),
    ] = Field(default_factory=dict)
    """Extra environment variables of each task; phalanx's own (RANK, WORLD_SIZE,
    MASTER_ADDR, CUDA_VISIBLE_DEVICES ...) are set on top."""
    depends_on: list[Dependency] = Field(default_factory=list)
    """Roles that must be Running before this role's tasks start (placed together with them,
    as one gang)."""
    image: ImageRef | None = None
    """A container image the tasks run in (an OCI reference such as localhost/train:1.0);
    omitted: on the host."""
    mounts: Annotated[list[MountPath], Field(max_length=MAX_MOUNTS)] = Field(default_factory=list)
    """Host directories (absolute paths) the containers of an image role see at the same
    path, read-write, besides the task's working directory; the task reads and writes
    them as its user, as a task on the host would."""
    hostfile: HostfileSpec | None = None
    """Give each task a hostfile (PHALANX_HOSTFILE) of the given role's tasks, one `host
    slots=N` line each, as MPI launchers read it."""
    elastic: ElasticSpec | None = None
    """Let the role's size follow the cluster within a range (replicas is the size asked
    for); at most one role of a job is elastic."""
    model: ModelOutput | None = None
    """A model the role's first task writes; when the job succeeds it is registered as the
    model's next version (phalanx get models)."""
    model_version: ModelReference | None = None
    """A model version the tasks read: NAME (its newest), NAME:vN, or NAME:vN@sha256:...
    The server pins it at submit, copies it out verified against its digest before the
    job is scheduled, and each task finds it read-only at PHALANX_MODEL_PATH."""
    secrets: Annotated[list[SecretUse], Field(max_length=MAX_SECRETS)] = Field(default_factory=list)
    """Secrets of the job's user its tasks get, as environment variables or files; never
    shown back (phalanx secret create)."""
    datasets: Annotated[list[DatasetReference], Field(max_length=MAX_DATASETS)] = Field(
        default_factory=list
    )
    """Datasets of the job's user its tasks read (phalanx get datasets): each is copied
    into the cache of the node a task runs on before it starts (once per node, shared by
    the jobs there), and the task finds it read-only at $PHALANX_DATA_<NAME> (the name in
    capitals, - and . as _). The server pins each to its listing at that time."""
    gpu_types: GpuTypes | None = None
    """The GPU types the tasks accept (such as [A100-SXM4-80GB, H100-SXM5-80GB]): they go
    only to nodes whose label phalanx.io/gpu-model (the Cluster document's
    nodeGroups[].gpus.model) is one of them; omitted: any type."""
    data_locality: Literal["preferred", "required"] = "preferred"
    """Where the tasks go with respect to the nodes that hold the datasets in their cache:
    preferred, those holding more of them first (any node will do, filling its cache);
    required, only nodes holding all of them (the tasks wait for one: phalanx dataset
    warm NAME --nodes ...)."""

    @model_validator(mode="after")
    def _datasets_once(self) -> Self:
        seen: dict[str, str] = {}
        for i, reference in enumerate(self.datasets):
            name = reference.partition("@")[0]
            variable = data_variable(name)
            if variable in seen:
                raise located(
                    f"dataset {name!r} "
                    + (
                        "is named twice"
                        if seen[variable] == name
                        else f"and {seen[variable]!r} would both be ${variable}"
                    ),
                    "name each dataset once",
                    at=("datasets", i),
                )
            seen[variable] = name
        return self

    @model_validator(mode="after")
    def _secrets_once(self) -> Self:
        seen: set[str] = set()
        for i, use in enumerate(self.secrets):
            if use.name in seen:
                raise located(
                    f"secret {use.name!r} is named twice",
                    "name each secret once",
                    at=("secrets", i, "name"),
                )
            seen.add(use.name)
        return self

    @model_validator(mode="after")
    def _replicas_in_range(self) -> Self:
        elastic = self.elastic
        if elastic is not None and not (
            elastic.min_replicas <= self.replicas <= elastic.max_replicas
        ):
            raise located(
                f"replicas {self.replicas} is outside the elastic range "
                f"{elastic.min_replicas}..{elastic.max_replicas}",
                f"set replicas between {elastic.min_replicas} and {elastic.max_replicas}",
                at=("replicas",),
            )
        return self

    @model_validator(mode="after")
    def _mounts_need_an_image(self) -> Self:
        if self.mounts and self.image is None:
            raise located(
                "only a role with an image mounts directories (a task on the host sees them)",
                "set image, or remove mounts",
                at=("mounts",),
            )
        return self

    @model_validator(mode="after")
    def _gpu_shape(self) -> Self:
        gpu = resources_of(self.resources).get(GPU)
        if gpu > 1 and not float(gpu).is_integer():
            raise located(
                f"{gpu:g} GPUs: a task takes a share of one GPU (below 1) or whole GPUs",
                f"ask for gpu: {int(gpu)} or {int(gpu) + 1}, or split the work into more replicas",
                at=("resources", GPU),
            )
        return self

    def to_domain(self, job: Placement) -> Role:
        """The domain ``Role``, with the job-level placement merged under this role's."""
        return Role(
            name=self.name,
            replicas=self.replicas,
            resources=resources_of(self.resources),
            command=tuple(self.command),
            env=dict(self.env),
            node_selector={**job.node_selector, **self.node_selector},
            affinity=tuple(term.to_domain() for term in [*job.affinity, *self.affinity]),
            tolerations=tuple(t.to_domain() for t in [*job.tolerations, *self.tolerations]),
            depends_on=tuple(dict.fromkeys(dep.role for dep in self.depends_on)),
            image=self.image,
            mounts=tuple(dict.fromkeys(self.mounts)),
            hostfile=None if self.hostfile is None else self.hostfile.to_domain(),
            elastic=None if self.elastic is None else self.elastic.to_domain(),
            model_digest=None
            if self.model_version is None
            else model_reference(self.model_version).digest,
            secrets=tuple((use.name, use.as_) for use in self.secrets),
            datasets=tuple(
                (name, digest or None)
                for name, _, digest in (ref.partition("@") for ref in self.datasets)
            ),
            data_locality=DataLocality(self.data_locality),
            gpu_types=tuple(self.gpu_types or ()),
        )


class JobSpec(Placement):
    """``spec`` of a Job: its queue, user, roles, policies and limits."""

    queue: Name = "default"
    """The leaf queue the job is submitted to; omitted: its user's default queue (an
    admin sets it: phalanx users set NAME --default-queue QUEUE), else the queue named
    default."""
    user: UserName = "default"
    """The user the job belongs to (the API sets it to the caller)."""
    priority: Priority = 0
    """Orders jobs within a queue, and lets a job preempt lower-priority jobs of its queue
    (higher first)."""
    min_available: Annotated[int, Field(ge=1)] | None = None
    """The gang size: how many tasks must be placed together before any starts; default:
    every replica of every role."""
    max_retry: Annotated[int, Field(ge=0, le=MAX_RETRY)] = 3
    """How many times a failed, lost or unstartable gang is restarted (after a backoff of 10
    s that doubles, at most 300 s) before the job fails."""
    walltime: JobDuration | None = None
    """The longest an attempt may run (e.g. 8h, 30m, 90), from its first placement; then the
    job is stopped and fails."""
    runtime_estimate: JobDuration | None = None
    """How long the job is expected to run, a hint for backfill and shortest-job-first
    policies."""
    starvation_threshold: JobDuration | None = None
    """How long the job may wait before it gets a reservation; overrides its queue's."""
    preemptible: bool = True
    """Whether preemption and reclaim may evict the job's tasks."""
    service_class: Literal["online", "offline"] | None = None
    """online or offline, for colocation: offline work is throttled, then paused, when online
    work needs the node."""
    network_topology: NetworkTopologySpec | None = None
    """Where in the network the gang may sit (keep it under one top-of-rack switch, ...)."""
    allow_mixed_gpu_types: bool = False
    """Let the job's GPU tasks sit on nodes of different GPU types (label
    phalanx.io/gpu-model). Off: all of them, an elastic job's growth too, go to one type,
    the one it already runs on once started (nodes without the label count as one type of
    their own)."""
    roles: Annotated[list[RoleSpec], Field(min_length=1, max_length=MAX_ROLES)]
    """The job's roles, in rank order: each a set of identical tasks."""

    def to_job(self, name: str, creation_time: float, roles: tuple[Role, ...] | None = None) -> Job:
        """The domain ``Job`` ``name`` of this spec (phase Pending, every task pending);
        ``roles`` when already converted, else converted here."""
        return Job(
            name=name,
            queue=self.queue,
            roles=roles if roles is not None else tuple(r.to_domain(self) for r in self.roles),
            user=self.user,
            priority=self.priority,
            min_available=self.min_available,
            creation_time=creation_time,
            preemptible=self.preemptible,
            walltime=self.walltime,
            runtime_estimate=self.runtime_estimate,
            starvation_threshold=self.starvation_threshold,
            max_retry=self.max_retry,
            service_class=None if self.service_class is None else ServiceClass(self.service_class),
            network=None if self.network_topology is None else self.network_topology.to_domain(),
            allow_mixed_gpu_types=self.allow_mixed_gpu_types,
        )

    @model_validator(mode="after")
    def _consistent(self) -> Self:
        _check_unique_roles(self.roles)
        total = sum(role.replicas for role in self.roles)
        most = sum(
            role.replicas if role.elastic is None else role.elastic.max_replicas
            for role in self.roles
        )
        if most > MAX_REPLICAS:
            raise located(
                f"{most} replicas in all"
                + (" (elastic roles at their maxReplicas)" if most != total else "")
                + f" is more than the limit of {MAX_REPLICAS} per job",
                "lower the replicas, or split the work into several jobs",
                at=("roles",),
            )
        if self.min_available is not None and self.min_available > total:
            raise located(
                f"{self.min_available} is more than the job's {total} replicas",
                f"set minAvailable between 1 and {total}, or omit it to gang every replica",
                at=("minAvailable",),
            )
        group = None if self.network_topology is None else self.network_topology.group_size
        if group is not None and group > total:
            raise located(
                f"a group of {group} tasks is more than the job's {total} replicas",
                f"set groupSize between 1 and {total}, or omit it to keep the whole gang "
                "under one switch",
                at=("networkTopology", "groupSize"),
            )
        _check_dependencies(self.roles)
        _check_hostfiles(self.roles)
        _check_elastic(self.roles, self.min_available)
        return self


def _check_elastic(roles: list[RoleSpec], min_available: int | None) -> None:
    """At most one elastic role; its minimum is the gang's (no ``minAvailable``); one in
    rendezvous mode is the job's only role (every rank joins one rendezvous)."""
    elastic = [i for i, role in enumerate(roles) if role.elastic is not None]
    if len(elastic) > 1:
        raise located(
            "more than one role is elastic",
            "make one role elastic (the workers); give the others a fixed size",
            at=("roles", elastic[1], "elastic"),
        )
    if not elastic:
        return
    if min_available is not None:
        raise located(
            "minAvailable and an elastic role both set the gang's size",
            "remove minAvailable: the gang is the elastic role's minReplicas and every "
            "replica of the other roles",
            at=("minAvailable",),
        )
    spec = roles[elastic[0]].elastic
    assert spec is not None
    if spec.mode == "rendezvous" and len(roles) > 1:
        raise located(
            "an elastic role in rendezvous mode must be the job's only role (every rank of "
            "torchrun's rendezvous is alike)",
            "put every rank in that one role, or set elastic.mode: restart",
            at=("roles", elastic[0], "elastic", "mode"),
        )


def _check_unique_roles(roles: list[RoleSpec]) -> None:
    seen: set[str] = set()
    models: set[str] = set()
    for i, role in enumerate(roles):
        if role.name in seen:
            raise located(
                f"role name {role.name!r} is used twice",
                "give every role its own name",
                at=("roles", i, "name"),
            )
        seen.add(role.name)
        if role.model is not None:
            if role.model.name in models:
                raise located(
                    f"model {role.model.name!r} is written by two roles",
                    "let one role write it, or give the other model its own name",
                    at=("roles", i, "model", "name"),
                )
            models.add(role.model.name)


def _check_dependencies(roles: list[RoleSpec]) -> None:
    names = [role.name for role in roles]
    for i, role in enumerate(roles):
        for j, dep in enumerate(role.depends_on):
            where = ("roles", i, "dependsOn", j, "role")
            if dep.role == role.name:
                raise located("a role cannot depend on itself", "remove this entry", at=where)
            if dep.role not in names:
                others = ", ".join(n for n in names if n != role.name)
                raise located(
                    f"{dep.role!r} is not a role of this job",
                    f"name one of the other roles ({others})" if others else "remove this entry",
                    at=where,
                )
    cycle = _find_cycle({role.name: [dep.role for dep in role.depends_on] for role in roles})
    if cycle:
        raise located(
            f"roles depend on each other in a cycle: {' -> '.join(cycle)}",
            "remove one dependsOn entry of the cycle",
            at=("roles", names.index(cycle[0]), "dependsOn"),
        )


def _check_hostfiles(roles: list[RoleSpec]) -> None:
    names = [role.name for role in roles]
    for i, role in enumerate(roles):
        if role.hostfile is not None and role.hostfile.role not in names:
            raise located(
                f"{role.hostfile.role!r} is not a role of this job",
                f"name the role whose hosts the file lists (one of {', '.join(names)})",
                at=("roles", i, "hostfile", "role"),
            )


def _find_cycle(edges: dict[str, list[str]]) -> list[str]:
    """A dependency cycle as ``[a, b, ..., a]``, or ``[]``; roles are visited in order."""
    done: set[str] = set()
    for start, first in edges.items():
        if start in done:
            continue
        path, on_path = [start], {start}
        stack = [(start, iter(first))]
        while stack:
            node, children = stack[-1]
            child = next(children, None)
            if child is None:
                stack.pop()
                on_path.discard(path.pop())
                done.add(node)
            elif child in on_path:
                return [*path[path.index(child) :], child]
            elif child not in done:
                stack.append((child, iter(edges[child])))
                on_path.add(child)
                path.append(child)
    return []


class JobDocument(SpecModel):
    """``apiVersion: phalanx/v1, kind: Job``."""

    api_version: Literal["phalanx/v1"] = API_VERSION
    """Always phalanx/v1."""
    kind: Literal["Job"] = "Job"
    """Always Job."""
    metadata: Metadata
    """The job's name (unique per user's jobs), labels and annotations."""
    spec: JobSpec
    """The job: its queue, roles and rules."""

    def to_domain(self, creation_time: float = 0.0) -> Job:
        """The domain ``Job`` (phase Pending, every task pending) in canonical units."""
        return self.spec.to_job(self.metadata.name, creation_time)
