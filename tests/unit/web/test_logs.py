"""A job page's log box: every task's lines split into a tail per task in the job's
order, each task's share of the page, and what an empty box says."""

from __future__ import annotations

from phalanx.web.logs import TaskTail, each_tail, empty_state, split_tasks, state_label


def test_lines_of_every_task_become_one_tail_per_task_in_the_jobs_order() -> None:
    text = "j-w-1 | late a\nj-w-1 | b | with the separator\nj-w-9 | beyond the list\n"
    tails = split_tasks(text, [("j-w-0", "Running"), ("j-w-1", "Running")])
    assert tails == [
        TaskTail(task="j-w-0", phase="Running", text=""),  # listed, nothing written yet
        TaskTail(task="j-w-1", phase="Running", text="late a\nb | with the separator\n"),
        TaskTail(task="j-w-9", phase="", text="beyond the list\n"),  # not in the job's list
    ]
    assert split_tasks("", [("j-w-0", "Pending")]) == [
        TaskTail(task="j-w-0", phase="Pending", text="")
    ]


def test_each_task_gets_a_share_of_the_page_within_bounds() -> None:
    assert each_tail(256, 16, 2, 1) == 16
    assert each_tail(256, 16, 2, 32) == 8
    assert each_tail(256, 16, 2, 1000) == 2
    assert each_tail(256, 16, 2, 0) == 16


def test_an_empty_box_says_why() -> None:
    waiting = empty_state(waiting=True, ended=False, why="queue q at capability", stream="stdout")
    assert waiting == (
        "No task has started; the log appears when one does. The job waits: queue q at capability"
    )
    assert empty_state(waiting=True, ended=False, why="", stream="stdout", task="t-0") == (
        "Task t-0 has not started; its log appears when it does."
    )
    assert empty_state(waiting=False, ended=True, why="", stream="stderr") == (
        "No task wrote to stderr."
    )
    assert empty_state(waiting=False, ended=False, why="", stream="stdout", task="t-0") == (
        "Task t-0 has written nothing to stdout yet."
    )
    written = [TaskTail(task="t-0", phase="Pending", text="before the retry\n")]
    assert state_label(waiting=True, ended=False, shown=[]) == "waiting for a task to start"
    assert state_label(waiting=True, ended=False, shown=written) == "following"
    assert state_label(waiting=False, ended=True, shown=written) == "the job has ended"
