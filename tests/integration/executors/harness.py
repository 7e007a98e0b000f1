"""A LocalExecutor driven by a fake clock, and bounded waits on real conditions.

Time never decides a test here: every wait is for a condition (an event, a file, a
process state) with a generous deadline that only turns a hang into a failure.
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import psutil

from phalanx.engine.decisions import Bind, Evict
from phalanx.executors.base import TaskEvent, TaskEventKind
from phalanx.executors.cgroups import Isolation
from phalanx.executors.launch import TaskLaunch
from phalanx.executors.local import LocalExecutor

#: Upper bound of any wait: far above what a task needs, only there to stop a hang.
DEADLINE = 20.0

#: A Python child that dumps its environment as JSON into ./env.json.
DUMP_ENV = (
    sys.executable,
    "-c",
    "import json, os; json.dump(dict(os.environ), open('env.json', 'w'))",
)


def wait_for(condition: Callable[[], Any], what: str, *, timeout: float = DEADLINE) -> Any:
    """Return ``condition()``'s first truthy value; fail naming ``what`` past the deadline."""
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.005)


def read_file(path: Path) -> str | None:
    """The file's text, or None while it does not exist (or is still being renamed in)."""
    try:
        return path.read_text()
    except FileNotFoundError:
        return None


def is_gone(pid: int) -> bool:
    """True when ``pid`` no longer runs (a zombie waiting for its reaper counts as gone)."""
    try:
        return bool(psutil.Process(pid).status() == psutil.STATUS_ZOMBIE)
    except psutil.NoSuchProcess:
        return True


class Harness:
    """One executor, the launches it resolves, and every event it reported."""

    def __init__(
        self,
        data_dir: Path,
        *,
        environ: dict[str, str] | None = None,
        isolation: Isolation | None = None,
        **options: Any,
    ) -> None:
        self.now = 1000.0
        self.launches: dict[tuple[str, str], TaskLaunch] = {}
        self.events: list[TaskEvent] = []
        self.executor = LocalExecutor(
            data_dir,
            self._resolve,
            clock=lambda: self.now,
            environ=environ,
            isolation=isolation,
            **options,
        )

    def _resolve(self, bind: Bind) -> TaskLaunch:
        return self.launches[(bind.job, bind.task)]

    def launch(
        self, task: str = "t0", *, command: tuple[str, ...] | str, **fields: Any
    ) -> TaskLaunch:
        """Register a launch (job ``job``, role ``worker`` unless given) and return it."""
        values: dict[str, Any] = {"job": "job", "role": "worker", "index": 0, "node": "n0"}
        values.update(fields)
        launch = TaskLaunch(task=task, command=command, **values)
        self.launches[(launch.job, launch.task)] = launch
        return launch

    def start(self, *launches: TaskLaunch) -> None:
        binds = [
            Bind(
                job=launch.job,
                task=launch.task,
                role=launch.role,
                index=launch.index,
                node=launch.node,
                gpus=launch.gpus,
            )
            for launch in launches
        ]
        self.executor.start(binds, now=self.now)

    def stop(self, launch: TaskLaunch, *, grace: float = 5.0) -> None:
        evict = Evict(
            job=launch.job,
            task=launch.task,
            node=launch.node,
            action="preempt",
            by="x",
            reason="test",
        )
        self.executor.stop([evict], now=self.now, grace=grace)

    def poll(self) -> list[TaskEvent]:
        """Advance the fake clock a little and poll; the events are also kept in ``events``."""
        self.now += 0.05
        new = self.executor.poll(now=self.now)
        self.events.extend(new)
        return new

    def wait_event(self, task: str, kind: TaskEventKind = TaskEventKind.EXITED) -> TaskEvent:
        """Poll until ``task`` has an event of ``kind``; return it."""

        def found() -> TaskEvent | None:
            self.poll()
            return next((e for e in self.events if e.task == task and e.kind is kind), None)

        event: TaskEvent = wait_for(found, f"{kind} of {task}")
        return event

    def workdir(self, launch: TaskLaunch) -> Path:
        return self.executor.workdir(launch.job, launch.task)

    def wait_file(self, launch: TaskLaunch, name: str) -> str:
        """The content of ``name`` in the task's directory once it exists (maybe empty)."""
        path = self.workdir(launch) / name
        found: tuple[str] = wait_for(
            lambda: None if (text := read_file(path)) is None else (text,), f"{launch.task}/{name}"
        )
        return found[0]

    def env_of(self, launch: TaskLaunch) -> dict[str, str]:
        """The environment a ``DUMP_ENV`` task saw."""
        self.wait_event(launch.task)
        env: dict[str, str] = json.loads(self.wait_file(launch, "env.json"))
        return env

    def pid_of(self, launch: TaskLaunch) -> int:
        return next(t.pid for t in self.executor.running() if t.task == launch.task)

    def close(self) -> None:
        """Kill whatever still runs and reap it, so that no process outlives the test."""
        for task in self.executor.running():
            self.executor.stop(
                [
                    Evict(
                        job=task.job,
                        task=task.task,
                        node=task.node,
                        action="preempt",
                        by="x",
                        reason="teardown",
                    )
                ],
                now=self.now,
                grace=0.0,
            )
        wait_for(lambda: not self.poll() and not self.executor.running(), "every task to end")
        self.executor.close()  # its cgroup parents go too, when nothing is left in them
