"""From a placement to a process: the ``TaskLaunch`` of a ``Bind``."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

from phalanx.data.copies import DatasetCopy
from phalanx.domain.errors import InvalidInput
from phalanx.domain.job import Job, RescaleMode, ServiceClass
from phalanx.engine.decisions import Bind
from phalanx.executors.identity import TaskIdentity
from phalanx.executors.launch import GangMember, GpuShareHint, TaskLaunch
from phalanx.spec.common import ENV_NAME
from phalanx.spec.limits import MAX_ENV_ENTRY


def launch_of(
    job: Job,
    bind: Bind,
    gang: tuple[GangMember, ...] = (),
    *,
    address: str | None = None,
    identity: TaskIdentity | None = None,
    attempt: int | None = None,
    model_path: str | None = None,
    model_digest: str | None = None,
    datasets: Mapping[str, str] | None = None,
    dataset_copies: tuple[DatasetCopy, ...] = (),
    secret_env: Mapping[str, str] | None = None,
    secret_files: Mapping[str, bytes] | None = None,
) -> TaskLaunch:
    """What the executor needs to start ``bind``'s task of ``job``.

    The role's command and environment, its CPU and memory as limits, the bound GPU ids
    and NICs, and for a share of one card the MPS limits the engine chose (compute
    percentage and memory). Offline jobs run as the colocation throttle's ``offline``
    class. ``gang`` is every placed task of the job with its node's declared address,
    for the rendezvous; ``address`` is the declared address of ``bind.node``;
    ``identity`` is the Unix identity of the job's user (None: the server's own);
    ``attempt`` the job's attempt the start belongs to; ``model_path`` where the model
    version the role reads was copied out (``models.cache``; None where the executor
    copies it out on the task's node) and ``model_digest`` that version; ``datasets``
    where the datasets it reads were copied (``data.cache``), by name, or
    ``dataset_copies`` what the task's node copies for them; ``secret_env`` and
    ``secret_files`` the role's secrets (``secret_parts``). A
    replica of an elastic role in rendezvous mode gets torchrun's rendezvous.
    """
    role = next(r for r in job.roles if r.name == bind.role)
    share = None
    if bind.share is not None:
        share = GpuShareHint(
            thread_percentage=bind.share.compute_percent,
            memory_limit=int(bind.share.memory_limit) or None,
        )
    cpu = role.resources.get("cpu")
    memory = role.resources.get("memory")
    return TaskLaunch(
        job=bind.job,
        task=bind.task,
        role=bind.role,
        index=bind.index,
        node=bind.node,
        command=role.command,
        env=role.env,
        gpus=bind.gpus,
        gpu_share=share,
        cpu_millicores=int(cpu) if cpu > 0 else None,
        memory_bytes=int(memory) if memory > 0 else None,
        workload=ServiceClass.OFFLINE
        if job.service_class is ServiceClass.OFFLINE
        else ServiceClass.ONLINE,
        job_roles=tuple(r.name for r in job.roles),
        address=address,
        nics=bind.nics,
        gang=gang,
        identity=identity,
        image=role.image,
        mounts=role.mounts,
        hostfile=role.hostfile,
        elastic_nodes=(
            (role.elastic.min_replicas, role.elastic.max_replicas)
            if role.elastic is not None and role.elastic.mode is RescaleMode.RENDEZVOUS
            else None
        ),
        attempt=attempt,
        model_path=model_path,
        model_digest=model_digest,
        datasets=datasets or {},
        dataset_copies=dataset_copies,
        secret_env=secret_env or {},
        secret_files=secret_files or {},
    )


#: The values of a user's secret by key, or None when the user has no such secret.
SecretValues = Callable[[str, str], Mapping[str, bytes] | None]


def secret_parts(
    user: str, uses: Sequence[tuple[str, str]], values: SecretValues | None
) -> tuple[dict[str, str], dict[str, bytes]]:
    """The environment and the files (by ``NAME/KEY``) of the secrets ``uses`` names
    (``(name, "env" | "files")``), read as ``user``'s. Raises ``InvalidInput`` (the
    task's start fails with it) for a secret the user no longer has, or whose keys can
    no longer be variables; the message names the secret and its keys, never a value."""
    env: dict[str, str] = {}
    files: dict[str, bytes] = {}
    for name, how in uses:
        found = None if values is None else values(user, name)
        if found is None:
            raise InvalidInput(
                f"user {user} has no secret {name!r} (deleted since the job was submitted)",
                field="secrets",
                fix=f"create it again (phalanx secret create {name} ...), then rerun the job",
            )
        for key, value in found.items():
            if how == "files":
                files[f"{name}/{key}"] = value
                continue
            try:
                text = value.decode()
            except UnicodeDecodeError:
                text = None
            if (
                text is None
                or "\0" in text
                or len(value) > MAX_ENV_ENTRY
                or not ENV_NAME.fullmatch(key)
            ):
                raise InvalidInput(
                    f"secret {name!r} key {key!r} cannot be an environment variable "
                    "(not a variable name, or its value is not text of at most "
                    f"{MAX_ENV_ENTRY} bytes)",
                    field="secrets",
                    fix="give the secret as files (as: files), or change the key",
                )
            env[key] = text
    return env, files
