"""Model versions in the store: every query of ``ModelVersionRow``, of the jobs that
still owe a model (``JobRow.model_intake``), and of those whose tasks wait for one to be
copied out (``JobRow.model_fetch``).

A deleted version keeps its row (``deleted_at`` set), so a number is never given twice
and a name stays its first user's; reads leave deleted versions out.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Final

from sqlalchemy import func, select, update
from sqlalchemy.orm import Session

from phalanx.control.store.models import JobRow, ModelVersionRow
from phalanx.domain.job import JobPhase
from phalanx.engine.lifecycle import TERMINAL

#: Job phases before the end.
_LIVE: Final = tuple(p.value for p in JobPhase if p not in TERMINAL)

#: ``JobRow.model_intake`` and ``JobRow.model_fetch`` values.
PENDING, DONE, FAILED = "pending", "done", "failed"
#: ``ModelVersionRow.image_phase`` values.
BUILDING, BUILT, BUILD_FAILED = "Building", "Built", "Failed"


@dataclass(frozen=True, slots=True, kw_only=True)
class NewVersion:
    """What a registration writes: the content's digest, size and file count, and its
    lineage."""

    name: str
    digest: str
    size: int
    files: int
    user: str
    job: str
    role: str
    run_id: str | None
    step: str | None
    lineage: dict[str, Any]
    image: bool = False  # build a container image of it


def owed(session: Session, limit: int) -> Sequence[JobRow]:
    """Succeeded jobs whose models are not registered yet, oldest first."""
    query = (
        select(JobRow)
        .where(JobRow.model_intake == PENDING, JobRow.phase == JobPhase.SUCCEEDED.value)
        .order_by(JobRow.id)
        .limit(limit)
    )
    return session.scalars(query).all()


def settle(session: Session, job_id: int, state: str) -> None:
    """Record that job ``job_id``'s models are ``DONE`` or ``FAILED``."""
    session.execute(update(JobRow).where(JobRow.id == job_id).values(model_intake=state))


def add(session: Session, new: NewVersion, *, now: float) -> int:
    """Insert ``new`` as the next version of its model (one above every version ever
    given, deleted ones included); its number."""
    query = select(func.max(ModelVersionRow.version)).where(ModelVersionRow.name == new.name)
    version = (session.scalar(query) or 0) + 1
    session.add(
        ModelVersionRow(
            name=new.name,
            version=version,
            digest=new.digest,
            size=new.size,
            files=new.files,
            user=new.user,
            created_at=now,
            job=new.job,
            role=new.role,
            run_id=new.run_id,
            step=new.step,
            lineage=new.lineage,
            image_phase=BUILDING if new.image else None,
        )
    )
    session.flush()  # a second registrar's insert of the same number fails here
    return version


def latest(session: Session, user: str | None) -> Sequence[ModelVersionRow]:
    """The newest version of each model (of ``user``'s models; None: everyone's), by name."""
    newest = (
        select(ModelVersionRow.name, func.max(ModelVersionRow.version).label("version"))
        .where(ModelVersionRow.deleted_at.is_(None))
        .group_by(ModelVersionRow.name)
        .subquery()
    )
    query = select(ModelVersionRow).join(
        newest,
        (ModelVersionRow.name == newest.c.name) & (ModelVersionRow.version == newest.c.version),
    )
    if user is not None:
        query = query.where(ModelVersionRow.user == user)
    return session.scalars(query.order_by(ModelVersionRow.name)).all()


def counts(session: Session) -> dict[str, int]:
    """How many versions each model has (deleted ones left out)."""
    query = (
        select(ModelVersionRow.name, func.count())
        .where(ModelVersionRow.deleted_at.is_(None))
        .group_by(ModelVersionRow.name)
    )
    return dict(session.execute(query).all())


def versions(session: Session, name: str) -> Sequence[ModelVersionRow]:
    """Every version of model ``name``, newest first."""
    query = select(ModelVersionRow).where(
        ModelVersionRow.name == name, ModelVersionRow.deleted_at.is_(None)
    )
    return session.scalars(query.order_by(ModelVersionRow.version.desc())).all()


def version(session: Session, name: str, number: int | None) -> ModelVersionRow | None:
    """Version ``number`` of model ``name`` (None: its newest), or None."""
    query = select(ModelVersionRow).where(
        ModelVersionRow.name == name, ModelVersionRow.deleted_at.is_(None)
    )
    if number is not None:
        return session.scalars(query.where(ModelVersionRow.version == number)).first()
    return session.scalars(query.order_by(ModelVersionRow.version.desc()).limit(1)).first()


def delete(session: Session, name: str, number: int | None, *, now: float) -> list[int]:
    """Delete version ``number`` of model ``name`` (None: every version); the numbers
    deleted, highest first."""
    rows = versions(session, name)
    gone = [row for row in rows if number is None or row.version == number]
    for row in gone:
        row.deleted_at = now
    return [row.version for row in gone]


def kept_digests(session: Session) -> set[str]:
    """The content digests some version not deleted still names."""
    query = select(ModelVersionRow.digest).where(ModelVersionRow.deleted_at.is_(None))
    return set(session.scalars(query.distinct()).all())


def owners(session: Session, names: Sequence[str]) -> dict[str, str]:
    """The user each of the models ``names`` that exist belongs to, by name."""
    query = (
        select(ModelVersionRow.name, ModelVersionRow.user)
        .where(ModelVersionRow.name.in_(list(names)))
        .order_by(ModelVersionRow.version.desc())
    )
    return dict(session.execute(query).all())


def images_owed(session: Session) -> Sequence[ModelVersionRow]:
    """Versions not deleted whose image is still to be built, oldest first."""
    query = select(ModelVersionRow).where(
        ModelVersionRow.image_phase == BUILDING, ModelVersionRow.deleted_at.is_(None)
    )
    return session.scalars(query.order_by(ModelVersionRow.id)).all()


def image_built(session: Session, version_id: int, *, image: str | None, message: str) -> None:
    """Record the build of version ``version_id``'s image: ``image`` its tag (None: it
    failed, and ``message`` says why)."""
    phase = BUILD_FAILED if image is None else BUILT
    session.execute(
        update(ModelVersionRow)
        .where(ModelVersionRow.id == version_id)
        .values(image_phase=phase, image=image, image_message=message)
    )


def fetches_owed(session: Session, limit: int, skip: Iterable[int] = ()) -> Sequence[JobRow]:
    """Jobs whose inputs (model versions, datasets) are still to be made ready for their
    tasks, oldest first, but those ``skip`` names (ids)."""
    query = select(JobRow).where(JobRow.model_fetch == PENDING)
    skipped = list(skip)
    if skipped:
        query = query.where(JobRow.id.not_in(skipped))
    return session.scalars(query.order_by(JobRow.id).limit(limit)).all()


def settle_fetch(session: Session, job_id: int, state: str) -> None:
    """Record that job ``job_id``'s model inputs are ``DONE`` (ready for its tasks) or
    ``FAILED``."""
    session.execute(update(JobRow).where(JobRow.id == job_id).values(model_fetch=state))


def readers(session: Session) -> list[tuple[str, dict[str, Any]]]:
    """The jobs not yet ended that read model versions: (name, document), by name."""
    query = (
        select(JobRow.name, JobRow.document)
        .where(JobRow.model_fetch.is_not(None), JobRow.phase.in_(_LIVE))
        .order_by(JobRow.name)
    )
    return [(name, document) for name, document in session.execute(query)]
