"""The size of an elastic role: adding replicas to a running job and dropping them.

A job's elastic role has as many tasks as the lifecycle gives it. A new attempt starts
with ``replicas`` (the size its owner asks for). While it runs, a growth adds tasks
(Pending, for the next cycle to place; the engine gives up those it cannot), and a
task of the role that stops while the role has more tasks than ``max(replicas,
min_replicas)`` is dropped rather than waiting again: the job runs on, smaller, and
spends no retry. Tasks are named by index; a new one takes the next index above the
highest, so a name is never reused while its job lives.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace

from phalanx.domain.job import Role, Task
from phalanx.engine.lifecycle.effects import Event, EventKind, Resized
from phalanx.engine.lifecycle.jobs import JobLife
from phalanx.engine.lifecycle.ledger import Ledger
from phalanx.engine.snapshot import TaskInfo


class Sizes(Ledger):
    """Adds and drops the tasks of elastic roles (see the module docstring)."""

    def _elastic(self, life: JobLife) -> Role | None:
        return life.job.elastic_role()

    def _role_tasks(self, life: JobLife, role: str) -> list[TaskInfo]:
        return [t for t in self.tasks(life) if t.role.name == role]

    def _is_surplus(self, life: JobLife, task: TaskInfo) -> bool:
        """Whether ``task``, now stopped, leaves its job rather than waiting again."""
        role = self._elastic(life)
        if role is None or task.role.name != role.name or life.ending is not None:
            return False
        return len(self._role_tasks(life, role.name)) > role.kept_replicas

    def _add_tasks(self, life: JobLife, role: str, count: int, reason: str) -> None:
        """Give ``role`` ``count`` more Pending tasks."""
        mine = self._role_tasks(life, role)
        top = max((t.index for t in mine), default=-1)
        added = tuple(Task(role=role, index=top + 1 + i) for i in range(count))
        self._retrack(life, lambda tasks: (*tasks, *added))
        self._resized(life, role, [t.name(life.name) for t in added], [], reason)

    def _drop_tasks(self, life: JobLife, tasks: Sequence[TaskInfo], reason: str) -> None:
        """Remove ``tasks`` (none holds a node) from their job."""
        if not tasks:
            return
        gone = {t.name for t in tasks}
        role = tasks[0].role.name
        self._retrack(life, lambda kept: tuple(t for t in kept if t.name(life.name) not in gone))
        self._resized(life, role, [], sorted(gone), reason)

    def _restart_size(self, life: JobLife) -> None:
        """A gang restarting (every task stopped) starts again with ``replicas`` tasks of
        its elastic role (growth is dropped), or at the size of a restart-mode rescale."""
        role = self._elastic(life)
        if role is None:
            return
        size, reason = life.restart_size or (role.replicas, f"the gang restarts at {role.replicas}")
        life.restart_size = None
        mine = sorted(self._role_tasks(life, role.name), key=lambda t: -t.index)
        if len(mine) > size:
            self._drop_tasks(life, mine[: len(mine) - size], reason)
        elif len(mine) < size:
            self._add_tasks(life, role.name, size - len(mine), reason)

    def _retrack(
        self, life: JobLife, change: Callable[[tuple[Task, ...]], tuple[Task, ...]]
    ) -> None:
        """Track the job again with its tasks changed; it counts as rescaled now."""
        life.job = replace(life.job, rescaled_at=self.now)
        current = self.current(life)
        self._untrack(life)
        self._track(life, replace(current, tasks=change(current.tasks)))

    def _resized(
        self, life: JobLife, role: str, added: list[str], removed: list[str], reason: str
    ) -> None:
        size = len(self._role_tasks(life, role))
        before = size - len(added) + len(removed)
        self._out.append(
            Resized(
                job=life.name,
                role=role,
                size=size,
                added=tuple(added),
                removed=tuple(removed),
                reason=reason,
                time=self.now,
            )
        )
        self._out.append(
            Event(
                job=life.name,
                kind=EventKind.RESIZED,
                message=f"{role}: {before} -> {size} replicas: {reason}",
                time=self.now,
            )
        )
