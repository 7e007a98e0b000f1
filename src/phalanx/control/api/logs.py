"""Serving task logs from the executor's ``TaskLog`` readers, wherever the tasks ran.

Nothing here knows a path or a host: one task's log is read by offset through its
``TaskLog`` (``phalanx.executors.base``). Guarantees:

- ``tail`` is the last ``size`` bytes of one stream, as they were written;
- ``follow`` sends the last ``size`` bytes, then new output as it comes, and ends once
  ``live()`` said False before a read that found nothing new: everything written
  before the end is sent. It ends sooner, within ``FOLLOW_INTERVAL``, once
  ``stopping()`` is True (the server is shutting down): a stream never holds a
  shutdown up;
- ``prefixed_tail`` and ``prefixed_follow`` do the same for several tasks (``size``
  bytes of each), sending whole lines only, each as ``TASK | line``. Lines of different
  tasks interleave as they come but never mix: a line is sent once its newline is
  there, and a last line without one is ended with a newline when the task can write
  no more (at once, for a tail). A line longer than ``MAX_LINE`` bytes is sent in
  pieces of at most that size (cut between characters), each a line of its own. A
  tail that starts inside a line leaves that cut line out.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Final

from phalanx.control.controllers.views import ClusterView
from phalanx.executors.base import TaskLog

#: How often a followed log is checked for new output, in seconds.
FOLLOW_INTERVAL: Final = 0.2
#: Most bytes read from one log at a time.
READ_CHUNK: Final = 1 << 20
#: Longest line (in bytes, without its prefix) sent whole; longer ones are cut.
MAX_LINE: Final = 1 << 16
#: Between the task's name and its line.
SEPARATOR: Final = " | "


class JobLiveness:
    """Whether ``job``'s tasks may still write, as the controller's published view says
    (``view()`` gives the latest; every tick publishes a new one). Call it to ask.

    ``stored_live`` says the store called the job not ended when the request read it. A
    view published before that read may not know the job yet (a tick still running takes
    it in), so such a job counts as live until two newer views were published (the
    second by a tick that began after the read), and from then on as the view says.
    """

    __slots__ = ("_grace", "_job", "_seen", "_view")

    def __init__(self, view: Callable[[], ClusterView], job: str, *, stored_live: bool) -> None:
        self._view = view
        self._job = job
        self._seen = view()
        self._grace = 2 if stored_live else 0

    def __call__(self) -> bool:
        view = self._view()
        if view is not self._seen:
            self._seen = view
            self._grace = max(0, self._grace - 1)
        return self._job in view.live_jobs or self._grace > 0


def tail(log: TaskLog, size: int) -> bytes:
    """The last ``size`` bytes of ``log`` (``b""`` when it is empty)."""
    end = log.size()
    return b"".join(_chunks(log, max(0, end - size), end))


def follow(
    log: TaskLog,
    size: int,
    live: Callable[[], bool],
    *,
    sleep: Callable[[float], None] = time.sleep,
    stopping: Callable[[], bool] = lambda: False,
) -> Iterator[bytes]:
    """The last ``size`` bytes, then new output as it comes, until ``live()`` is False
    and everything written has been sent, or ``stopping()`` is True."""
    offset = max(0, log.size() - size)
    while not stopping():
        alive = live()
        chunk = log.read(offset, READ_CHUNK)
        if chunk:
            offset += len(chunk)
            yield chunk
        elif not alive:
            return
        else:
            sleep(FOLLOW_INTERVAL)


def prefixed_tail(logs: Sequence[tuple[str, TaskLog]], size: int) -> Iterator[bytes]:
    """Each task's last ``size`` bytes as ``TASK | line`` lines, task after task."""
    for task, log in logs:
        end = log.size()
        start = max(0, end - size)
        lines = _Lines(task, cut=_starts_inside_a_line(log, start))
        for chunk in _chunks(log, start, end):
            if out := lines.feed(chunk):
                yield out
        if out := lines.flush():
            yield out


