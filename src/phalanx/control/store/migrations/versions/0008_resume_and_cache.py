"""runs: the run a run resumes, its cache mode; the step cache

Two plain columns on runs (``resumed_from``: the run whose done steps ``phalanx pipeline
resume`` reused; ``cache_mode``: use, refresh or off) and the table of cache entries.

Revision ID: 0008
Revises: 0007
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None


# Plain ALTER TABLE, never a batch (see 0006).
def upgrade() -> None:
    op.add_column("runs", sa.Column("resumed_from", sa.String(128), nullable=True))
    op.add_column(
        "runs",
        sa.Column("cache_mode", sa.String(16), nullable=False, server_default="use"),
    )
    op.create_table(
        "cache_entries",
        sa.Column("key", sa.String(64), primary_key=True),
        sa.Column("pipeline", sa.String(253), nullable=False),
        sa.Column("step", sa.String(253), nullable=False),
        sa.Column("unit", sa.String(300), nullable=False),
        sa.Column("run_id", sa.String(128), nullable=False),
        sa.Column("user", sa.String(253), nullable=False),
        sa.Column("created_at", sa.Float(), nullable=False),
        sa.Column("expires_at", sa.Float(), nullable=True),
        sa.Column("outputs", sa.JSON(), nullable=False),
        sa.Column("artifacts", sa.JSON(), nullable=False),
        sa.Column("material", sa.JSON(), nullable=False),
    )
    op.create_index("ix_cache_entries_pipeline", "cache_entries", ["pipeline"])


def downgrade() -> None:
    op.drop_table("cache_entries")
    op.drop_column("runs", "cache_mode")
    op.drop_column("runs", "resumed_from")
