"""which jobs wait for the model versions their tasks read

A job whose roles name a ``modelVersion`` is ``model_fetch = 'pending'`` until the
version is copied out for its tasks (``done``) or cannot be (``failed``); the controller
takes in no pending job. Jobs before this revision read none (NULL).

Revision ID: 0014
Revises: 0013
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0014"
down_revision = "0013"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("jobs", schema=None) as batch_op:
        batch_op.add_column(sa.Column("model_fetch", sa.String(length=16), nullable=True))
        batch_op.create_index(batch_op.f("ix_jobs_model_fetch"), ["model_fetch"], unique=False)


def downgrade() -> None:
    with op.batch_alter_table("jobs", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_jobs_model_fetch"))
        batch_op.drop_column("model_fetch")
