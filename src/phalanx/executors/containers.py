"""Container images: a role's ``image`` runs its tasks in containers on this host.

What runs where: the launcher starts the runtime's client (``podman run``, or ``docker
run`` where only docker is installed) under the task's usual wrapper, in the task's
process group; the client runs as the server's own user (root, as kubelet does) and
the container as the task's identity. Guarantees of every container:

- the task's working directory is mounted at the same path and is its working
  directory; stdout and stderr go to its ``stdout.log`` and ``stderr.log`` there;
- its environment is the task's (the user's ``env``, the rendezvous, ``PHALANX_*``),
  written to a file of mode 0600 in the server's own directory of the task: no value is
  ever on a command line, where ``ps`` would show it to every user. The server's own
  variables (``PATH`` included) are not passed: the image's stay;
- ``--user uid:gid`` (and ``--group-add``) of the task's identity (none: the server's
  own), ``--security-opt no-new-privileges``, ``--network host`` (the rendezvous ports
  are the host's), ``--cpus`` and ``--memory`` from the request, and one CDI device
  ``nvidia.com/gpu=<id>`` per GPU the engine bound, so ``CUDA_VISIBLE_DEVICES`` counts
  from 0 inside;
- a deterministic name (``container_name``) and the labels ``phalanx.io/job``,
  ``phalanx.io/task`` and ``phalanx.io/data-dir`` (the server's scope), by which a
  restarted server finds it. No container outlives its task: the client's shell
  (``CLEANUP``) removes it once the client has its exit code, and the server removes
  one whose end the client may not have seen (``ContainerTask``). Not ``--rm`` with
  podman: its cleanup process can remove the container before the client has read the
  exit code, and the client then says 0 (podman 4.3, under load);
- ``--init`` where the runtime has an init (podman's catatonit, docker's own): a signal
  reaches the command as it would on the host (a command that handles no SIGTERM dies
  of it, instead of being PID 1, which ignores it). A command missing from the image
  then ends with code 1 and the init's words in ``stderr.log`` (127 without).

Stopping: SIGTERM goes to the task's group as for any task, and the client passes it
on to the container; the SIGKILL after the grace goes through the runtime (``podman
kill``), since a killed client would leave the container running.

Settings (``detect_runtime`` reads them from the server's environment):

- ``PHALANX_CONTAINER_RUNTIME``: ``podman``, ``docker``, a client's path, or ``none``
  (default: podman when installed, else docker when its daemon answers);
- ``PHALANX_CONTAINER_OCI_RUNTIME``: the ``--runtime`` of every container (default:
  ``runc`` on a host with the hybrid cgroup v1/v2 layout, which crun refuses; empty:
  the runtime's own choice);
- ``PHALANX_CONTAINER_ULIMITS``: ``nofile=N:N,nproc=N:N`` (default: the server's own
  soft limits, nproc at most 32768). Podman's defaults are above what some hosts let
  a container have, and runc then refuses to start it;
- ``PHALANX_CONTAINER_PULL``: ``never`` (default: an image must be on the node, else
  the task fails to start saying how to get it there) or ``missing``;
- ``PHALANX_CONTAINER_INIT``: ``1`` or ``0`` for ``--init`` (default: 1 with docker, and
  with podman when its catatonit is installed).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import resource
import shutil
import socket
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Final, Protocol

from phalanx.domain.errors import InvalidInput
from phalanx.executors.identity import TaskIdentity
from phalanx.executors.launch import TaskLaunch
from phalanx.executors.process import Exit, GroupSignals
from phalanx.executors.taskenv import INHERITED_ENV

__all__ = [
    "ENV_FILE",
    "JOB_LABEL",
    "SCOPE_LABEL",
    "TASK_LABEL",
    "ContainerRuntime",
    "ContainerTask",
    "Found",
    "RuntimeKind",
    "Ulimit",
    "container_env",
    "container_name",
    "detect_runtime",
    "run_argv",
    "write_env_file",
]

JOB_LABEL: Final = "phalanx.io/job"
TASK_LABEL: Final = "phalanx.io/task"
#: The label tying a container to one server: its data dir's scope (``taskgroups.scope_of``).
SCOPE_LABEL: Final = "phalanx.io/data-dir"
#: The task's environment, in the server's own directory of the task.
ENV_FILE: Final = "container.env"

#: The shell the client runs under: it passes signals to the client (which passes them
#: on to the container), keeps the client's exit code, and removes the container after.
#: ``$0`` is the container's name, ``$1`` the client.
CLEANUP: Final = (
    'trap : HUP INT QUIT TERM; "$@"; code=$?; "$1" rm -f "$0" >/dev/null 2>&1; exit "$code"'
)

#: How long a call of the runtime's client (kill, inspect, ...) may take.
CLIENT_TIMEOUT: Final = 30.0
#: nproc at most this by default: the limit counts every process of the uid on the host.
NPROC_CAP: Final = 32768
NOFILE_CAP: Final = 1 << 20
#: The longest line the runtimes read from an env file (Go's bufio.Scanner: 64 KiB).
ENV_LINE_MAX: Final = 65536 - 1

_NAME_PART: Final = re.compile(r"[^A-Za-z0-9_.-]+")
_ENV_NAME: Final = re.compile(r"[^=\s#][^=\s]*")
_CLIENT_ENV: Final = (
    "PATH", "HOME", "USER", "LOGNAME", "LANG", "TMPDIR", "XDG_RUNTIME_DIR", "XDG_CONFIG_HOME",
    "XDG_DATA_HOME", "CONTAINERS_CONF", "CONTAINERS_STORAGE_CONF", "CONTAINERS_REGISTRIES_CONF",
    "DOCKER_HOST", "DOCKER_CONFIG",
)  # fmt: skip
_SYSTEM_PATH: Final = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


class RuntimeKind(StrEnum):
    """Which client a runtime is driven through (their flags differ a little)."""

    PODMAN = "podman"
    DOCKER = "docker"


@dataclass(frozen=True, slots=True, kw_only=True)
class Ulimit:
    """One ``--ulimit name=soft:hard`` of every container."""

    name: str
    soft: int
    hard: int

    def flag(self) -> str:
        return f"{self.name}={self.soft}:{self.hard}"


@dataclass(frozen=True, slots=True, kw_only=True)
class Found:
    """A container of a task, as the runtime lists it: running, or ended with ``code``."""

    name: str
    running: bool
    code: int | None


@dataclass(frozen=True, slots=True, kw_only=True)
class ContainerRuntime:
    """A container runtime on this host and the settings of every container it runs.

    ``client`` is the program (``podman``'s path); ``environ`` the client's whole
    environment (the server's own variables, never a task's). Every call of the client
    made here waits at most ``CLIENT_TIMEOUT`` and never raises: what it could not do
    reads as nothing found, nothing done.
    """

    kind: RuntimeKind
    client: str
    oci_runtime: str = ""
    ulimits: tuple[Ulimit, ...] = ()
    pull: str = "never"
    init: bool = True
    environ: Mapping[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.pull not in {"never", "missing"}:
            raise InvalidInput(
                f"{self.pull!r} is not a pull policy",
                field="PHALANX_CONTAINER_PULL",
                fix="never or missing",
            )

    def image_problem(self, image: str) -> str | None:
        """Why ``image`` cannot run here (it is not on this node and may not be pulled),
        or None when it can."""
        if self.pull != "never":
            return None
        done = self._call([self.client, "image", "inspect", "--format", "{{.Id}}", image])
        if done is not None and done.returncode == 0:
            return None
        said = "" if done is None else (done.stderr.strip().removeprefix("Error: ") or "not found")
        return (
            f"image {image!r} is not on this node ({self.kind} says: {said or 'no answer'}) "
            f"and images are not pulled here (PHALANX_CONTAINER_PULL=never): "
            f"{self.kind} pull {image} (or build it) on the node, or fix the role's image"
        )

    def kill(self, name: str) -> bool:
        """SIGKILL the container ``name``; True when the runtime did."""
        done = self._call([self.client, "kill", name])
        return done is not None and done.returncode == 0

    def pause(self, name: str) -> bool:
        """Freeze the container ``name``; True when the runtime did."""
        done = self._call([self.client, "pause", name])
        return done is not None and done.returncode == 0

    def unpause(self, name: str) -> bool:
        """Let a frozen container run again; True when the runtime did."""
        done = self._call([self.client, "unpause", name])
        return done is not None and done.returncode == 0

    def remove(self, name: str) -> None:
        """Remove the container ``name``, killing it if it runs; none is fine."""
        self._call([self.client, "rm", "-f", name])

    def find(self, scope: str, job: str, task: str) -> list[Found]:
        """The containers of ``task`` of ``job`` of the server with ``scope``, by labels."""
        argv = [self.client, "ps", "-a", "--no-trunc", "--format", "{{json .}}"]
        for key, value in ((SCOPE_LABEL, scope), (JOB_LABEL, job), (TASK_LABEL, task)):
            argv += ["--filter", f"label={key}={value}"]
        done = self._call(argv)
        if done is None or done.returncode != 0:
            return []
        return [_found(item) for item in _json_items(done.stdout)]

    def _call(self, argv: Sequence[str]) -> subprocess.CompletedProcess[str] | None:
        try:
            return subprocess.run(
                argv,
                env=dict(self.environ),
                capture_output=True,
                text=True,
                timeout=CLIENT_TIMEOUT,
                check=False,
                stdin=subprocess.DEVNULL,
            )
        except (OSError, subprocess.SubprocessError):
            return None


def run_argv(
    runtime: ContainerRuntime,
    launch: TaskLaunch,
    *,
    name: str,
    scope: str,
    workdir: Path,
    env_file: Path,
) -> tuple[str, ...]:
    """The client's argv that runs ``launch`` in its image (see the module docstring)."""
    uid, gid, groups = _user(launch.identity)
    argv = [
        runtime.client, "run", "--sig-proxy=true", "--name", name,
        "--label", f"{SCOPE_LABEL}={scope}", "--label", f"{JOB_LABEL}={launch.job}",
        "--label", f"{TASK_LABEL}={launch.task}",
        "--pull", runtime.pull, "--network", "host",
        "--security-opt", "no-new-privileges", "--user", f"{uid}:{gid}",
        "--volume", f"{workdir}:{workdir}", "--workdir", str(workdir),
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


class _Process(Protocol):
    """What a task's process offers (``process.TaskProcess``, ``launcher.LaunchedTask``)."""

    @property
    def pid(self) -> int: ...
    @property
    def start_time(self) -> float: ...
    @property
    def workdir(self) -> Path: ...
    def send(self, signum: int) -> bool: ...
    def kill(self) -> bool: ...
    def poll(self) -> Exit | None: ...


class ContainerTask(GroupSignals):
    """A task that runs in container ``name``: the calls of a task's process (``inner``,
    its client's wrapper), with kill, pause and resume going through the runtime.

    Its end is the wrapper's, with the container's exit code. A task that was killed,
    or ended with no code or one of the runtime's own (125 and over: the client failed
    or died of a signal), may have left its container behind: it is removed then.
    """

    __slots__ = ("_killed", "inner", "name", "runtime")

    def __init__(self, inner: _Process, runtime: ContainerRuntime, name: str) -> None:
        self.inner = inner
        self.runtime = runtime
        self.name = name
        self._killed = False

    @property
    def pid(self) -> int:
        return self.inner.pid

    @property
    def start_time(self) -> float:
        return self.inner.start_time

    @property
    def workdir(self) -> Path:
        """Where its wrapper writes ``exit_code`` (the server's own directory of it)."""
        return self.inner.workdir

    @property
    def orphaned(self) -> bool:
        """True when the launcher that started it is gone (see ``LaunchedTask``)."""
        return bool(getattr(self.inner, "orphaned", False))

    def send(self, signum: int) -> bool:
        return self.inner.send(signum)

    def kill(self) -> bool:
        """SIGKILL the container through the runtime, then the client's group."""
        self._killed = True
        killed = self.runtime.kill(self.name)
        return self.inner.kill() or killed

    def pause(self) -> bool:
        return self.runtime.pause(self.name)

    def resume(self) -> bool:
        return self.runtime.unpause(self.name)

    def poll(self) -> Exit | None:
        ended = self.inner.poll()
        if ended is not None and (self._killed or ended.code is None or ended.code >= 125):
            self.runtime.remove(self.name)
        return ended


def detect_runtime(environ: Mapping[str, str] | None = None) -> ContainerRuntime | None:
    """This host's container runtime with its settings (module docstring), or None.

    Cheap (no client is run): podman counts when its client is installed, docker when
    its client is and its daemon's socket accepts a connection. Raises ``InvalidInput``
    naming a setting that is wrong."""
    env = os.environ if environ is None else environ
    wanted = env.get("PHALANX_CONTAINER_RUNTIME", "").strip()
    path = env.get("PATH", _SYSTEM_PATH)
    if wanted == "none":
        return None
    if wanted and wanted not in set(RuntimeKind) and not os.access(wanted, os.X_OK):
        raise InvalidInput(
            f"{wanted!r} is no container runtime here",
            field="PHALANX_CONTAINER_RUNTIME",
            fix="podman, docker, the path of their client, or none",
        )
    found = _client(wanted, path, env)
    if found is None:
        return None
    kind, client = found
    oci = env.get("PHALANX_CONTAINER_OCI_RUNTIME")
    if oci is None:
        oci = _default_oci_runtime(path) if kind is RuntimeKind.PODMAN else ""
    init = env.get("PHALANX_CONTAINER_INIT")
    if init not in {None, "0", "1"}:
        raise InvalidInput(
            f"{init!r} is not 0 or 1", field="PHALANX_CONTAINER_INIT", fix="1 for --init, 0 not"
        )
    return ContainerRuntime(
        kind=kind,
        client=client,
        oci_runtime=oci,
        init=init == "1" if init is not None else _has_init(kind),
        ulimits=_ulimits(env.get("PHALANX_CONTAINER_ULIMITS")),
        pull=env.get("PHALANX_CONTAINER_PULL", "never"),
        environ={k: env[k] for k in _CLIENT_ENV if k in env} | {"PATH": path},
    )


def _client(wanted: str, path: str, env: Mapping[str, str]) -> tuple[RuntimeKind, str] | None:
    if wanted and wanted not in set(RuntimeKind):
        base = Path(wanted).name
        return (RuntimeKind.DOCKER if "docker" in base else RuntimeKind.PODMAN), wanted
    for kind in (RuntimeKind.PODMAN, RuntimeKind.DOCKER):
        if wanted and kind != wanted:
            continue
        client = shutil.which(kind.value, path=path)
        if client is None:
            continue
        if kind is RuntimeKind.DOCKER and not wanted and not _docker_answers(env):
            continue
        return kind, client
    return None


def _docker_answers(env: Mapping[str, str]) -> bool:
    host = env.get("DOCKER_HOST", "unix:///var/run/docker.sock")
    if not host.startswith("unix://"):
        return True  # a remote daemon: trust the setting
    with contextlib.suppress(OSError), socket.socket(socket.AF_UNIX) as sock:
        sock.settimeout(1.0)
        sock.connect(host.removeprefix("unix://"))
        return True
    return False


def _default_oci_runtime(path: str) -> str:
    """runc on a host with the hybrid cgroup layout (v1 controllers and a v2 ``unified``
    hierarchy), where crun refuses to run; else the runtime's own choice."""
    hybrid = Path("/sys/fs/cgroup/unified").is_dir() and Path("/sys/fs/cgroup/memory").is_dir()
    return "runc" if hybrid and shutil.which("runc", path=path) else ""


def _has_init(kind: RuntimeKind) -> bool:
    """True for docker (its daemon ships docker-init), and for podman with catatonit
    where Debian, Fedora and the upstream packages put it."""
    if kind is RuntimeKind.DOCKER:
        return True
    places = (
        "/usr/libexec/podman/catatonit",
        "/usr/libexec/catatonit/catatonit",
        "/usr/bin/catatonit",
    )
    return any(Path(place).is_file() for place in places)


def _ulimits(setting: str | None) -> tuple[Ulimit, ...]:
    if setting is None:
        nofile = min(resource.getrlimit(resource.RLIMIT_NOFILE)[0], NOFILE_CAP)
        nproc = min(resource.getrlimit(resource.RLIMIT_NPROC)[0], NPROC_CAP)
        if nofile < 0:  # RLIM_INFINITY
            nofile = NOFILE_CAP
        if nproc < 0:
            nproc = NPROC_CAP
        return (
            Ulimit(name="nofile", soft=nofile, hard=nofile),
            Ulimit(name="nproc", soft=nproc, hard=nproc),
        )
    limits = []
    for item in filter(None, (part.strip() for part in setting.split(","))):
        match = re.fullmatch(r"([a-z]+)=(\d+):(\d+)", item)
        if match is None or int(match[2]) > int(match[3]):
            raise InvalidInput(
                f"{item!r} is not a ulimit",
                field="PHALANX_CONTAINER_ULIMITS",
                fix="name=soft:hard, comma-separated, soft at most hard (nofile=1024:1024)",
            )
        limits.append(Ulimit(name=match[1], soft=int(match[2]), hard=int(match[3])))
    return tuple(limits)


def _user(identity: TaskIdentity | None) -> tuple[int, int, tuple[int, ...]]:
    if identity is None:
        return os.getuid(), os.getgid(), ()
    return identity.uid, identity.gid, identity.groups


def _json_items(text: str) -> list[dict[str, object]]:
    """podman prints one JSON array or one object a line; docker one object a line."""
    text = text.strip()
    if not text:
        return []
    with contextlib.suppress(ValueError):
        whole = json.loads(text)
        return [i for i in (whole if isinstance(whole, list) else [whole]) if isinstance(i, dict)]
    items = []
    for line in text.splitlines():
        with contextlib.suppress(ValueError):
            item = json.loads(line)
            if isinstance(item, dict):
                items.append(item)
    return items


def _found(item: Mapping[str, object]) -> Found:
    names = item.get("Names")
    name = names[0] if isinstance(names, list) and names else str(names or "")
    state = str(item.get("State", "")).lower()
    code = item.get("ExitCode")
    status = re.match(r"Exited \((\d+)\)", str(item.get("Status", "")))
    if not isinstance(code, int) and status is not None:  # docker says it only here
        code = int(status[1])
    running = state in {"running", "paused", "created"} or state.startswith("up")
    known = isinstance(code, int) and not running and state in {"exited", "stopped"}
    return Found(
        name=str(name), running=running, code=code if known and isinstance(code, int) else None
    )
