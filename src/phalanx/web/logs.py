"""What a job page's log box shows: the end of each task's log in a section of its own,
or why there is nothing to show yet. Pure functions of the API's answers.

Why one section per task rather than one box of every task's lines: a task's output
carries no time of its own (the executor keeps what the task wrote, byte for byte), so
an order between the lines of two tasks is not known, and one box of every task's tail,
task after task, scrolled to its end, showed the last task's lines only. A section per
task, each scrolled to its own end, shows the last lines of every task at once, which is
what a gang that failed on one worker needs.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Final

#: Between a task's name and its line, in the API's answer for every task.
SEPARATOR: Final = " | "
#: Job phases in which no task of the job runs (a retried job's earlier output stays).
WAITING: Final = frozenset({"Pending", "Queued"})


@dataclass(frozen=True, slots=True, kw_only=True)
class TaskTail:
    """The end of one task's log; ``text`` "" when it wrote nothing yet, ``phase`` "" when
    the page does not know it."""

    task: str
    phase: str
    text: str


def each_tail(total: int, most: int, least: int, tasks: int) -> int:
    """Bytes of each task's log to ask for when ``tasks`` tasks share about ``total``: at
    most ``most``, at least ``least``."""
    return max(least, min(most, total // max(tasks, 1)))


def split_tasks(text: str, tasks: Sequence[tuple[str, str]]) -> list[TaskTail]:
    """``text`` (lines ``TASK | line``, each ending in a newline, as the API answers for
    every task) as one tail per task: the ``tasks`` (name, phase) in their order, each
    with its lines or none, then any other task the lines name, in order of its first
    line. A line without the separator belongs to the task before it."""
    lines: dict[str, list[str]] = {}
    current = ""
    for line in text.splitlines(keepends=True):
        task, separator, rest = line.partition(SEPARATOR)
        if separator:
            current = task
        else:
            rest = line
        lines.setdefault(current, []).append(rest)
    phases = dict(tasks)
    names = [name for name, _ in tasks] + [name for name in lines if name not in phases]
    return [
        TaskTail(task=name, phase=phases.get(name, ""), text="".join(lines.get(name, ())))
        for name in names
    ]


def empty_state(*, waiting: bool, ended: bool, why: str, stream: str, task: str = "") -> str:
    """What a log box says when it has nothing to show: for a job that ``waiting`` (no task
    runs; ``why``: the scheduler's reason, "" for none) or has ``ended``; ``task``: the
    one task shown ("" for every task)."""
    if waiting:
        said = (
            f"Task {task} has not started; its log appears when it does."
            if task
            else "No task has started; the log appears when one does."
        )
        return f"{said} The job waits: {why}" if why else said
    if ended:
        return f"Task {task} wrote nothing to {stream}." if task else f"No task wrote to {stream}."
    if task:
        return f"Task {task} has written nothing to {stream} yet."
    return f"No task has written to {stream} yet."


def state_label(*, waiting: bool, ended: bool, shown: Iterable[TaskTail]) -> str:
    """The words beside the log box: the job has ended; it waits for a task to start
    (while nothing is shown); or the log is being followed."""
    if ended:
        return "the job has ended"
    if waiting and not any(tail.text for tail in shown):
        return "waiting for a task to start"
    return "following"
