"""A container runtime's client, and what it is asked besides running a task: whether
an image is on the node, kill, pause, remove, and which containers a task has."""

from __future__ import annotations

import contextlib
import json
import re
import signal
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Final

from phalanx.domain.errors import InvalidInput

JOB_LABEL: Final = "phalanx.io/job"
TASK_LABEL: Final = "phalanx.io/task"
#: The label tying a container to one server: its data dir's scope (``taskgroups.scope_of``).
SCOPE_LABEL: Final = "phalanx.io/data-dir"

#: How long a call of the runtime's client (kill, inspect, ...) may take.
CLIENT_TIMEOUT: Final = 30.0


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

    def kill(self, name: str, signum: int = signal.SIGKILL) -> bool:
        """Send ``signum`` (SIGKILL unless given) to the container ``name``'s main process;
        True when the runtime did."""
        done = self._call([self.client, "kill", "--signal", str(int(signum)), name])
        return done is not None and done.returncode == 0

    def pause(self, name: str) -> bool:
        """Freeze the container ``name``; True when the runtime did."""
        done = self._call([self.client, "pause", name])
        return done is not None and done.returncode == 0

    def unpause(self, name: str) -> bool:
        """Let a frozen container run again; True when the runtime did."""
        done = self._call([self.client, "unpause", name])
        return done is not None and done.returncode == 0

    def never_started(self, name: str) -> str | None:
        """Why the container ``name`` was made and never started, in the runtime's words
        (its record's error), or None when it started, or is not there."""
        done = self._call(
            [self.client, "inspect", "--format", "{{.State.Status}}\t{{.State.Error}}", name]
        )
        if done is None or done.returncode != 0:
            return None
        state, _, error = done.stdout.strip().partition("\t")
        if state.lower() != "created":
            return None
        return error.strip()[:2000] or "it was made and never started"

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


class PresentImages:
    """The runtime's answer to "is this image on the node?", a found image trusted for
    ``ttl`` seconds (of the ``now`` the caller passes), so that the replicas of a job
    started together cost one question. A missing image is asked about every time. An
    image removed within ``ttl`` of a check fails its task at the run instead (code 125,
    the runtime's words in ``stderr.log``)."""

    __slots__ = ("_found", "runtime", "ttl")

    def __init__(self, runtime: ContainerRuntime, *, ttl: float = 10.0) -> None:
        self.runtime = runtime
        self.ttl = ttl
        self._found: dict[str, float] = {}  # image -> when it was last found

    def problem(self, image: str, now: float) -> str | None:
        """``ContainerRuntime.image_problem``, remembered for ``ttl`` when there is none."""
        found = self._found.get(image)
        if found is not None and 0 <= now - found < self.ttl:
            return None
        problem = self.runtime.image_problem(image)
        if problem is None:
            self._found[image] = now
        else:
            self._found.pop(image, None)
        return problem


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
