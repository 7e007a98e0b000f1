"""Durable state of the control plane: SQLAlchemy 2 tables, Alembic migrations, queries."""

from phalanx.control.store.database import Database
from phalanx.control.store.models import (
    EventRow,
    JobRow,
    NodeRow,
    QueueRow,
    TaskRow,
    TokenRow,
    UserRow,
)

__all__ = [
    "Database",
    "EventRow",
    "JobRow",
    "NodeRow",
    "QueueRow",
    "TaskRow",
    "TokenRow",
    "UserRow",
]
