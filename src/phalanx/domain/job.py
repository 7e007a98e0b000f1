"""Jobs, their roles and their tasks."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Literal

from phalanx.domain.errors import InvalidInput
from phalanx.domain.node import Toleration
from phalanx.domain.progress import Progress
from phalanx.domain.resources import Resources


class JobPhase(StrEnum):
    """Where a job is in its life. Edges are in ``phalanx.domain.lifecycle``."""

    PENDING = "Pending"  # submitted, not yet admitted
    QUEUED = "Queued"  # admitted by enqueue; waiting for placement
    RUNNING = "Running"  # at least minAvailable tasks placed
    SUCCEEDED = "Succeeded"
    FAILED = "Failed"
    CANCELLED = "Cancelled"


class TaskPhase(StrEnum):
    """Where one task is. Bound, Running and Releasing tasks hold node resources."""

    PENDING = "Pending"  # waiting for a node
    BOUND = "Bound"  # placed on a node, starting
    RUNNING = "Running"
    RELEASING = "Releasing"  # being stopped (evicted, cancelled); still holds its node
    SUCCEEDED = "Succeeded"
    FAILED = "Failed"


HOLDS_RESOURCES = frozenset({TaskPhase.BOUND, TaskPhase.RUNNING, TaskPhase.RELEASING})


class ServiceClass(StrEnum):
    """How a job shares GPUs with others (online/offline colocation)."""

    ONLINE = "online"  # a latency-bound service: its SLA comes first, online jobs avoid each other
    OFFLINE = "offline"  # batch work that fills the room online services leave, and yields to them


class DataLocality(StrEnum):
    """How strongly a role's tasks want nodes that hold its datasets in their cache (as
    Fluid's dataset affinity)."""

    PREFERRED = "preferred"  # a node holding more of them scores higher; any node will do
    REQUIRED = "required"  # only a node holding every one of them: the task waits for one


class SelectorOperator(StrEnum):
    """Operators of a node affinity term, as in Kubernetes."""

    IN = "In"
    NOT_IN = "NotIn"
    EXISTS = "Exists"
    DOES_NOT_EXIST = "DoesNotExist"
    GT = "Gt"
    LT = "Lt"


@dataclass(frozen=True, slots=True, kw_only=True)
class NodeSelectorRequirement:
    """One required condition on a node label."""

    key: str
    operator: SelectorOperator
    values: tuple[str, ...] = ()

    def matches(self, labels: Mapping[str, str]) -> bool:
        """True when ``labels`` satisfy this requirement."""
        present = self.key in labels
        value = labels.get(self.key, "")
        match self.operator:
            case SelectorOperator.IN:
                return present and value in self.values
            case SelectorOperator.NOT_IN:
                return not present or value not in self.values
            case SelectorOperator.EXISTS:
                return present
            case SelectorOperator.DOES_NOT_EXIST:
                return not present
            case SelectorOperator.GT | SelectorOperator.LT:
                try:
                    left, right = float(value), float(self.values[0])
                except (ValueError, IndexError):
                    return False
                return left > right if self.operator is SelectorOperator.GT else left < right


@dataclass(frozen=True, slots=True, kw_only=True)
class Hostfile:
    """An MPI hostfile for each task of a role: one ``host slots=N`` line per task of
    ``role`` (its node's address), ``slots`` being N."""

    role: str
    slots: int = 1

    def __post_init__(self) -> None:
        if self.slots < 1:
            raise InvalidInput(
                f"{self.slots} slots is below 1", field="hostfile.slots", fix="give 1 or more"
            )


class RescaleMode(StrEnum):
    """How an elastic role changes size while its job runs."""

    #: The replicas keep running: new ones join the rendezvous and leaving ones are
    #: stopped; PyTorch's elastic launcher (torchrun) re-forms the world around them.
    RENDEZVOUS = "rendezvous"
    #: Every replica is stopped (SIGTERM: checkpoint now) and the gang is started again
    #: at the new size; it costs no retry.
    RESTART = "restart"


@dataclass(frozen=True, slots=True, kw_only=True)
class Elastic:
    """The size range of an elastic role and how it is rescaled.

    The role's ``replicas`` is the size its owner asks for, within
    ``min_replicas..max_replicas``. The engine may grow the role above it into capacity
    no waiting job can use and takes that growth back first; it never goes below
    ``min_replicas`` while the job runs. ``interval`` is the least time in seconds
    between two rescales the engine makes of one job; ``cost`` the seconds of work a
    rescale costs the job (its restart of workers), which the engine weighs.
    """

    min_replicas: int
    max_replicas: int
    mode: RescaleMode = RescaleMode.RENDEZVOUS
    interval: float = 60.0
    cost: float = 30.0

    def __post_init__(self) -> None:
        if not 1 <= self.min_replicas <= self.max_replicas:
            raise InvalidInput(
                f"the range {self.min_replicas}..{self.max_replicas} is empty or below 1",
                field="elastic",
                fix="give 1 <= minReplicas <= maxReplicas",
            )
        if self.interval < 0 or self.cost < 0:
            raise InvalidInput(
                "a negative rescale interval or cost",
                field="elastic",
                fix="give rescaleInterval and rescaleCost of 0 or more seconds",
            )


