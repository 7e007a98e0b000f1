"""the accounting ledger: one row per placement of a task

An ``allocations`` row is one task's hold on one node, from its bind to when it left the
node (``end``; NULL while it holds it), with what its role requested, the node's labels
and whether it was reclaimable, the job's user and queue. Rows are kept when their job
is deleted. Tasks on nodes at the upgrade are not in it: the ledger starts then.

Revision ID: 0023
Revises: 0022
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0023"
down_revision = "0022"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "allocations",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("job_id", sa.Integer(), nullable=False),
        sa.Column("job", sa.String(length=253), nullable=False),
        sa.Column("user", sa.String(length=253), nullable=False),
        sa.Column("queue", sa.String(length=253), nullable=False),
        sa.Column("task", sa.String(length=330), nullable=False),
        sa.Column("role", sa.String(length=63), nullable=False),
        sa.Column("node", sa.String(length=253), nullable=False),
        sa.Column("resources", sa.JSON(), nullable=False),
        sa.Column("gpus", sa.JSON(), nullable=False),
        sa.Column("labels", sa.JSON(), nullable=False),
        sa.Column("reclaimable", sa.Boolean(), nullable=False),
        sa.Column("elastic", sa.Boolean(), nullable=False),
        sa.Column("start", sa.Float(), nullable=False),
        sa.Column("end", sa.Float(), nullable=True),
        sa.Column("ended_by", sa.String(length=32), nullable=False),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_index("ix_allocations_job", "allocations", ["job"])
    op.create_index("ix_allocations_user", "allocations", ["user"])
    op.create_index("ix_allocations_queue", "allocations", ["queue"])
    op.create_index("ix_allocations_start", "allocations", ["start"])
    op.create_index("ix_allocations_end", "allocations", ["end"])
    op.create_index("ix_allocations_open", "allocations", ["job_id", "task", "end"])


def downgrade() -> None:
    op.drop_table("allocations")
