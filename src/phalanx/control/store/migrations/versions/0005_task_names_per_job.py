"""task names are unique within their job, not across the store

A task is named ``<job>-<role>-<index>``, so two jobs can give the same name to
different tasks (job ``a-b`` role ``c`` and job ``a`` role ``b-c`` both make
``a-b-c-0``). Unique across the store, such a name refused the second job, with an
answer that also told its submitter that someone else's job had that task. Everything
that finds a task by name does so within its job, so uniqueness moves there.

Revision ID: 0005
Revises: 0004
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None

# SQLite keeps the old constraint unnamed: a naming convention gives it a name to drop.
_NAMING = {"uq": "uq_%(table_name)s_%(column_0_N_name)s"}
_OLD, _NEW = "uq_tasks_name", "uq_tasks_job_id_name"


def upgrade() -> None:
    old = _constraint_on(["name"]) or _OLD
    with op.batch_alter_table("tasks", naming_convention=_NAMING) as batch_op:
        batch_op.drop_constraint(old, type_="unique")
        batch_op.create_unique_constraint(_NEW, ["job_id", "name"])


def downgrade() -> None:
    with op.batch_alter_table("tasks", naming_convention=_NAMING) as batch_op:
        batch_op.drop_constraint(_NEW, type_="unique")
        batch_op.create_unique_constraint(_OLD, ["name"])


def _constraint_on(columns: list[str]) -> str | None:
    """The name the database gave the unique constraint on ``columns`` of tasks
    (PostgreSQL's ``tasks_name_key``); None when it has none (SQLite)."""
    for constraint in sa.inspect(op.get_bind()).get_unique_constraints("tasks"):
        if constraint["column_names"] == columns and constraint["name"]:
            return constraint["name"]
    return None