@dataclass(frozen=True, slots=True, kw_only=True)
class Role:
    """One kind of task of a job (master, worker, ps ...); ``replicas`` tasks of it."""

    name: str
    replicas: int
    resources: Resources
    command: tuple[str, ...] = ()
    env: Mapping[str, str] = field(default_factory=dict)  # extra environment of each task
    node_selector: Mapping[str, str] = field(default_factory=dict)
    affinity: tuple[NodeSelectorRequirement, ...] = ()
    tolerations: tuple[Toleration, ...] = ()
    depends_on: tuple[str, ...] = ()  # roles that must be Running before this one starts
    image: str | None = None  # the container image its tasks run in (None: on the host)
    mounts: tuple[str, ...] = ()  # host directories its containers see at the same path
    hostfile: Hostfile | None = None  # a file listing another role's hosts, for mpirun
    elastic: Elastic | None = None  # a size range: None, always ``replicas`` tasks
    model_digest: str | None = None  # the model version its tasks read (None: none, or unpinned)
    # the secrets of the job's user its tasks get: (name, "env" or "files")
    secrets: tuple[tuple[str, str], ...] = ()
    # the datasets of the job's user its tasks read: (name, listing digest or None: unpinned)
    datasets: tuple[tuple[str, str | None], ...] = ()
    data_locality: DataLocality = DataLocality.PREFERRED  # nodes holding them warm: wanted how
    #: the GPU types (node label ``phalanx.io/gpu-model``) its tasks accept; empty: any
    gpu_types: tuple[str, ...] = ()

    @property
    def kept_replicas(self) -> int:
        """How many tasks of an elastic role are the job's own while it runs: the size
        asked for, at least the minimum; any above are growth, lent and given back first
        (``replicas`` for a role that is not elastic)."""
        return (
            self.replicas if self.elastic is None else max(self.replicas, self.elastic.min_replicas)
        )

    @property
    def gang_replicas(self) -> int:
        """How many of its tasks the gang needs: ``min_replicas`` when elastic."""
        return self.replicas if self.elastic is None else self.elastic.min_replicas


@dataclass(frozen=True, slots=True, kw_only=True)
class NetworkPlacement:
    """Where a gang may sit in the network (Volcano's network topology, Kueue's TAS).

    ``tier`` is the highest network tier (``tor``, ``spine``, ...) the gang may span: it
    goes under one switch of that tier or a lower one. ``hard`` never spans more; ``soft``
    prefers it and falls back to spanning more. With ``group``, each run of ``group``
    consecutive tasks (role, then index order) goes under one switch of ``tier`` instead,
    and the gang as a whole may span more.
    """

    tier: str
    mode: Literal["hard", "soft"] = "hard"
    group: int | None = None

    def __post_init__(self) -> None:
        if not self.tier:
            raise InvalidInput(
                "the network tier is empty", field="tier", fix="name a tier such as tor"
            )
        if self.group is not None and self.group < 1:
            raise InvalidInput(
                f"group size {self.group} is below 1",
                field="group",
                fix="give a group size of at least 1, or none",
            )


@dataclass(frozen=True, slots=True, kw_only=True)
class Task:
    """One replica of one role. ``node`` is set while the task holds a node."""

    role: str
    index: int
    phase: TaskPhase = TaskPhase.PENDING
    node: str | None = None
    start_time: float | None = None
    gpus: tuple[int, ...] = ()

    def name(self, job: str) -> str:
        """The task's name: ``<job>-<role>-<index>``."""
        return f"{job}-{self.role}-{self.index}"


@dataclass(frozen=True, slots=True, kw_only=True)
class Job:
    """A gang of tasks submitted to a leaf queue (a PodGroup in Volcano terms).

    ``min_available`` tasks must be placed together or none is. ``tasks`` holds the
    current state of every replica; when empty, every replica is pending. Its tasks that
    ask for GPUs all sit on nodes of one GPU type (``phalanx.io/gpu-model``) unless
    ``allow_mixed_gpu_types``.
    """

    name: str
    queue: str
    roles: tuple[Role, ...]
    user: str = "default"
    priority: int = 0
    min_available: int | None = None  # None: every replica
    phase: JobPhase = JobPhase.PENDING
    creation_time: float = 0.0
    pending_since: float | None = None  # when it last became pending; None: creation_time
    preemptible: bool = True
    walltime: float | None = None  # seconds; a hard limit
    runtime_estimate: float | None = None  # seconds; a hint for backfill
    starvation_threshold: float | None = None  # seconds; overrides the queue's
    attained_service: float = (
        0.0  # GPU-seconds of ended runs; running tasks' time is added by the engine
    )
    max_retry: int = 3
    rescaled_at: float | None = None  # when its elastic role last changed size
    progress: Progress | None = None  # what it last reported of its training
    service_class: ServiceClass | None = None  # online / offline colocation; None: neither
    network: NetworkPlacement | None = None  # None: anywhere in the network
    #: its GPU tasks may sit on nodes of different GPU types; False: all on one type
    allow_mixed_gpu_types: bool = False
    tasks: tuple[Task, ...] = ()

    @property
    def replicas(self) -> int:
        """Total number of tasks over every role."""
        return sum(role.replicas for role in self.roles)

    @property
    def gang_size(self) -> int:
        """Tasks that must be placed together: ``min_available``, else every replica (an
        elastic role's minimum)."""
        if self.min_available is not None:
            return self.min_available
        return sum(role.gang_replicas for role in self.roles)

    def elastic_role(self) -> Role | None:
        """The job's elastic role (a job has at most one), or None."""
        return next((role for role in self.roles if role.elastic is not None), None)

    def all_tasks(self) -> tuple[Task, ...]:
        """Every replica's task, pending ones included, in role then index order."""
        if self.tasks:
            return self.tasks
        return tuple(
            Task(role=role.name, index=i) for role in self.roles for i in range(role.replicas)
        )


def data_variable(name: str) -> str:
    """The variable holding the path of dataset ``name`` in a task: ``PHALANX_DATA_`` and
    the name in capitals, with ``-`` and ``.`` as ``_``."""
    return "PHALANX_DATA_" + name.upper().replace("-", "_").replace(".", "_")
