"""What decides whether a gang fits, and why one did not: shared by gang placement
(``jobs``, ``confined``) and eviction's failure memo."""

from __future__ import annotations

from collections.abc import Sequence

from phalanx.engine.decisions import Reason, ReasonCode
from phalanx.engine.snapshot import JobInfo, TaskInfo


def gang_reason(job: JobInfo, placed: int, reason: Reason | None) -> Reason:
    """Why ``job`` failed after ``placed`` of its tasks fit: ``reason`` in gang terms."""
    if reason is None:
        return Reason(
            code=ReasonCode.GANG,
            message=f"gang needs {job.min_available} tasks; only {placed} exist pending",
        )
    if placed or job.min_available - job.ready_count > 1:
        return Reason(
            code=ReasonCode.GANG if reason.code is ReasonCode.INSUFFICIENT else reason.code,
            message=f"gang needs {job.min_available} tasks together but only {job.ready_count + placed} "
            f"fit: {reason.message}",
            resource=reason.resource,
            queue=reason.queue,
            node=reason.node,
            shortfall=reason.shortfall,
        )
    return reason


def gang_shape(job: JobInfo, tasks: Sequence[TaskInfo]) -> tuple[object, ...]:
    """What decides whether a gang fits: its queue, what is still needed, and each role's
    request, selectors, tolerations, GPU types and pending count (not the job's name)."""
    roles: dict[int, int] = {}
    for task in tasks:
        roles[task.role.index] = roles.get(task.role.index, 0) + 1
    return (
        job.queue.name,
        job.min_available - job.ready_count,
        tuple(
            (
                job.roles[index].resources,
                tuple(sorted(job.roles[index].spec.node_selector.items())),
                job.roles[index].spec.affinity,
                job.roles[index].spec.tolerations,
                job.roles[index].spec.gpu_types,
                count,
            )
            for index, count in sorted(roles.items())
        ),
    )
