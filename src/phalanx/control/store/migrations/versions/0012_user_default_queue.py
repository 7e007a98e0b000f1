"""a user may have a default queue

A job that names no queue goes to its user's default queue (set by an admin, as Slurm's
DefaultAccount); a user without one (every user before this revision) keeps the queue
named ``default``.

Revision ID: 0012
Revises: 0011
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0012"
down_revision = "0011"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("users", schema=None) as batch_op:
        batch_op.add_column(sa.Column("default_queue", sa.String(length=253), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("users", schema=None) as batch_op:
        batch_op.drop_column("default_queue")