def prefixed_follow(
    logs: Sequence[tuple[str, TaskLog]],
    size: int,
    live: Callable[[], bool],
    *,
    sleep: Callable[[float], None] = time.sleep,
    stopping: Callable[[], bool] = lambda: False,
) -> Iterator[bytes]:
    """Every task's last ``size`` bytes, then new lines as they come, as ``TASK | line``,
    until ``live()`` is False and everything written has been sent, or ``stopping()`` is
    True (then the unfinished lines are not sent)."""
    readers = []
    for task, log in logs:
        start = max(0, log.size() - size)
        lines = _Lines(task, cut=_starts_inside_a_line(log, start))
        readers.append(_Reader(log=log, lines=lines, offset=start))
    while not stopping():
        alive = live()
        progress = False
        for reader in readers:
            chunk = reader.log.read(reader.offset, READ_CHUNK)
            if not chunk:
                continue
            progress = True
            reader.offset += len(chunk)
            if out := reader.lines.feed(chunk):
                yield out
        if progress:
            continue
        if not alive:
            if rest := b"".join(reader.lines.flush() for reader in readers):
                yield rest
            return
        sleep(FOLLOW_INTERVAL)


@dataclass(slots=True, kw_only=True)
class _Reader:
    log: TaskLog
    lines: _Lines
    offset: int


class _Lines:
    """One task's output cut into whole prefixed lines; keeps the unfinished last line."""

    __slots__ = ("_cut", "_partial", "_prefix")

    def __init__(self, task: str, *, cut: bool) -> None:
        self._prefix = f"{task}{SEPARATOR}".encode()
        self._partial = b""
        self._cut = cut  # the first bytes fed end a line that began before them

    def feed(self, data: bytes) -> bytes:
        """The lines ``data`` completes, prefixed; the unfinished rest is kept."""
        if self._cut:  # the cut line is left out once it ends, however many chunks later
            newline = data.find(b"\n")
            if newline < 0:  # kept (its end at most) only for a ``flush`` with nothing else
                self._partial = (self._partial + data)[-MAX_LINE:]
                return b""
            self._cut, self._partial = False, b""
            data = data[newline + 1 :]
        *lines, partial = (self._partial + data).split(b"\n")
        out: list[bytes] = []
        for line in lines:
            rest = line
            while len(rest) > MAX_LINE:
                rest = self._send_piece(rest, out)
            out.append(self._prefix + rest + b"\n")
        while len(partial) > MAX_LINE:  # cut where the whole line would be: from its start
            partial = self._send_piece(partial, out)
        self._partial = partial
        return b"".join(out)

    def _send_piece(self, line: bytes, out: list[bytes]) -> bytes:
        """Send the first piece of an overlong ``line``; the rest of it."""
        cut = _character_boundary(line, MAX_LINE)
        out.append(self._prefix + line[:cut] + b"\n")
        return line[cut:]

    def flush(self) -> bytes:
        """The unfinished last line, ended with a newline (``b""`` when there is none)."""
        rest, self._partial = self._partial, b""
        return self._prefix + rest + b"\n" if rest else b""


def _chunks(log: TaskLog, start: int, end: int) -> Iterator[bytes]:
    """``log``'s bytes from ``start`` to ``end``, at most ``READ_CHUNK`` at a time."""
    offset = start
    while offset < end:
        chunk = log.read(offset, min(READ_CHUNK, end - offset))
        if not chunk:
            return
        offset += len(chunk)
        yield chunk


def _starts_inside_a_line(log: TaskLog, start: int) -> bool:
    return start > 0 and log.read(start - 1, 1) != b"\n"


def _character_boundary(data: bytes, limit: int) -> int:
    """The largest cut at most ``limit`` that does not split a UTF-8 character (``limit``
    itself when the bytes there are not UTF-8 continuation bytes)."""
    cut = limit
    while cut > limit - 3 and data[cut] & 0xC0 == 0x80:
        cut -= 1
    return cut
