"""jobs remember that they were deleted while live

Deleting a live job cancels it; the job is kept until its tasks have stopped, then
deleted by the tick that ends it. A restart in between must not forget the deletion.

Revision ID: 0006
Revises: 0005
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None


# Plain ALTER TABLE, not a batch: SQLite's batch mode copies the table and drops the old
# one, and with foreign keys on, that drop would cascade to every task and event.
def upgrade() -> None:
    op.add_column(
        "jobs",
        sa.Column("delete_requested", sa.Boolean(), nullable=False, server_default=sa.false()),
    )


def downgrade() -> None:
    op.drop_column("jobs", "delete_requested")
