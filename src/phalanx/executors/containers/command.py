"""The command line that runs a task in its image, and the environment it gets there."""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Final

from phalanx.domain.errors import InvalidInput
from phalanx.executors.containers.runtime import (
    JOB_LABEL,
    SCOPE_LABEL,
    TASK_LABEL,
    ContainerRuntime,
    RuntimeKind,
)
from phalanx.executors.identity import TaskIdentity
from phalanx.executors.launch import TaskLaunch
from phalanx.executors.taskenv import INHERITED_ENV

#: Where podman and docker read CDI specs (the devices ``--device vendor/class=name`` names).
CDI_DIRS: Final = ("/etc/cdi", "/var/run/cdi")
#: The CDI kind of NVIDIA's GPUs.
GPU_KIND: Final = "nvidia.com/gpu"

#: The task's environment, in the server's own directory of the task.
ENV_FILE: Final = "container.env"

#: The shell the client runs under: it passes signals to the client (which passes them
#: on to the container), exits with the container's exit code, and removes the container
#: after. The code is the runtime's record of the container (``wait``) when it has one:
#: podman 4.3's client, signalled or busy, sometimes says 0 for a container that exited
#: otherwise. Else the client's own (125 when it could not make the container). A
#: container that was made but never started (the OCI runtime refused it: a mount it
#: cannot make, a limit it cannot set) is left for the server to read why
#: (``ContainerRuntime.never_started``), and its code is never 0: the runtime's record
#: of it says 0, and nothing ran. ``$0`` is the container's name, ``$1`` the client.
CLEANUP: Final = """\
trap : HUP INT QUIT TERM
"$@"
code=$?
state=$("$1" inspect --format '{{.State.Status}}' "$0" 2>/dev/null)
if [ "$state" = created ]; then
  [ "$code" = 0 ] && code=125
  exit "$code"
fi
recorded=$("$1" wait "$0" 2>/dev/null)
case $recorded in ''|*[!0-9]*) ;; *) code=$recorded ;; esac
"$1" rm -f "$0" >/dev/null 2>&1
exit "$code"
"""
#: The longest line the runtimes read from an env file (Go's bufio.Scanner: 64 KiB).
ENV_LINE_MAX: Final = 65536 - 1

_NAME_PART: Final = re.compile(r"[^A-Za-z0-9_.-]+")
_ENV_NAME: Final = re.compile(r"[^=\s#][^=\s]*")


def run_argv(
    runtime: ContainerRuntime,
    launch: TaskLaunch,
    *,
    name: str,
    scope: str,
    workdir: Path,
    env_file: Path,
) -> tuple[str, ...]:
    """The client's argv that runs ``launch`` in its image (see the package docstring).
    Raises ``InvalidInput`` for a working directory that a volume cannot name."""
    if ":" in str(workdir) or "," in str(workdir):
        raise InvalidInput(
            f"the task's directory {workdir} holds ':' or ',', which a container's volume "
            "cannot name",
            field="workdir",
            fix="use a tasks dir (--tasks-dir) and job names without ':' or ','",
        )
    volumes = []
    for path in dict.fromkeys((str(workdir), *launch.mounts)):
        if not os.path.isabs(path) or ":" in path or "," in path:
            raise InvalidInput(
                f"{path!r} cannot be mounted: it is not an absolute path without ':' or ','",
                field="mounts",
                fix="give plain absolute directory paths",
            )
        volumes += ["--volume", f"{path}:{path}"]
    # the caches name a version or a dataset by the hex of its digest: a plain path
    for read in (launch.model_path, *launch.datasets.values()):
        if read is not None and os.path.isabs(read) and ":" not in read and "," not in read:
            volumes += ["--volume", f"{read}:{read}:ro"]
    uid, gid, groups = _user(launch.identity)
    argv = [
        runtime.client, "run", "--sig-proxy=true", "--name", name,
        "--label", f"{SCOPE_LABEL}={scope}", "--label", f"{JOB_LABEL}={launch.job}",
        "--label", f"{TASK_LABEL}={launch.task}",
        "--pull", runtime.pull, "--network", "host",
        "--security-opt", "no-new-privileges", "--user", f"{uid}:{gid}",
        *volumes, "--workdir", str(workdir),
        "--env-file", str(env_file),
    ]  # fmt: skip
    if runtime.init:
        argv.append("--init")
    if runtime.kind is RuntimeKind.PODMAN:
        # passthrough: the container writes to the logs itself, with or without a client.
        argv += ["--replace", "--log-driver", "passthrough"]
    else:
        argv.append("--rm")  # docker's daemon removes it once the client has its code
    if runtime.oci_runtime:
        argv += ["--runtime", runtime.oci_runtime]
    for group in groups:
        argv += ["--group-add", str(group)]
    for ulimit in runtime.ulimits:
        argv += ["--ulimit", ulimit.flag()]
    if launch.cpu_millicores is not None:
        argv += ["--cpus", f"{launch.cpu_millicores / 1000:g}"]
    if launch.memory_bytes is not None:  # swap as large as memory: no swap on top
        argv += ["--memory", str(launch.memory_bytes), "--memory-swap", str(launch.memory_bytes)]
    for gpu in launch.gpus:
        argv += ["--device", f"nvidia.com/gpu={gpu}"]
    assert launch.image is not None
    return ("/bin/sh", "-c", CLEANUP, name, *argv, launch.image, *launch.argv())


