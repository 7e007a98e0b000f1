"""What a controller persists so that a restarted server can find its tasks again."""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from phalanx.domain.errors import InvalidInput
from phalanx.domain.job import ServiceClass
from phalanx.executors.cgroups import GROUPED, IsolationKind
from phalanx.tenantfs import Place, make_dirs

log = logging.getLogger(__name__)

#: A record as JSON: strings, numbers and a list of GPU ids.
RecordDict = dict[str, str | int | float | list[int]]


@dataclass(frozen=True, slots=True, kw_only=True)
class ProcessRecord:
    """One running task: enough to re-attach it after a restart and to check it is the same.

    ``pid`` is the task's wrapper (its process-group leader) and ``start_time`` that
    process's start in seconds since the epoch: together they name one process, never a
    later one that reused the pid. ``workdir`` holds the task's logs and ``exit_code``.
    ``isolation`` is how the task's limits were enforced, and ``cgroup`` its group under
    cgroup v2, or its memory group under cgroup v1 (kept by a server that re-adopts the
    task, removed when the task ends). Records written before these fields existed read
    as rlimit isolation. ``container`` names the container of a task that runs in one
    (``phalanx.executors.containers``); ``workdir`` is then the server's own directory
    of the task, where its wrapper writes ``exit_code``, not the one the task writes in.
    ``logs`` is the directory its ``stdout.log`` and ``stderr.log`` were written in (its
    working directory under the tasks dir of the server that started it); records
    written before this field existed read as ``""`` (``log_dir`` then tells it from
    ``workdir`` where it can). ``endpoint`` is ``host:port`` where its peers (and, for an
    inference replica, the gateway) reach it: its node's address and the port reserved
    for it there (its ``PORT``); ``""`` when not known (an older record).
    """

    job: str
    task: str
    node: str
    pid: int
    start_time: float
    workdir: str
    workload: ServiceClass = ServiceClass.ONLINE
    gpus: tuple[int, ...] = ()
    isolation: IsolationKind = IsolationKind.RLIMIT
    cgroup: str = ""  # the task's group (its memory one under v1), for cgroup isolation
    container: str = ""  # the name of the task's container, for a role with an image
    logs: str = ""  # where its logs were written: its working directory in the tasks dir
    endpoint: str = ""  # host:port of its reserved port on its node's address

    def __post_init__(self) -> None:
        if (self.isolation in GROUPED) != bool(self.cgroup):
            raise InvalidInput(
                f"isolation {self.isolation} with cgroup {self.cgroup!r}",
                field="cgroup",
                fix="a group path exactly for cgroup2 or cgroup1 isolation",
            )

    @property
    def log_dir(self) -> str:
        """The directory the task's logs were written in; ``""`` when the record does not
        say (an older record of a task in a container)."""
        return self.logs or ("" if self.container else self.workdir)

    def to_dict(self) -> RecordDict:
        """A JSON-ready dict; ``from_dict`` reads it back equal."""
        return {
            "job": self.job,
            "task": self.task,
            "node": self.node,
            "pid": self.pid,
            "start_time": self.start_time,
            "workdir": self.workdir,
            "workload": self.workload.value,
            "gpus": list(self.gpus),
            "isolation": self.isolation.value,
            "cgroup": self.cgroup,
            "container": self.container,
            "logs": self.logs,
            "endpoint": self.endpoint,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, object]) -> ProcessRecord:
        """A record from ``to_dict``'s shape. Raises ``InvalidInput`` naming a bad field."""
        workload = data.get("workload", ServiceClass.ONLINE.value)
        if workload not in set(ServiceClass):
            raise InvalidInput(
                f"{workload!r} is not a workload class", field="workload", fix="online or offline"
            )
        isolation = data.get("isolation", IsolationKind.RLIMIT.value)
        if isolation not in set(IsolationKind):
            raise InvalidInput(
                f"{isolation!r} is not an isolation",
                field="isolation",
                fix="cgroup2, cgroup1 or rlimit",
            )
        cgroup = data.get("cgroup", "")
        if not isinstance(cgroup, str) or (cgroup and not cgroup.startswith("/")):
            raise InvalidInput(
                f"{cgroup!r} is not a group path", field="cgroup", fix="as records() gave it"
            )
        container = data.get("container", "")
        if not isinstance(container, str):
            raise InvalidInput(
                f"{container!r} is not a container name",
                field="container",
                fix="as records() gave it",
            )
        logs = data.get("logs", "")
        if not isinstance(logs, str):
            raise InvalidInput(
                f"{logs!r} is not a directory", field="logs", fix="as records() gave it"
            )
        endpoint = data.get("endpoint", "")
        if not isinstance(endpoint, str):
            raise InvalidInput(
                f"{endpoint!r} is not host:port", field="endpoint", fix="as records() gave it"
            )
        gpus = data.get("gpus", [])
        if not isinstance(gpus, list) or not all(_is_int(g) for g in gpus):
            raise InvalidInput(f"{gpus!r} is not a list of GPU ids", field="gpus", fix="[0, 1]")
        return cls(
            job=_text(data, "job"),
            task=_text(data, "task"),
            node=_text(data, "node"),
            pid=_pid(data),
            start_time=_positive(data, "start_time"),
            workdir=_text(data, "workdir"),
            workload=ServiceClass(str(workload)),
            gpus=tuple(int(g) for g in gpus),
            isolation=IsolationKind(str(isolation)),
            cgroup=cgroup,
            container=container,
            logs=logs,
            endpoint=endpoint,
        )


def write_record(path: Path, record: ProcessRecord) -> None:
    """Write ``record`` as JSON whole or not at all (a reader never sees half of it),
    mode 0600, making its missing directories 0700 (the server's alone: records live in
    its data dir).

    A failure is logged, not raised: the controller's own copy of the record covers it.
    """
    partial = path.with_suffix(".tmp")
    try:
        # ROOT/records/JOB/TASK/process.json: ROOT is the data dir, the server's own,
        # made here when no database made it first (an executor of its own, say).
        root = path.parents[3]
        root.mkdir(mode=0o700, parents=True, exist_ok=True)
        make_dirs(Place(root, "/".join(path.parent.parts[-3:])), owner=None)
        partial.unlink(missing_ok=True)
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
        with os.fdopen(os.open(partial, flags, 0o600), "w") as out:
            out.write(json.dumps(record.to_dict()))
        partial.replace(path)
    except OSError as error:
        log.warning("cannot write %s: %s", path, error)


def read_record(path: Path) -> ProcessRecord | None:
    """The record ``write_record`` left at ``path``; None when absent or unreadable."""
    try:
        return ProcessRecord.from_dict(json.loads(path.read_text()))
    except (OSError, ValueError, InvalidInput):
        return None


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _pid(data: Mapping[str, object]) -> int:
    value = data.get("pid")
    if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
        raise InvalidInput(
            f"{value!r} is not a process id", field="pid", fix="as records() gave it"
        )
    return value


def _text(data: Mapping[str, object], name: str) -> str:
    value = data.get(name)
    if not isinstance(value, str) or not value:
        raise InvalidInput(
            f"{value!r} is not a non-empty string", field=name, fix="as records() gave it"
        )
    return value


def _positive(data: Mapping[str, object], name: str) -> float:
    value = data.get(name)
    if not isinstance(value, int | float) or isinstance(value, bool) or value <= 0:
        raise InvalidInput(
            f"{value!r} is not a positive number", field=name, fix="as records() gave it"
        )
    return float(value)
