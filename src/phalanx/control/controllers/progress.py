"""Elastic jobs' progress reports as the controller reads them: ``ProgressReader``.

Guarantees: each running elastic job's newest report (the newest of its running tasks'
files, read through the executor's ``ProgressSource``, at most ``MAX_REPORT_BYTES`` + 1
bytes) is handed to the lifecycle (for the engine's goodput policy) and to the store
(for people) once per change of the report, its timings that do not say their GPU
type taken as measured on the type of the node the reporting task runs on; a report
that is too big or does not validate is an event of the job (``ProgressIgnored``,
naming the problem), never an error of the controller's.
"""

from __future__ import annotations

from collections.abc import Callable

from pydantic import ValidationError

from phalanx.control.controllers.core import Core
from phalanx.domain.node import GPU_MODEL_LABEL
from phalanx.engine.snapshot import Snapshot, TaskStatus
from phalanx.executors.base import ProgressSource
from phalanx.spec.diagnostics import problems_of
from phalanx.spec.progress import MAX_REPORT_BYTES, ProgressReport

#: What was read of a job: its name, its newest report, and the GPU type of the node
#: its reporting task runs on (None: a node without one).
Read = tuple[str, bytes, str | None]
#: Runs ``handle(arg)`` for a job, failing that job alone if it raises.
Guard = Callable[[str, Callable[[Read], None], Read], None]


class ProgressReader:
    """What was last read of each running elastic job (see the module docstring)."""

    def __init__(self, core: Core) -> None:
        self._core = core
        self._seen: dict[str, int] = {}  # per elastic job: its report's mtime read

    def read(self, guarded: Guard) -> None:
        """Read every running elastic job's newest report; hand on those that changed,
        each through ``guarded``."""
        core = self._core
        executor = core.executor
        if not isinstance(executor, ProgressSource):
            return
        snapshot = core.state.snapshot
        elastic = snapshot.elastic
        for gone in self._seen.keys() - elastic.keys():
            del self._seen[gone]  # ended: forget it
        for name, info in list(elastic.items()):
            newest = None
            for task in info.tasks:
                if task.status is TaskStatus.RUNNING:
                    found = executor.progress(name, task.name, MAX_REPORT_BYTES + 1)
                    if found is not None and (newest is None or found[0] > newest[0]):
                        newest = (*found, _gpu_model(snapshot, task.node))
            if newest is not None and self._seen.get(name) != newest[0]:
                self._seen[name] = newest[0]
                guarded(name, self._report, (name, newest[1], newest[2]))

    def _report(self, read: Read) -> None:
        name, raw, gpu_model = read
        core = self._core
        row = core.rows[name].id
        problem = None
        if len(raw) > MAX_REPORT_BYTES:
            problem = f"it is over {MAX_REPORT_BYTES} bytes; fix: report only the latest figures"
        else:
            try:
                report = ProgressReport.model_validate_json(raw)
            except ValidationError as error:
                problem = "; ".join(
                    f"{p.path}: {p.detail}" if p.path else p.detail for p in problems_of(error)[:3]
                )
        if problem is not None:
            core.journal.event(row, core.now, "ProgressIgnored", f"progress report: {problem}")
            return
        core.life.report(name, report.to_domain(core.now, gpu_model=gpu_model))
        written = report.model_dump(mode="json", by_alias=True, exclude_none=True)
        core.journal.job(row, progress={**written, "time": core.now})


def _gpu_model(snapshot: Snapshot, node: int) -> str | None:
    """The GPU type (``phalanx.io/gpu-model``) of node ``node`` (an index; None: no node
    or no label)."""
    if node < 0:
        return None
    value = snapshot.nodes[node].labels.get(GPU_MODEL_LABEL)
    return None if value is None else str(value)
