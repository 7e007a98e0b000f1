"""jobs remember that their owner asked for a new size of their elastic role

``phalanx scale`` writes the new ``replicas`` into the job's document and sets
``scale_requested``; the controller applies it in its next tick and clears the flag.
A restart in between applies it then.

Revision ID: 0010
Revises: 0009
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0010"
down_revision = "0009"
branch_labels = None
depends_on = None


# Plain ALTER TABLE, not a batch (see 0006: a batch would cascade-delete tasks on SQLite).
def upgrade() -> None:
    op.add_column(
        "jobs",
        sa.Column("scale_requested", sa.Boolean(), nullable=False, server_default=sa.false()),
    )


def downgrade() -> None:
    op.drop_column("jobs", "scale_requested")