def container_env(launch: TaskLaunch, env: Mapping[str, str], *, workdir: Path) -> dict[str, str]:
    """The task's environment ``env`` as it is inside the container: the server's
    inherited variables left out (the image's ``PATH`` and locale stay) unless the user
    set them, ``HOME`` the working directory (a home on the host is not mounted), and
    ``CUDA_VISIBLE_DEVICES`` counting the container's own GPUs from 0."""
    inside = {k: v for k, v in env.items() if k not in INHERITED_ENV or k in launch.env}
    if launch.identity is not None:
        inside.update(USER=launch.identity.name, LOGNAME=launch.identity.name)
    inside["HOME"] = launch.env.get("HOME", str(workdir))
    if launch.gpus:
        inside["CUDA_VISIBLE_DEVICES"] = ",".join(str(i) for i in range(len(launch.gpus)))
    return inside


def write_env_file(path: Path, env: Mapping[str, str]) -> None:
    """Write ``env`` as the runtimes' env file, mode 0600, whole or not at all.

    Raises ``InvalidInput`` naming a variable the format cannot carry (a line break or
    NUL in its value, a name with ``=``, blanks or a leading ``#``, a line over 64 KiB),
    ``OSError`` when it cannot be written."""
    lines = []
    for name, value in env.items():
        line = f"{name}={value}"
        if not _ENV_NAME.fullmatch(name) or any(c in value for c in "\n\r\0"):
            raise InvalidInput(
                f"variable {name!r} cannot be passed into a container",
                field=f"env.{name}",
                fix="use a name without blanks or '=' and a value on one line",
            )
        if len(line.encode()) > ENV_LINE_MAX:
            raise InvalidInput(
                f"variable {name!r} is over 64 KiB, which a container's env file cannot carry",
                field=f"env.{name}",
                fix="pass large values in a file in the task's directory",
            )
        lines.append(line + "\n")
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_suffix(".tmp")
    partial.unlink(missing_ok=True)
    fd = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    with os.fdopen(fd, "w") as out:
        out.write("".join(lines))
    partial.replace(path)


def container_name(scope: str, job: str, task: str) -> str:
    """``phalanx-<scope>-<job>-<task>-<hash>``: the same for the same task of the same
    server, distinct for distinct tasks, and a valid container name whatever the names
    hold (other characters become ``-``, long names are cut; the hash keeps them apart)."""
    digest = hashlib.sha256(f"{job}\0{task}".encode()).hexdigest()[:12]
    parts = (_NAME_PART.sub("-", part)[:48].strip("-.") or "x" for part in (job, task))
    return "-".join(("phalanx", scope[:12], *parts, digest))


def cdi_problem(dirs: tuple[str, ...] = CDI_DIRS) -> str | None:
    """Why a container cannot be given GPUs here (no CDI spec in ``dirs`` names
    ``nvidia.com/gpu`` devices), or None when one does."""
    for directory in map(Path, dirs):
        with contextlib.suppress(OSError):
            for spec in sorted(directory.iterdir()):
                if spec.suffix in {".yaml", ".yml", ".json"} and GPU_KIND in spec.read_text():
                    return None
    return (
        f"the task asks for GPUs, and no CDI spec on this node names {GPU_KIND} devices "
        f"(in {' or '.join(dirs)}): generate one with NVIDIA's container toolkit "
        "(nvidia-ctk cdi generate --output=/etc/cdi/nvidia.yaml), or run the role on the host"
    )


def _user(identity: TaskIdentity | None) -> tuple[int, int, tuple[int, ...]]:
    if identity is None:
        return os.getuid(), os.getgid(), ()
    return identity.uid, identity.gid, identity.groups
