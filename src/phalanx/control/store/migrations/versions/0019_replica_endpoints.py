"""replicas are reached where their executor started them

A replica's port is no longer chosen by the server when it submits the replica: the
executor reserves one on the node the task lands on (its ``PORT``) and records
``host:port`` in the task's process record, which the serving controller reads. The
``port`` column goes. Replicas started before this revision listen on the old port,
which no record names: their jobs are asked to cancel and to be deleted, so the serving
controller replaces them with replicas it can reach.

Revision ID: 0019
Revises: 0018
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0019"
down_revision = "0018"
branch_labels = None
depends_on = None

_ENDED = ("Succeeded", "Failed", "Cancelled")


def upgrade() -> None:
    replicas = sa.table("service_replicas", sa.column("job", sa.String()))
    jobs = sa.table(
        "jobs",
        sa.column("name", sa.String()),
        sa.column("phase", sa.String()),
        sa.column("cancel_requested", sa.Boolean()),
        sa.column("delete_requested", sa.Boolean()),
    )
    op.execute(
        jobs.update()
        .where(jobs.c.name.in_(sa.select(replicas.c.job)), jobs.c.phase.not_in(_ENDED))
        .values(cancel_requested=True, delete_requested=True)
    )
    with op.batch_alter_table("service_replicas") as batch:
        batch.drop_column("port")


def downgrade() -> None:
    with op.batch_alter_table("service_replicas") as batch:
        batch.add_column(sa.Column("port", sa.Integer(), nullable=False, server_default="0"))
