"""Queues and nodes in the store: every query of ``QueueRow`` and ``NodeRow``.

A table's ``version`` (its row count and newest update time) changes whenever a row is
added, changed or removed: the controller reads a table again only when it does.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy import Select, bindparam, func, select
from sqlalchemy.orm import Session

from phalanx.control.store.models import NodeRow, QueueRow

Version = tuple[int, Any]  # (rows, newest updated_at)


def _queue_lookup() -> Select[tuple[str, dict[str, Any], bool]]:
    """Name, document and "has children" of the queues named by ``:names``."""
    table = QueueRow.metadata.tables[QueueRow.__tablename__]
    child = table.alias("child")
    has_children = select(child.c.name).where(child.c.parent == table.c.name).exists()
    return select(table.c.name, table.c.document, has_children).where(
        table.c.name.in_(bindparam("names", expanding=True))
    )


_QUEUE_LOOKUP = _queue_lookup()  # built once: building it costs more than running it


def queue_documents(
    session: Session, names: Sequence[str]
) -> dict[str, tuple[dict[str, Any], bool]]:
    """The stored document of each of the queues ``names`` that exists, and whether it
    has child queues, by name: one query (a submission batch's)."""
    found = session.connection().execute(_QUEUE_LOOKUP, {"names": list(names)})
    return {name: (document, bool(children)) for name, document, children in found}


def queues_version(session: Session) -> Version:
    """The queue table's version (see the module docstring)."""
    seen = session.execute(select(func.count(), func.max(QueueRow.updated_at))).one()
    return int(seen[0]), seen[1]


def nodes_version(session: Session) -> Version:
    """The node table's version (see the module docstring)."""
    seen = session.execute(select(func.count(), func.max(NodeRow.updated_at))).one()
    return int(seen[0]), seen[1]


def queues(session: Session) -> Sequence[QueueRow]:
    """Every queue, by name."""
    return session.scalars(select(QueueRow).order_by(QueueRow.name)).all()


def has_children(session: Session, queue: str) -> bool:
    """Whether ``queue`` has a child queue."""
    query = select(QueueRow.name).where(QueueRow.parent == queue).limit(1)
    return session.scalar(query) is not None


def nodes(session: Session) -> Sequence[NodeRow]:
    """Every node's stored flags (cordoned, draining), by name."""
    return session.scalars(select(NodeRow).order_by(NodeRow.name)).all()
