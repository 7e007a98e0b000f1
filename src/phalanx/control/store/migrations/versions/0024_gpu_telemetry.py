"""GPU telemetry: cards out of scheduling, and what each job did with its cards

A ``card_cordons`` row takes one card of one node out of scheduling (its health failed,
or an admin said so) until an uncordon deletes it. A ``gpu_use`` row is one job's use
of its cards over one window (a minute): samples, mean and peak utilisation, mean and
peak memory; rows go with their job.

Revision ID: 0024
Revises: 0023
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0024"
down_revision = "0023"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "card_cordons",
        sa.Column("node", sa.String(length=253), nullable=False),
        sa.Column("gpu", sa.Integer(), nullable=False),
        sa.Column("uuid", sa.String(length=80), nullable=False),
        sa.Column("reason", sa.Text(), nullable=False),
        sa.Column("source", sa.String(length=16), nullable=False),
        sa.Column("since", sa.Float(), nullable=False),
        sa.PrimaryKeyConstraint("node", "gpu"),
    )
    op.create_table(
        "gpu_use",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("job_id", sa.Integer(), nullable=False),
        sa.Column("start", sa.Float(), nullable=False),
        sa.Column("end", sa.Float(), nullable=False),
        sa.Column("samples", sa.Integer(), nullable=False),
        sa.Column("cards", sa.Integer(), nullable=False),
        sa.Column("utilisation", sa.Float(), nullable=False),
        sa.Column("utilisation_peak", sa.Float(), nullable=False),
        sa.Column("memory", sa.Float(), nullable=False),
        sa.Column("memory_peak", sa.Float(), nullable=False),
        sa.ForeignKeyConstraint(["job_id"], ["jobs.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_index("ix_gpu_use_job", "gpu_use", ["job_id", "start"])


def downgrade() -> None:
    op.drop_table("gpu_use")
    op.drop_table("card_cordons")
