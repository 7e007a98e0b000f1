"""What an executor needs to start one task: a ``TaskLaunch`` value.

The controller turns each ``Bind`` into a ``TaskLaunch`` (it knows the job's spec: the
command, the user's environment, the resource limits). The executor adds what only it
knows (the rendezvous: ranks, peers, ports) and starts the process.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from phalanx.domain.errors import InvalidInput
from phalanx.domain.job import ServiceClass

#: Environment variables of NVIDIA MPS that a fractional-GPU task is started with.
MPS_THREAD_PERCENTAGE = "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"
MPS_MEMORY_LIMIT = "CUDA_MPS_PINNED_DEVICE_MEM_LIMIT"


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
class TaskLaunch:
    """Everything needed to start one task of one job on one node.

    ``command`` is an argv tuple, or one string run by ``/bin/sh -c``. ``env`` is the
    user's (and the controller's extra) environment; the executor adds the rendezvous
    variables on top, so ``RANK`` or ``CUDA_VISIBLE_DEVICES`` set here are overridden.
    ``job_roles`` lists the job's roles in spec order; ranks follow it (empty: the
    order in which roles first appear among the tasks started together).
    ``cpu_millicores`` and ``memory_bytes`` are limits, enforced where the host allows.
    ``gang`` names every task of the job placed with this one, as ``(role, index, node)``,
    whether started now or later (a role that ``dependsOn`` another starts once it runs):
    ranks, ``WORLD_SIZE`` and the host lists count them all. Empty: the tasks started
    together plus the job's tasks already live.
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
    gang: tuple[tuple[str, int, str], ...] = ()

    def __post_init__(self) -> None:
        for name, value in (("job", self.job), ("task", self.task)):
            # Both name a directory under data_dir: refuse anything that could escape it.
            if not value or value in {".", ".."} or "/" in value or "\0" in value:
                raise InvalidInput(
                    f"{value!r} cannot name a task directory",
                    field=name,
                    fix="use a non-empty name without '/' (like the job's metadata.name)",
                )
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

    def argv(self) -> tuple[str, ...]:
        """The argv that runs the command: itself, or ``/bin/sh -c <string>``."""
        if isinstance(self.command, str):
            return ("/bin/sh", "-c", self.command)
        return self.command
