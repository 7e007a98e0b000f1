"""Which container runtime this host has, with its settings from the server's
environment (the ``PHALANX_CONTAINER_*`` variables: see the package docstring)."""

from __future__ import annotations

import contextlib
import os
import re
import resource
import shutil
import socket
from collections.abc import Mapping
from pathlib import Path
from typing import Final

from phalanx.domain.errors import InvalidInput
from phalanx.domain.node import CONTAINER_RUNTIME_LABEL
from phalanx.executors.containers.runtime import ContainerRuntime, RuntimeKind, Ulimit

#: nproc at most this by default: the limit counts every process of the uid on the host.
NPROC_CAP: Final = 32768
NOFILE_CAP: Final = 1 << 20
#: The server's variables the client gets (its own configuration; never a task's).
_CLIENT_ENV: Final = (
    "PATH", "HOME", "USER", "LOGNAME", "LANG", "TMPDIR", "XDG_RUNTIME_DIR", "XDG_CONFIG_HOME",
    "XDG_DATA_HOME", "CONTAINERS_CONF", "CONTAINERS_STORAGE_CONF", "CONTAINERS_REGISTRIES_CONF",
    "DOCKER_HOST", "DOCKER_CONFIG",
)  # fmt: skip
_SYSTEM_PATH: Final = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


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


def node_labels(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """The labels of a node on this host: ``phalanx.io/container-runtime`` with the
    runtime ``detect_runtime`` finds, or none. For whatever builds this host's node (the
    local node, a Ray node probed on its own host) to agree with the executor on it."""
    runtime = detect_runtime(environ)
    return {} if runtime is None else {CONTAINER_RUNTIME_LABEL: runtime.kind.value}


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
