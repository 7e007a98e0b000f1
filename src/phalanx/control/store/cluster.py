"""Queues and nodes in the store: every query of ``QueueRow`` and ``NodeRow``.

A table's ``version`` (its row count and newest update time) changes whenever a row is
added, changed or removed: the controller reads a table again only when it does.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from phalanx.control.store.models import NodeRow, QueueRow

Version = tuple[int, Any]  # (rows, newest updated_at)


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


def nodes(session: Session) -> Sequence[NodeRow]:
    """Every node's stored flags (cordoned, draining), by name."""
    return session.scalars(select(NodeRow).order_by(NodeRow.name)).all()
