"""Inference services in the store: every query of ``ServiceRow`` and
``ServiceReplicaRow``."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from sqlalchemy import delete, select, update
from sqlalchemy.orm import Session

from phalanx.control.store.models import JobRow, ServiceReplicaRow, ServiceRow, TaskRow


def get(session: Session, name: str) -> ServiceRow | None:
    """Service ``name``, or None."""
    return session.get(ServiceRow, name)


def listing(session: Session, user: str | None) -> Sequence[ServiceRow]:
    """``user``'s services (None: everyone's), by name."""
    query = select(ServiceRow).order_by(ServiceRow.name)
    if user is not None:
        query = query.where(ServiceRow.user == user)
    return session.scalars(query).all()


def add(session: Session, name: str, user: str, document: dict[str, Any], *, now: float) -> None:
    """Record a new service."""
    session.add(
        ServiceRow(
            name=name, user=user, document=document, created_at=now, updated_at=now, replicas_made=0
        )
    )


def replicas(session: Session, services: Iterable[str] | None = None) -> list[ServiceReplicaRow]:
    """The replicas of ``services`` (None: of every service), oldest first."""
    query = select(ServiceReplicaRow).order_by(ServiceReplicaRow.id)
    if services is not None:
        query = query.where(ServiceReplicaRow.service.in_(list(services)))
    return list(session.scalars(query).all())


def next_replica_number(session: Session, name: str) -> int:
    """The number of service ``name``'s next replica (1, 2, ...; never given twice)."""
    row = session.get(ServiceRow, name, with_for_update=True)
    assert row is not None, name
    row.replicas_made += 1
    return row.replicas_made


def add_replica(session: Session, service: str, predictor: str, job: str, *, now: float) -> None:
    """Record a replica of ``service``'s ``predictor``, run by ``job``."""
    session.add(
        ServiceReplicaRow(
            service=service, predictor=predictor, job=job, created_at=now, ready=False
        )
    )


def endpoints(session: Session, jobs: Iterable[str]) -> dict[str, str]:
    """Where each replica job of ``jobs`` serves (``host:port``: its task's node address
    and the port reserved for it there, from the executor's record), by job, for those
    whose task runs now."""
    query = (
        select(JobRow.name, TaskRow.process)
        .join(TaskRow, TaskRow.job_id == JobRow.id)
        .where(JobRow.name.in_(list(jobs)), TaskRow.index == 0, TaskRow.process.is_not(None))
    )
    found: dict[str, str] = {}
    for name, process in session.execute(query):
        endpoint = process.get("endpoint") if isinstance(process, dict) else None
        if isinstance(endpoint, str) and endpoint:
            found[name] = endpoint
    return found


def remove_replicas(session: Session, jobs: Iterable[str]) -> None:
    """Forget the replicas run by ``jobs``."""
    session.execute(delete(ServiceReplicaRow).where(ServiceReplicaRow.job.in_(list(jobs))))


def set_readiness(session: Session, readiness: dict[str, str | None]) -> None:
    """Record each replica's readiness, by job: its URL when Ready, else None."""
    for job, url in readiness.items():
        session.execute(
            update(ServiceReplicaRow)
            .where(ServiceReplicaRow.job == job)
            .values(ready=url is not None, url=url)
        )


def move_replicas(session: Session, service: str, predictor: str, to: str) -> None:
    """Make ``service``'s replicas of ``predictor`` replicas of ``to``."""
    session.execute(
        update(ServiceReplicaRow)
        .where(ServiceReplicaRow.service == service, ServiceReplicaRow.predictor == predictor)
        .values(predictor=to)
    )


def replica_jobs(session: Session, service: str, predictor: str) -> Sequence[str]:
    """The jobs of ``service``'s replicas of ``predictor``."""
    query = select(ServiceReplicaRow.job).where(
        ServiceReplicaRow.service == service, ServiceReplicaRow.predictor == predictor
    )
    return session.scalars(query).all()


def remove(session: Session, name: str) -> list[str]:
    """Forget service ``name`` and its replicas; the replicas' jobs, for the caller to
    cancel."""
    jobs = [row.job for row in replicas(session, [name])]
    remove_replicas(session, jobs)
    session.execute(delete(ServiceRow).where(ServiceRow.name == name))
    return jobs
