"""pipelines and runs: cron schedules, sub-pipelines

``pipelines.scheduled_through``: the time up to which the pipeline's schedule has been
handled (its firings until then started a run, or were skipped); ``runs.scheduled_at``:
the firing a run was started for (None: started on request); ``runs.parent``: the run
whose sub-pipeline step started this one (None: none).

Revision ID: 0009
Revises: 0008
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None


# Plain ALTER TABLE, never a batch (see 0006).
def upgrade() -> None:
    op.add_column("pipelines", sa.Column("scheduled_through", sa.Float(), nullable=True))
    op.add_column("runs", sa.Column("scheduled_at", sa.Float(), nullable=True))
    op.add_column("runs", sa.Column("parent", sa.String(128), nullable=True))
    op.create_index("ix_runs_parent", "runs", ["parent"])


def downgrade() -> None:
    op.drop_index("ix_runs_parent", "runs")
    op.drop_column("runs", "parent")
    op.drop_column("runs", "scheduled_at")
    op.drop_column("pipelines", "scheduled_through")
