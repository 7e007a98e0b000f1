"""The server's side of the launcher: ``Launcher`` starts it and talks to it.

Not thread-safe: one thread (the executor's caller) uses a ``Launcher``. Nothing here
waits except ``start``, which waits for the launcher's replies to its requests. What the
launcher says is read off the socket at once by a thread of each launcher's own
(``_Inbox``), so the launcher never waits on a full socket, and neither side can stall
the other however many tasks end at once.
"""

from __future__ import annotations

import contextlib
import logging
import queue
import socket
import subprocess
import sys
import threading
import time
import weakref
from collections.abc import Callable, Sequence
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Final

from phalanx.domain.errors import RemoteError
from phalanx.executors.launcher.agent import TASKS_DIE_WITH_IT
from phalanx.executors.launcher.messages import Exited, Failed, Signal, Start, Started
from phalanx.executors.process import Exit, GroupSignals

log = logging.getLogger(__name__)

#: Requests sent ahead of their replies: enough that the launcher never waits for the
#: next one, few enough that a failed batch leaves few unanswered.
WINDOW: Final = 64
#: How long ``close`` waits for the launcher to exit.
CLOSE_TIMEOUT: Final = 5.0


class LauncherGone(RemoteError):
    """The launcher process ended (or could not be started) under a live server."""


class Launcher:
    """One launcher process for one executor, started on first use (``start``).

    ``exits`` holds the ends the launcher reported, by wrapper pid and start time, until
    the task's handle takes them; ``on_exit`` is called (from the inbox's thread) as each
    end arrives, so that the caller can come and collect it. ``alive`` is False once the
    launcher is found gone; a later ``start`` starts a new one. ``clock`` stamps each
    reply as it arrives (``start``). With ``tasks_die_with_it`` the launcher kills its
    tasks when this side lets it go or dies (as a Ray node's tasks die with its Ray);
    otherwise they run on, for a restarted server to re-adopt.
    """

    def __init__(
        self,
        *,
        tasks_root: Path,
        records_root: Path,
        on_exit: Callable[[], object] | None = None,
        clock: Callable[[], float] = time.time,
        tasks_die_with_it: bool = False,
    ) -> None:
        self._roots = (tasks_root, records_root)
        self._options = (TASKS_DIE_WITH_IT,) if tasks_die_with_it else ()
        self._on_exit = on_exit
        self._clock = clock
        self._connection: Connection | None = None
        self._inbox: _Inbox | None = None
        self._release: Callable[[], object] = lambda: None
        self._generation = 0
        self.exits: dict[tuple[int, float], int | None] = {}

    @property
    def generation(self) -> int:
        """Which launcher this is: 1 for the first one started, one more for each later."""
        return self._generation

    @property
    def alive(self) -> bool:
        """True while the current launcher answers (False before the first start)."""
        return self._connection is not None

    def start(self, requests: Sequence[Start]) -> list[tuple[Started | Failed, float] | None]:
        """Send ``requests`` and wait for their replies, in order, each with the ``clock``
        time it arrived at (a task's start, to the precision of that clock). A None
        reply means the launcher ended after the request was sent and before it
        answered: the task may or may not have started (its record, written before
        ``Started``, tells). A launcher found gone before anything was sent is replaced
        first. Raises ``LauncherGone`` when no launcher can be started."""
        self.collect()  # notice a launcher that died since: nothing is sent to it
        for _ in range(2):
            sent, replies = self._exchange(requests)
            if sent or self.alive:
                break
        return [replies.get(request.id) for request in requests]

    def _exchange(
        self, requests: Sequence[Start]
    ) -> tuple[int, dict[int, tuple[Started | Failed, float]]]:
        """How many requests reached a launcher, and the replies it gave, stamped."""
        connection, inbox = self._connected()
        replies: dict[int, tuple[Started | Failed, float]] = {}
        sent = 0
        try:
            while len(replies) < len(requests):
                while sent < len(requests) and sent - len(replies) < WINDOW:
                    connection.send(requests[sent])
                    sent += 1
                message = inbox.messages.get()
                if message is None:
                    raise EOFError
                if isinstance(message, Exited):
                    self.exits[message.pid, message.start_time] = message.code
                else:
                    replies[message.id] = (message, self._clock())
        except (EOFError, OSError):
            self._lost()
        return sent, replies

    def signal(self, pid: int, start_time: float, signum: int) -> bool:
        """Ask the launcher to signal the group of the task ``pid`` (if not reaped yet).
        False when the task is known to have ended or the launcher is gone."""
        if (pid, start_time) in self.exits or self._connection is None:
            return False
        try:
            self._connection.send(Signal(pid=pid, signum=signum))
        except OSError:
            self._lost()
            return False
        return True

    def collect(self) -> None:
        """Take in every end the launcher reported so far (into ``exits``); never waits."""
        if self._inbox is None:
            return
        while True:
            try:
                message = self._inbox.messages.get_nowait()
            except queue.Empty:
                return
            if message is None:
                self._lost()
                return
            if isinstance(message, Exited):
                self.exits[message.pid, message.start_time] = message.code

    def close(self) -> None:
        """Let the launcher go (it exits; the tasks run on) and wait for it to exit."""
        self._release()
        self._connection = self._inbox = None

    def _connected(self) -> tuple[Connection, _Inbox]:
        if self._connection is not None and self._inbox is not None:
            return self._connection, self._inbox
        self.close()  # reap a launcher that died
        ours, theirs = socket.socketpair()
        module = "phalanx.executors.launcher"
        argv = [sys.executable, "-m", module, str(theirs.fileno()), *map(str, self._roots)]
        argv += self._options
        try:
            process = subprocess.Popen(
                argv,
                pass_fds=(theirs.fileno(),),
                stdin=subprocess.DEVNULL,
                start_new_session=True,
            )
        except OSError as error:
            ours.close()
            raise LauncherGone(f"cannot start the launcher: {error}") from error
        finally:
            theirs.close()
        connection = Connection(ours.detach())
        inbox = _Inbox(connection, self._on_exit)
        # Also when the executor is dropped unclosed: the launcher must not outlive it.
        self._release = weakref.finalize(self, _let_go, process, connection, inbox)
        self._connection, self._inbox = connection, inbox
        self._generation += 1
        return connection, inbox

    def _lost(self) -> None:
        if self._connection is not None:
            log.error("the task launcher ended; its tasks are re-adopted")
            self.close()


