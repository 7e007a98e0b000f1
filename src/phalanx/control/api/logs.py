"""Serving task logs from the executor's ``TaskLog`` readers, wherever the tasks ran.

Nothing here knows a path or a host: one task's log is read by offset through its
``TaskLog`` (``phalanx.executors.base``). Guarantees:

- a ``Window`` says where in a log the output already written starts to be sent: its
  last ``size`` bytes, of those only the last ``lines`` lines when given (from a
  line's start; a last line without its newline counts as a line);
- ``tail`` is one stream's window, as it was written;
- ``follow`` sends the window, then new output as it comes, and ends once
  ``live()`` said False before a read that found nothing new: everything written
  before the end is sent. It ends sooner, within ``FOLLOW_INTERVAL``, once
  ``stopping()`` is True (the server is shutting down): a stream never holds a
  shutdown up;
- ``prefixed_tail`` and ``prefixed_follow`` do the same for several tasks (the window
  of each; none of what the ``older`` ones wrote so far, only what they write from
  now on), sending whole lines only, each as ``TASK | line``. Lines of different
  tasks interleave as they come but never mix: a line is sent once its newline is
  there, and a last line without one is ended with a newline when the task can write
  no more (at once, for a tail). A line longer than ``MAX_LINE`` bytes is sent in
  pieces of at most that size (cut between characters), each a line of its own. A
  tail that starts inside a line leaves that cut line out.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Collection, Iterator, Sequence
from dataclasses import dataclass
from typing import Final

from phalanx.control.controllers.views import ClusterView
from phalanx.executors.base import LogAbsence, TaskLog

#: How often a followed log is checked for new output, in seconds.
FOLLOW_INTERVAL: Final = 0.2
#: Most bytes read from one log at a time.
READ_CHUNK: Final = 1 << 20
#: Longest line (in bytes, without its prefix) sent whole; longer ones are cut.
MAX_LINE: Final = 1 << 16
#: Between the task's name and its line.
SEPARATOR: Final = " | "


def absences(
    logs: Sequence[tuple[str, TaskLog]], started: Collection[str]
) -> dict[str, LogAbsence]:
    """Why each ``started`` task's log cannot be read, for those whose cannot, in
    ``logs``' order (a task that started has a log, empty or not; one that has not may
    have none). Asks only of logs that read as empty."""
    found: dict[str, LogAbsence] = {}
    for task, log in logs:
        if task in started and log.size() == 0 and (why := log.absent()) is not None:
            found[task] = why
    return found


def before(starts: Sequence[tuple[str, float | None]], since: float) -> list[str]:
    """The tasks of ``starts`` (name, start of its current run) that did not start at or
    after ``since``: what they wrote so far is older, or cannot be told apart from older."""
    return [task for task, started in starts if started is None or started < since]


def since_note(tasks: Sequence[str], seconds: float) -> str:
    """The note for a ``since`` that leaves out what ``tasks`` wrote so far."""
    named = ", ".join(tasks[:5]) + (f" and {len(tasks) - 5} more" if len(tasks) > 5 else "")
    return (
        f"since={seconds:g}s leaves out the output so far of {len(tasks)} task(s) whose "
        f"current run started earlier or has not started: {named} (a log's lines carry no "
        "time stamps, so since counts from each task's start; a follow sends what they "
        "write from now on)"
    )


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


@dataclass(frozen=True, slots=True, kw_only=True)
class Window:
    """Which of a log's output already written is sent: at most its last ``size`` bytes,
    and of those only the last ``lines`` lines (None: all of them)."""

    size: int
    lines: int | None = None

    def start(self, log: TaskLog, end: int) -> int:
        """Where sending starts in ``log`` when it is ``end`` bytes long: the start of the
        ``lines``-th line from its end, or ``size`` bytes before its end when that is later
        (or when there are fewer lines)."""
        lowest = max(0, end - self.size)
        if self.lines is None:
            return lowest
        if self.lines == 0:
            return end
        # A last newline ends the last line; it does not begin another.
        position = end - 1 if end > lowest and log.read(end - 1, 1) == b"\n" else end
        wanted = self.lines
        while position > lowest:
            begin = max(lowest, position - READ_CHUNK)
            data = log.read(begin, position - begin)
            cut = len(data)
            while (newline := data.rfind(b"\n", 0, cut)) >= 0:
                wanted -= 1
                if wanted == 0:
                    return begin + newline + 1
                cut = newline
            position = begin
        return lowest


def _window(size: Window | int) -> Window:
    return size if isinstance(size, Window) else Window(size=size)


def tail(log: TaskLog, size: Window | int) -> bytes:
    """``log``'s window (``size``: a ``Window``, or its bytes), as written."""
    end = log.size()
    return b"".join(_chunks(log, _window(size).start(log, end), end))


def follow(
    log: TaskLog,
    size: Window | int,
    live: Callable[[], bool],
    *,
    sleep: Callable[[float], None] = time.sleep,
    stopping: Callable[[], bool] = lambda: False,
) -> Iterator[bytes]:
    """The window (``size``: a ``Window``, or its bytes), then new output as it comes,
    until ``live()`` is False and everything written has been sent, or ``stopping()``
    is True."""
    end = log.size()
    offset = _window(size).start(log, end)
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


def prefixed_tail(
    logs: Sequence[tuple[str, TaskLog]], size: Window | int, *, older: Collection[str] = ()
) -> Iterator[bytes]:
    """Each task's window (``size``: a ``Window``, or its bytes) as ``TASK | line`` lines,
    task after task; nothing of the ``older`` tasks."""
    window = _window(size)
    for task, log in logs:
        if task in older:
            continue
        end = log.size()
        start = window.start(log, end)
        lines = _Lines(task, cut=_starts_inside_a_line(log, start))
        for chunk in _chunks(log, start, end):
            if out := lines.feed(chunk):
                yield out
        if out := lines.flush():
            yield out


def prefixed_follow(
    logs: Sequence[tuple[str, TaskLog]],
    size: Window | int,
    live: Callable[[], bool],
    *,
    sleep: Callable[[float], None] = time.sleep,
    stopping: Callable[[], bool] = lambda: False,
    older: Collection[str] = (),
) -> Iterator[bytes]:
    """Every task's window (``size``: a ``Window``, or its bytes; for the ``older`` tasks
    nothing written so far), then new lines as they come, as ``TASK | line``, until
    ``live()`` is False and everything written has been sent, or ``stopping()`` is True
    (then the unfinished lines are not sent)."""
    window = _window(size)
    readers = []
    for task, log in logs:
        end = log.size()
        start = end if task in older else window.start(log, end)
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
