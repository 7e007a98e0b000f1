"""Serving logs from TaskLog readers: tails, follows, and every task's whole lines prefixed.

The logs are in memory and "time" is a script: each time a follow would sleep, the next
step of the script writes output or ends the job.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest

from phalanx.control.api.logs import (
    MAX_LINE,
    READ_CHUNK,
    JobLiveness,
    Window,
    absences,
    before,
    follow,
    prefixed_follow,
    prefixed_tail,
    since_note,
    tail,
)
from phalanx.control.controllers.views import ClusterView
from phalanx.executors.base import LogAbsence, TaskLog


class MemoryLog:
    """A TaskLog held in memory; ``reads`` counts read calls."""

    def __init__(self, data: bytes = b"", *, missing: LogAbsence | None = None) -> None:
        self.data = bytearray(data)
        self.reads = 0
        self.missing = missing

    def write(self, data: bytes) -> None:
        self.data += data

    def size(self) -> int:
        return len(self.data)

    def read(self, offset: int, limit: int) -> bytes:
        self.reads += 1
        return bytes(self.data[offset : offset + limit])

    def absent(self) -> LogAbsence | None:
        return self.missing


class Script:
    """``live`` and ``sleep`` for a follow: each sleep runs the next step; after the last
    step the job has ended."""

    def __init__(self, *steps: Callable[[], None]) -> None:
        self.steps = list(steps)
        self.alive = True
        self.sleeps = 0

    def live(self) -> bool:
        return self.alive

    def sleep(self, _: float) -> None:
        self.sleeps += 1
        if self.steps:
            self.steps.pop(0)()
        if not self.steps:
            self.alive = False


def text(chunks: Iterator[bytes]) -> str:
    return b"".join(chunks).decode()


def test_a_tail_is_the_last_bytes_as_written() -> None:
    log = MemoryLog(b"one\ntwo\nthree")
    assert tail(log, 9) == b"two\nthree"
    assert tail(log, 1000) == b"one\ntwo\nthree"
    assert tail(log, 0) == b"" and tail(MemoryLog(), 10) == b""


def test_follow_sends_new_output_until_the_job_ended_and_all_was_sent() -> None:
    log = MemoryLog(b"old\nnew ")
    script = Script(lambda: log.write(b"half"), lambda: None, lambda: log.write(b" line\n"))
    assert text(follow(log, 4, script.live, sleep=script.sleep)) == "new half line\n"
    assert script.sleeps == 3  # it waited for output between the writes


def test_follow_of_an_ended_job_sends_what_is_there_and_stops() -> None:
    log = MemoryLog(b"done\n")
    script = Script()
    script.alive = False
    assert text(follow(log, 100, script.live, sleep=script.sleep)) == "done\n"
    assert script.sleeps == 0


def test_output_written_just_before_the_end_is_still_sent() -> None:
    log = MemoryLog()

    def end_right_after_writing() -> None:
        log.write(b"last words\n")
        script.alive = False

    script = Script(end_right_after_writing)
    assert text(follow(log, 100, script.live, sleep=script.sleep)) == "last words\n"


def test_a_server_that_stops_ends_its_follows_while_the_job_still_runs() -> None:
    log = MemoryLog(b"so far\n")
    stopping = [False]

    def stop() -> None:
        log.write(b"more\n")
        stopping[0] = True

    script = Script(stop, lambda: log.write(b"never sent\n"))
    assert text(
        follow(log, 100, script.live, sleep=script.sleep, stopping=lambda: stopping[0])
    ) == ("so far\n")
    assert script.alive and script.sleeps == 1  # ended at the first check after the stop
    stopping[0] = False
    script = Script(stop, lambda: log.write(b"never sent\n"))
    lines = prefixed_follow(
        [("t", log)], 100, script.live, sleep=script.sleep, stopping=lambda: stopping[0]
    )
    assert text(lines) == "t | so far\nt | more\n" and script.alive


def test_every_tasks_tail_comes_as_prefixed_whole_lines_task_after_task() -> None:
    logs: list[tuple[str, TaskLog]] = [
        ("j-worker-0", MemoryLog(b"a\nb\n")),
        ("j-worker-1", MemoryLog(b"c\nno newline at the end")),
        ("j-worker-2", MemoryLog()),
    ]
    assert text(prefixed_tail(logs, 1000)) == (
        "j-worker-0 | a\nj-worker-0 | b\nj-worker-1 | c\nj-worker-1 | no newline at the end\n"
    )


def test_a_tail_that_starts_inside_a_line_leaves_the_cut_line_out() -> None:
    log = MemoryLog(b"first line\nsecond\nthird\n")
    assert text(prefixed_tail([("t", log)], 10)) == "t | third\n"  # 10 bytes: "ond\nthird\n"
    assert text(prefixed_tail([("t", log)], 13)) == "t | second\nt | third\n"  # starts on a line
    one_line = MemoryLog(b"x" * 30)
    assert text(prefixed_tail([("t", one_line)], 5)) == "t | xxxxx\n"  # nothing whole to keep


def test_followed_lines_of_tasks_interleave_but_never_mix() -> None:
    zero, one = MemoryLog(b"0: start\n0: half"), MemoryLog(b"1: start\n")
    sent: list[str] = []

    def check_nothing_half_was_sent() -> None:
        # "0: half" waits for its newline
        assert "".join(sent) == "a | 0: start\nb | 1: start\n"
        one.write(b"1: some")

    def finish_both_lines() -> None:
        zero.write(b" done\n0: bye\n")
        one.write(b"thing\n")

    script = Script(check_nothing_half_was_sent, finish_both_lines)
    logs: list[tuple[str, TaskLog]] = [("a", zero), ("b", one)]
    for chunk in prefixed_follow(logs, 1000, script.live, sleep=script.sleep):
        sent.append(chunk.decode())
    assert "".join(sent).splitlines() == [
        "a | 0: start",
        "b | 1: start",
        "a | 0: half done",
        "a | 0: bye",
        "b | 1: something",
    ]


def test_a_last_line_without_newline_is_ended_once_the_job_ended() -> None:
    log = MemoryLog(b"progress 10%")
    script = Script(lambda: log.write(b" 50%"))
    lines = text(prefixed_follow([("t", log)], 1000, script.live, sleep=script.sleep))
    assert lines == "t | progress 10% 50%\n"


def test_a_followed_tail_starting_inside_a_line_leaves_the_cut_line_out() -> None:
    log = MemoryLog(b"a long first line\nlast\n")
    script = Script()
    script.alive = False
    assert text(prefixed_follow([("t", log)], 8, script.live, sleep=script.sleep)) == "t | last\n"


def test_a_cut_line_still_unfinished_when_followed_is_left_out_to_its_end() -> None:
    log = MemoryLog(b"a long first")  # the tail starts inside this line
    script = Script(lambda: log.write(b" line, still going"), lambda: log.write(b" done\nnext\n"))
    lines = text(prefixed_follow([("t", log)], 5, script.live, sleep=script.sleep))
    assert lines == "t | next\n"


@pytest.mark.parametrize("follows", [False, True])
def test_an_overlong_line_is_cut_between_characters(follows: bool) -> None:
    # "é" is two bytes; placed so that a cut at exactly MAX_LINE bytes would split it.
    line = b"x" * (MAX_LINE - 1) + "é".encode() + b"tail"
    log = MemoryLog(line + b"\n")
    script = Script()
    script.alive = False
    chunks = (
        prefixed_follow([("t", log)], 2 * MAX_LINE, script.live, sleep=script.sleep)
        if follows
        else prefixed_tail([("t", log)], 2 * MAX_LINE)
    )
    pieces = text(chunks).splitlines()
    assert pieces == ["t | " + "x" * (MAX_LINE - 1), "t | étail"]


def test_many_tasks_are_each_read_once_a_round() -> None:
    logs = [MemoryLog(b"line\n") for _ in range(5)]
    script = Script()
    script.alive = False
    named: list[tuple[str, TaskLog]] = [(f"t{i}", log) for i, log in enumerate(logs)]
    out = text(prefixed_follow(named, 100, script.live, sleep=script.sleep))
    assert out.splitlines() == [f"t{i} | line" for i in range(5)]
    # the first round reads everything, the second finds nothing new and ends
    assert all(log.reads == 2 for log in logs)


class Views:
    """The controller's published view, replaced by ``publish`` as a tick would."""

    def __init__(self, *live: str) -> None:
        self.current = ClusterView(live_jobs=frozenset(live))

    def publish(self, *live: str) -> None:
        self.current = ClusterView(live_jobs=frozenset(live))

    def __call__(self) -> ClusterView:
        return self.current


