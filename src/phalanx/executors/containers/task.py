"""A running task in a container, as the local executor watches and signals it."""

from __future__ import annotations

import signal
from pathlib import Path
from typing import Final, Protocol

from phalanx.executors.containers.runtime import ContainerRuntime
from phalanx.executors.process import Exit, GroupSignals

#: ``TaskEvent.reason`` of a container task that ended with 125: podman and docker say
#: so when they themselves failed (a device, a mount, a limit they could not set up).
RUNTIME_FAILED: Final = "the container runtime could not run it: see the task's stderr.log"


#: The client's codes for a container it could not run (its own failure, a command it
#: could not invoke or find): a container that was made then may never have started.
RUNTIME_CODES: Final = frozenset({125, 126, 127})


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
    or died of a signal), may have left its container behind: it is removed then. One
    whose container was made and never started (the OCI runtime refused it) has
    ``start_failure``, the runtime's words: its task could not start, whatever its code.
    """

    __slots__ = ("_killed", "inner", "name", "runtime", "start_failure")

    def __init__(self, inner: _Process, runtime: ContainerRuntime, name: str) -> None:
        self.inner = inner
        self.runtime = runtime
        self.name = name
        self._killed = False
        self.start_failure: str | None = None

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

    def terminate(self) -> bool:
        """SIGTERM the container through the runtime, as a kubelet stops one; the client's
        group only when the runtime could not (its signal proxy may not be set up yet, and
        drops what comes before: podman PR 17489)."""
        return self.runtime.kill(self.name, signal.SIGTERM) or self.inner.send(signal.SIGTERM)

    def kill(self) -> bool:
        """SIGKILL the container through the runtime, then the client's group."""
        self._killed = True
        killed = self.runtime.kill(self.name)
        return self.inner.kill() or killed

    def pause(self) -> bool:
        return self.runtime.pause(self.name)

    def resume(self) -> bool:
        return self.runtime.unpause(self.name)

    def reason(self, code: int | None) -> str | None:
        """Why a container that ended with ``code`` failed, when the runtime said so."""
        return RUNTIME_FAILED if code == 125 else None

    def poll(self) -> Exit | None:
        ended = self.inner.poll()
        if ended is not None and (self._killed or ended.code is None or ended.code >= 125):
            if not self._killed and ended.code in RUNTIME_CODES:
                self.start_failure = self.runtime.never_started(self.name)
            self.runtime.remove(self.name)
        return ended
