"""jobs remember why their tasks are being stopped

A job whose tasks are being stopped (cancelled, past its walltime, out of retries,
retrying, restarting its gang, aborted) becomes what that reason says once they have
stopped; a restart of the server in between must not forget the reason.

Revision ID: 0002
Revises: 0001
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("jobs", schema=None) as batch_op:
        batch_op.add_column(sa.Column("ending", sa.String(length=16), nullable=True))
        batch_op.add_column(
            sa.Column("ending_message", sa.Text(), nullable=False, server_default="")
        )


def downgrade() -> None:
    with op.batch_alter_table("jobs", schema=None) as batch_op:
        batch_op.drop_column("ending_message")
        batch_op.drop_column("ending")