class _Inbox:
    """Everything one launcher says, in order, read by a daemon thread as it arrives;
    None last, once the launcher's end is closed."""

    def __init__(self, connection: Connection, on_exit: Callable[[], object] | None) -> None:
        self.messages: queue.SimpleQueue[Started | Failed | Exited | None] = queue.SimpleQueue()
        self.thread = threading.Thread(
            target=self._read, args=(connection, on_exit), name="launcher-inbox", daemon=True
        )
        self.thread.start()

    def _read(self, connection: Connection, on_exit: Callable[[], object] | None) -> None:
        try:
            while True:
                message = connection.recv()
                self.messages.put(message)
                if on_exit is not None and isinstance(message, Exited):
                    on_exit()
        except (EOFError, OSError):
            self.messages.put(None)
            if on_exit is not None:
                on_exit()  # its tasks are to be re-adopted


def _let_go(process: subprocess.Popen[bytes], connection: Connection, inbox: _Inbox) -> None:
    """Shut the launcher's socket down (the launcher exits on that, and the inbox's
    thread stops reading), close it, and reap the launcher."""
    with contextlib.suppress(OSError):  # closed already
        shut = socket.socket(fileno=connection.fileno())
        try:
            shut.shutdown(socket.SHUT_RDWR)
        finally:
            shut.detach()
    inbox.thread.join(CLOSE_TIMEOUT)
    with contextlib.suppress(OSError):
        connection.close()
    try:
        process.wait(CLOSE_TIMEOUT)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


class LaunchedTask(GroupSignals):
    """The server's handle on a task the launcher started: the same calls as a
    ``process.TaskProcess`` (signals go through the launcher, the end comes from it)."""

    __slots__ = ("_launcher", "generation", "pid", "start_time", "workdir")

    def __init__(self, launcher: Launcher, *, pid: int, start_time: float, workdir: Path) -> None:
        self._launcher = launcher
        self.generation = launcher.generation
        self.pid = pid
        self.start_time = start_time
        self.workdir = workdir

    @property
    def orphaned(self) -> bool:
        """True when the launcher that started it is gone: only re-adoption can watch it."""
        return not self._launcher.alive or self._launcher.generation != self.generation

    def send(self, signum: int) -> bool:
        """Send ``signum`` to the task's group; False when it is known to be gone."""
        return not self.orphaned and self._launcher.signal(self.pid, self.start_time, signum)

    def poll(self) -> Exit | None:
        """The task's end once the launcher reported it (``Launcher.collect``), else None."""
        key = (self.pid, self.start_time)
        if key not in self._launcher.exits or self.orphaned:
            return None
        return Exit(self._launcher.exits.pop(key))