def test_a_job_is_live_while_the_published_view_holds_it() -> None:
    views = Views("j")
    live = JobLiveness(views, "j", stored_live=True)
    assert live()
    views.publish("j")
    views.publish("j")
    assert live()
    views.publish("other")  # the tick that saw its last task end
    assert not live()


def test_a_job_the_view_does_not_know_yet_is_live_until_a_later_tick_could_have_taken_it_in() -> (
    None
):
    views = Views()  # published by a tick that began before the job was stored
    live = JobLiveness(views, "j", stored_live=True)
    assert live() and live()  # the same view, asked again: still waiting for a newer one
    views.publish()  # that tick ends: it may have read the store before the job was there
    assert live()
    views.publish()  # a tick begun after the store was read: it would have taken the job in
    assert not live()


def test_a_job_the_store_called_ended_is_live_only_if_the_view_says_so() -> None:
    assert not JobLiveness(Views(), "j", stored_live=False)()
    assert JobLiveness(Views("j"), "j", stored_live=False)()


def test_a_window_of_lines_starts_at_a_lines_start_within_its_bytes() -> None:
    log = MemoryLog(b"one\ntwo\nthree\n")
    assert tail(log, Window(size=1000, lines=2)) == b"two\nthree\n"
    assert tail(log, Window(size=1000, lines=1)) == b"three\n"
    assert tail(log, Window(size=1000, lines=9)) == b"one\ntwo\nthree\n"
    assert tail(log, Window(size=1000, lines=0)) == b""
    assert tail(log, Window(size=8, lines=3)) == b"o\nthree\n"  # the bytes bound it first
    unended = MemoryLog(b"one\ntwo\nthr")  # a last line without its newline is a line
    assert tail(unended, Window(size=1000, lines=2)) == b"two\nthr"
    assert tail(MemoryLog(), Window(size=1000, lines=2)) == b""
    assert tail(MemoryLog(b"\n\n\n"), Window(size=1000, lines=2)) == b"\n\n"


