"""pipelines and their runs

Two new tables: registered Pipeline documents, and runs of them with the workflow
controller's record of each (a JSON column).

Revision ID: 0007
Revises: 0006
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "pipelines",
        sa.Column("name", sa.String(253), primary_key=True),
        sa.Column("user", sa.String(253), nullable=False),
        sa.Column("document", sa.JSON(), nullable=False),
        sa.Column("created_at", sa.Float(), nullable=False),
        sa.Column("updated_at", sa.Float(), nullable=False),
    )
    op.create_index("ix_pipelines_user", "pipelines", ["user"])
    op.create_table(
        "runs",
        sa.Column("id", sa.String(128), primary_key=True),
        sa.Column("pipeline", sa.String(253), nullable=False),
        sa.Column("user", sa.String(253), nullable=False),
        sa.Column("document", sa.JSON(), nullable=False),
        sa.Column("params", sa.JSON(), nullable=False),
        sa.Column("phase", sa.String(16), nullable=False),
        sa.Column("message", sa.Text(), nullable=False),
        sa.Column("state", sa.JSON(), nullable=False),
        sa.Column("stop_requested", sa.Boolean(), nullable=False),
        sa.Column("created_at", sa.Float(), nullable=False),
        sa.Column("finished_at", sa.Float(), nullable=True),
    )
    op.create_index("ix_runs_pipeline", "runs", ["pipeline"])
    op.create_index("ix_runs_user", "runs", ["user"])
    op.create_index("ix_runs_phase", "runs", ["phase"])


def downgrade() -> None:
    op.drop_table("runs")
    op.drop_table("pipelines")
