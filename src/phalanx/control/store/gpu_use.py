"""What each job did with its GPUs, in the store: every query of ``GpuUseRow``.

The telemetry controller writes one row per job and window (about a minute) from the
readings of that window; ``describe job``, the job page's chart and the API read them
back (``telemetry.windows.GpuUse``). Rows go with their job.
"""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy import insert, select
from sqlalchemy.orm import Session

from phalanx.control.store.models import GpuUseRow
from phalanx.telemetry.windows import GpuUse


def add(session: Session, rows: Sequence[tuple[int, GpuUse]]) -> None:
    """Write windows: ``(job row id, window)`` each."""
    if rows:
        session.execute(
            insert(GpuUseRow),
            [
                {
                    "job_id": job_id,
                    "start": use.start,
                    "end": use.end,
                    "samples": use.samples,
                    "cards": use.cards,
                    "utilisation": use.utilisation,
                    "utilisation_peak": use.utilisation_peak,
                    "memory": use.memory,
                    "memory_peak": use.memory_peak,
                }
                for job_id, use in rows
            ],
        )


def of_job(session: Session, job_id: int) -> list[GpuUse]:
    """The job's windows, oldest first."""
    rows = session.scalars(
        select(GpuUseRow).where(GpuUseRow.job_id == job_id).order_by(GpuUseRow.start)
    )
    return [
        GpuUse(
            start=row.start,
            end=row.end,
            samples=row.samples,
            cards=row.cards,
            utilisation=row.utilisation,
            utilisation_peak=row.utilisation_peak,
            memory=row.memory,
            memory_peak=row.memory_peak,
        )
        for row in rows
    ]
