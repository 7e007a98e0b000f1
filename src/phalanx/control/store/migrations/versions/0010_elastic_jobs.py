"""elastic jobs: the owner's new size, and the job's latest progress report

``phalanx scale`` writes the new ``replicas`` into the job's document and sets
``scale_requested``; the controller applies it in its next tick and clears the flag.
A restart in between applies it then. ``progress`` holds the latest report the job's
tasks wrote (``PHALANX_PROGRESS_FILE``), as validated, with the time it was read.

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
    op.add_column("jobs", sa.Column("progress", sa.JSON(), nullable=True))


def downgrade() -> None:
    op.drop_column("jobs", "progress")
    op.drop_column("jobs", "scale_requested")