def test_a_window_of_lines_finds_them_across_read_chunks() -> None:
    long = b"x" * (READ_CHUNK + 10)
    log = MemoryLog(b"first\n" + long + b"\nlast\n")
    assert tail(log, Window(size=2**30, lines=2)) == long + b"\nlast\n"
    assert tail(log, Window(size=2**30, lines=3)) == b"first\n" + long + b"\nlast\n"


def test_lines_and_older_tasks_when_every_task_is_prefixed() -> None:
    logs: list[tuple[str, TaskLog]] = [("a", MemoryLog(b"1\n2\n3\n")), ("b", MemoryLog(b"x\ny\n"))]
    window = Window(size=1000, lines=1)
    assert text(prefixed_tail(logs, window)) == "a | 3\nb | y\n"
    assert text(prefixed_tail(logs, window, older={"a"})) == "b | y\n"
    b = logs[1][1]
    assert isinstance(b, MemoryLog)
    script = Script(lambda: b.write(b"z\n"))
    follows = prefixed_follow(logs, window, script.live, sleep=script.sleep, older={"b"})
    assert text(follows) == "a | 3\nb | z\n"  # b: only what it wrote from then on


def test_absences_are_asked_of_started_tasks_whose_log_reads_as_empty() -> None:
    gone = LogAbsence(reason="no log file at /t/j/a/stdout.log", fix="look elsewhere")
    logs: list[tuple[str, TaskLog]] = [
        ("a", MemoryLog(missing=gone)),
        ("b", MemoryLog(b"out\n", missing=gone)),  # it reads: it is there
        ("c", MemoryLog(missing=gone)),  # not started: it may have no log yet
        ("d", MemoryLog()),
    ]
    assert absences(logs, started={"a", "b", "d"}) == {"a": gone}


def test_since_leaves_out_tasks_that_started_before_it_or_have_not_started() -> None:
    starts = [("a", 100.0), ("b", 50.0), ("c", None), ("d", 80.0)]
    assert before(starts, 80.0) == ["b", "c"]
    note = since_note([f"t{i}" for i in range(7)], 300.0)
    assert note.startswith("since=300s leaves out the output so far of 7 task(s) whose ")
    assert "t0, t1, t2, t3, t4 and 2 more" in note and "no time stamps" in note
