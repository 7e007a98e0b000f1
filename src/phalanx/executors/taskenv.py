"""A task's whole environment: what it inherits, who it is, and what the scheduler chose.

Guarantees: a task gets only the allow-listed variables of the server (never its
credentials), its identity's ``HOME``, ``USER`` and ``LOGNAME`` when it runs as a user's
own uid, and the scheduler's assignment (ranks, GPUs, NICs) over anything the user set.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Final

from phalanx.domain.job import data_variable
from phalanx.executors.launch import TaskLaunch
from phalanx.executors.rendezvous import hostfile_text
from phalanx.tenantfs import Place, TenantPathRefused, read_head

#: Variables a task inherits from the server. Everything else is left out on purpose:
#: the server's credentials (database URL, API tokens) must not reach user code.
INHERITED_ENV: Final = (
    "PATH", "HOME", "USER", "LOGNAME", "SHELL", "LANG", "LANGUAGE", "LC_ALL", "LC_CTYPE",
    "TZ", "TMPDIR", "TERM",
)  # fmt: skip
DEFAULT_PATH: Final = "/usr/local/bin:/usr/bin:/bin"

#: The NICs (RDMA devices) NCCL may use, set to exactly those the engine bound to the task.
NCCL_IB_HCA: Final = "NCCL_IB_HCA"
#: The NICs the engine bound to the task, comma-separated (empty: none bound).
PHALANX_NICS: Final = "PHALANX_NICS"
#: The path of the task's hostfile (a launch's ``hostfile``), in its working directory.
PHALANX_HOSTFILE: Final = "PHALANX_HOSTFILE"
#: The name of that file in the working directory.
HOSTFILE_NAME: Final = "hostfile"
#: Where a task's secrets given as files are, below its working directory.
PHALANX_SECRETS_DIR: Final = "PHALANX_SECRETS_DIR"
SECRETS_DIR: Final = "secrets"
#: The file a task may write its progress report to (``phalanx.client.progress``).
PHALANX_PROGRESS_FILE: Final = "PHALANX_PROGRESS_FILE"
#: The directory of the model version the task reads (read-only).
PHALANX_MODEL_PATH: Final = "PHALANX_MODEL_PATH"
#: The port reserved for the task on its node (a rendezvous variable), and ``PORT``,
#: which carries it too unless the task's own environment sets it.
PHALANX_PORT: Final = "PHALANX_PORT"
PORT: Final = "PORT"
#: That file's name in the working directory.
PROGRESS_NAME: Final = "progress.json"


def task_environment(
    launch: TaskLaunch,
    injected: Mapping[str, str],
    *,
    workdir: Path,
    inherited: Mapping[str, str],
) -> dict[str, str]:
    """The task's whole environment, later layers winning.

    Layers: the allow-listed ``INHERITED_ENV`` of the server, the launch's identity's
    ``HOME``, ``USER`` and ``LOGNAME`` (when it has one), the launch's own ``env``,
    the ``injected`` rendezvous variables, phalanx's task identity, the GPU share limits,
    the progress file (``PHALANX_PROGRESS_FILE``), the bound NICs and, for a launch
    with a ``hostfile``, ``PHALANX_HOSTFILE``, for one that reads a model version,
    ``PHALANX_MODEL_PATH``, for one that reads datasets, ``PHALANX_DATA_<NAME>`` each,
    and for one with secrets as files, ``PHALANX_SECRETS_DIR``
    (secrets as env come right after the launch's own env). ``PORT`` is the reserved
    ``PHALANX_PORT`` unless the launch's own env sets it. The
    scheduler's assignment (ranks, ``CUDA_VISIBLE_DEVICES``, the NICs, the hostfile)
    therefore cannot be overridden by user environment.

    NICs: ``PHALANX_NICS`` lists the launch's ``nics`` comma-separated (empty when none
    were bound). With NICs, ``NCCL_IB_HCA`` is ``=`` and the same list: the ``=`` makes
    NCCL take the names as exact device names, not as prefixes (``mlx5_1`` alone would
    also select ``mlx5_10`` and ``mlx5_11``). Without NICs, a user's ``NCCL_IB_HCA`` stays.
    """
    env = {name: inherited[name] for name in INHERITED_ENV if name in inherited}
    env.setdefault("PATH", DEFAULT_PATH)
    if launch.identity is not None:
        env.update(launch.identity.env(workdir))
    env.update(launch.env)
    env.update(launch.secret_env)
    env.update(injected)
    if PHALANX_PORT in injected:  # where its peers and, for a replica, the gateway reach it
        env.setdefault(PORT, injected[PHALANX_PORT])
    env.update(PHALANX_TASK=launch.task, PHALANX_NODE=launch.node, PHALANX_WORKDIR=str(workdir))
    env[PHALANX_PROGRESS_FILE] = str(workdir / PROGRESS_NAME)
    if launch.gpu_share is not None:
        env.update(launch.gpu_share.env(len(launch.gpus)))
    env[PHALANX_NICS] = ",".join(launch.nics)
    if launch.nics:
        env[NCCL_IB_HCA] = "=" + ",".join(launch.nics)
    if launch.hostfile is not None:
        env[PHALANX_HOSTFILE] = str(workdir / HOSTFILE_NAME)
    if launch.model_path is not None:
        env[PHALANX_MODEL_PATH] = launch.model_path
    for name, path in launch.datasets.items():
        env[data_variable(name)] = path
    if launch.secret_files:
        env[PHALANX_SECRETS_DIR] = str(workdir / SECRETS_DIR)
    return env


def task_files(launch: TaskLaunch, injected: Mapping[str, str]) -> dict[str, str | bytes]:
    """The files the executor writes into the task's working directory before it starts,
    by path: the hostfile of a launch with one (``rendezvous.hostfile_text`` of the same
    ``injected`` variables), and the secrets given as files (``secrets/NAME/KEY``).
    Raises ``InvalidInput`` when the hostfile's role has no task in the rendezvous."""
    files: dict[str, str | bytes] = {
        f"{SECRETS_DIR}/{path}": value for path, value in launch.secret_files.items()
    }
    if launch.hostfile is not None:
        spec = launch.hostfile
        files[HOSTFILE_NAME] = hostfile_text(injected, spec.role, spec.slots)
    return files


def read_report(path: Path, limit: int) -> tuple[int, bytes] | None:
    """(modification time in ns, at most ``limit`` bytes) of the regular file at
    ``path``, or None when there is none. Read through ``tenantfs`` (a task owns its
    directory and may put anything there): a link is not followed, a pipe or device is
    not read."""
    try:
        status, head = read_head(Place(path.parent, path.name), reader=None, limit=limit)
    except (TenantPathRefused, OSError):
        return None
    return status.st_mtime_ns, head
