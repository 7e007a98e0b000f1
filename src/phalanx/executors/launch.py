"""What an executor needs to start one task: a ``TaskLaunch`` value.

The controller turns each ``Bind`` into a ``TaskLaunch`` (it knows the job's spec: the
command, the user's environment, the resource limits, the NICs the engine bound). The
executor adds what only it knows (the rendezvous: ranks, peers, ports) and starts the
process.

Addresses: the controller passes each node's declared address (``Node.address``; None
when the Cluster document declares none) with the task (``TaskLaunch.address``) and with
every member of its gang (``GangMember.address``). The executor resolves each member's
node to the address its peers reach it at, and builds the rendezvous from those
(``rendezvous.gang_placements``): ``MASTER_ADDR`` is the rank-0 task's node's address. A
multi-machine executor uses the declared address, or its own record of the node when
there is none; the local executor runs every task on its own host, so for it every
node's address is that host's, whatever was declared.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from phalanx.data.copies import DatasetCopy
from phalanx.domain.errors import InvalidInput
from phalanx.domain.job import Hostfile, ServiceClass
from phalanx.domain.node import check_address
from phalanx.domain.topology import check_nic_name
from phalanx.executors.identity import TaskIdentity

#: Environment variables of NVIDIA MPS that a fractional-GPU task is started with.
MPS_THREAD_PERCENTAGE = "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"
MPS_MEMORY_LIMIT = "CUDA_MPS_PINNED_DEVICE_MEM_LIMIT"


def check_directory_names(job: str, task: str) -> None:
    """Refuse a job or task name that cannot name a task's directory under the data dir
    (empty, ``.``, ``..``, or holding ``/`` or NUL): ``InvalidInput`` naming the field."""
    for name, value in (("job", job), ("task", task)):
        if not value or value in {".", ".."} or "/" in value or "\0" in value:
            raise InvalidInput(
                f"{value!r} cannot name a task directory",
                field=name,
                fix="use a non-empty name without '/' (like the job's metadata.name)",
            )


@dataclass(frozen=True, slots=True, kw_only=True)
class GpuShareHint:
    """Limits for a task that shares its GPUs with others (fractional GPUs, via MPS).

    ``memory_limit`` caps device memory per GPU in bytes; ``thread_percentage`` caps the
    share of each GPU's streaming multiprocessors (1..100). ``None`` leaves one unset.
    """

    memory_limit: int | None = None
    thread_percentage: int | None = None

    def __post_init__(self) -> None:
        if self.memory_limit is not None and self.memory_limit < 2**20:
            raise InvalidInput(
                f"{self.memory_limit} bytes is below 1 MiB",
                field="gpuShare.memoryLimit",
                fix="give the device memory limit in bytes (16Gi = 17179869184)",
            )
        if self.thread_percentage is not None and not 1 <= self.thread_percentage <= 100:
            raise InvalidInput(
                f"{self.thread_percentage} is not a percentage",
                field="gpuShare.threadPercentage",
                fix="use a whole number from 1 to 100",
            )

    def env(self, gpu_count: int) -> dict[str, str]:
        """The MPS client variables enforcing this hint on ``gpu_count`` visible GPUs.

        Device ordinals in ``CUDA_MPS_PINNED_DEVICE_MEM_LIMIT`` are the task's own
        (0..n-1 after ``CUDA_VISIBLE_DEVICES``), which is what an MPS client sees.
        """
        env: dict[str, str] = {}
        if self.thread_percentage is not None:
            env[MPS_THREAD_PERCENTAGE] = str(self.thread_percentage)
        if self.memory_limit is not None and gpu_count > 0:
            mebibytes = self.memory_limit // 2**20
            env[MPS_MEMORY_LIMIT] = ",".join(f"{i}={mebibytes}M" for i in range(gpu_count))
        return env


@dataclass(frozen=True, slots=True, kw_only=True)
class GangMember:
    """One placed task of a job, as its peers need to know it: ``role[index]`` runs on
    ``node``, whose declared address is ``address`` (None: the executor knows the node)."""

    role: str
    index: int
    node: str
    address: str | None = None

    def __post_init__(self) -> None:
        if self.index < 0:
            raise InvalidInput(f"{self.index} is negative", field="gang.index", fix="count from 0")
        if self.address is not None:
            check_address(self.address, field="gang.address")


@dataclass(frozen=True, slots=True, kw_only=True)
class TaskLaunch:
    """Everything needed to start one task of one job on one node.

    ``command`` is an argv tuple, or one shell script (run as ``/bin/sh -c`` would).
    ``env`` is the user's (and the controller's extra) environment; the executor adds the rendezvous
    variables on top, so ``RANK`` or ``CUDA_VISIBLE_DEVICES`` set here are overridden.
    ``job_roles`` lists the job's roles in spec order; ranks follow it (empty: the
    order in which roles first appear among the tasks started together).
    ``cpu_millicores`` and ``memory_bytes`` are limits, enforced where the host allows.
    ``address`` is ``node``'s declared address (None: none declared; see the module
    docstring for how an executor resolves it). ``nics`` are the NICs the engine bound to
    the task (``Bind.nics``: a task of a multi-node job on a node whose GPU topology
    names NICs); the task sees them as ``NCCL_IB_HCA`` and ``PHALANX_NICS``.
    ``identity`` is the Unix identity the task runs as (None: the server's own, in
    single-user mode or with a shared identity).
    ``gang`` lists every task of the job placed with this one, whether started now or
    later (a role that ``dependsOn`` another starts once it runs): ranks, ``WORLD_SIZE``
    and the host lists count them all. Empty: the tasks started together plus the job's
    tasks already live. When it lists this task, it lists it on ``node`` at ``address``.
    ``image`` is the container image the task runs in (None: directly on the host);
    ``mounts`` the host directories its container sees at the same path (read-write).
    ``hostfile`` asks for an MPI hostfile of another role's tasks in the task's working
    directory, named by ``PHALANX_HOSTFILE`` (``taskenv.task_files``); None: no file.
    ``elastic_nodes`` is the ``(min, max)`` replicas of an elastic role in rendezvous
    mode: the task gets torchrun's rendezvous variables (``rendezvous.torchrun_env``).
    ``attempt`` is the job's attempt this start belongs to (1: the first; None: not
    known), for the header of its run in the logs (``attempts``).
    ``model_path`` is the directory of the model version the task reads, read-only, on
    this host (None: it reads none): the task sees it as ``PHALANX_MODEL_PATH``, and a
    container sees it at the same path, mounted read-only. ``model_digest`` is that
    version's digest: an executor on another host (a Ray node's agent) copies it out
    there before the start and sets ``model_path`` to its copy. ``datasets`` are the
    directories of the datasets the task reads, by name, read-only on this host: the
    task sees each as ``PHALANX_DATA_<NAME>``, a container at the same path, read-only.
    ``dataset_copies`` are the datasets the task reads where an executor on another
    host (a Ray node's agent) copies them into its node's cache before the start, and
    adds each copy's directory to ``datasets``.
    ``secret_env`` are the variables of the job's secrets given ``as: env`` (set over the
    role's own); ``secret_files`` the keys of those given ``as: files``, by ``NAME/KEY``,
    written under ``PHALANX_SECRETS_DIR`` in the task's directory, mode 0600, as its user.
    Neither is ever logged or recorded.
    """

    job: str
    task: str
    role: str
    index: int
    node: str
    command: tuple[str, ...] | str
    env: Mapping[str, str] = field(default_factory=dict)
    gpus: tuple[int, ...] = ()
    gpu_share: GpuShareHint | None = None
    cpu_millicores: int | None = None
    memory_bytes: int | None = None
    # Online by default: pausing is opt-in, a task is never stopped for a class it did not ask for.
    workload: ServiceClass = ServiceClass.ONLINE
    job_roles: tuple[str, ...] = ()
    address: str | None = None
    nics: tuple[str, ...] = ()
    gang: tuple[GangMember, ...] = ()
    identity: TaskIdentity | None = None
    image: str | None = None
    mounts: tuple[str, ...] = ()
    hostfile: Hostfile | None = None
    elastic_nodes: tuple[int, int] | None = None
    attempt: int | None = None
    model_path: str | None = None
    model_digest: str | None = None
    datasets: Mapping[str, str] = field(default_factory=dict)
    dataset_copies: tuple[DatasetCopy, ...] = ()
    secret_env: Mapping[str, str] = field(default_factory=dict)
    secret_files: Mapping[str, bytes] = field(default_factory=dict)

    def __post_init__(self) -> None:
        check_directory_names(self.job, self.task)
        if self.index < 0:
            raise InvalidInput(f"{self.index} is negative", field="index", fix="count from 0")
        if not self.command or (isinstance(self.command, str) and not self.command.strip()):
            raise InvalidInput(
                "the command is empty",
                field="command",
                fix='give an argv list (["python", "train.py"]) or a shell string',
            )
        if self.job_roles and self.role not in self.job_roles:
            raise InvalidInput(
                f"role {self.role!r} is not among the job's roles {list(self.job_roles)}",
                field="job_roles",
                fix="list every role of the job, in spec order",
            )
        for name, limit in (
            ("cpu_millicores", self.cpu_millicores),
            ("memory_bytes", self.memory_bytes),
        ):
            if limit is not None and limit <= 0:
                raise InvalidInput(
                    f"{limit} is not positive", field=name, fix="omit it for no limit"
                )
        if self.address is not None:
            check_address(self.address, field="address")
        self._check_nics()
        self._check_gang()

    def _check_nics(self) -> None:
        for nic in self.nics:
            check_nic_name(nic)  # the names are joined with commas into NCCL_IB_HCA
        if len(set(self.nics)) != len(self.nics):
            raise InvalidInput(
                f"{list(self.nics)} names a NIC twice", field="nics", fix="name each NIC once"
            )

    def _check_gang(self) -> None:
        for member in self.gang:
            if (member.role, member.index) != (self.role, self.index):
                continue
            if (member.node, member.address) != (self.node, self.address):
                raise InvalidInput(
                    f"the gang places {self.role}[{self.index}] on {member.node} "
                    f"(address {member.address}) but the launch is for {self.node} "
                    f"(address {self.address})",
                    field="gang",
                    fix="build the gang from the same placement as the launch",
                )

    def argv(self) -> tuple[str, ...]:
        """The argv that runs the command: itself, or ``/bin/sh -c <string>``."""
        if isinstance(self.command, str):
            return ("/bin/sh", "-c", self.command)
        return self.command
