"""Durable state of the control plane: SQLAlchemy 2 tables, Alembic migrations, and
every query, one module per kind (``jobs``, ``cluster``, ``runs``, ``users``, ``cache``,
``model_versions``, ``journal``). No module outside this package writes SQL or imports SQLAlchemy
(``tests/unit/test_architecture.py``): it calls these, with a ``Session`` from
``Database.session``.
"""

from sqlalchemy.exc import DataError, IntegrityError, SQLAlchemyError
from sqlalchemy.orm import Session

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
    "DataError",
    "Database",
    "EventRow",
    "IntegrityError",
    "JobRow",
    "NodeRow",
    "QueueRow",
    "SQLAlchemyError",
    "Session",
    "TaskRow",
    "TokenRow",
    "UserRow",
]
