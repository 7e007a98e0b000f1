"""rollouts of inference services

A rollout moves a predictor's traffic to another model version in steps; each is a
``rollouts`` row with its steps, thresholds, phase and history.

Revision ID: 0016
Revises: 0015
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0016"
down_revision = "0015"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "rollouts",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("service", sa.String(length=63), nullable=False),
        sa.Column("predictor", sa.String(length=63), nullable=False),
        sa.Column("canary", sa.String(length=63), nullable=False),
        sa.Column("from_version", sa.String(length=400), nullable=False),
        sa.Column("to_version", sa.String(length=400), nullable=False),
        sa.Column("base_traffic", sa.Integer(), nullable=False),
        sa.Column("steps", sa.JSON(), nullable=False),
        sa.Column("step", sa.Integer(), nullable=False),
        sa.Column("phase", sa.String(length=16), nullable=False),
        sa.Column("reason", sa.Text(), nullable=False),
        sa.Column("user", sa.String(length=253), nullable=False),
        sa.Column("settings", sa.JSON(), nullable=False),
        sa.Column("history", sa.JSON(), nullable=False),
        sa.Column("started_at", sa.Float(), nullable=False),
        sa.Column("step_started_at", sa.Float(), nullable=False),
        sa.Column("ready_at", sa.Float(), nullable=True),
        sa.Column("finished_at", sa.Float(), nullable=True),
        sa.Column("abort_by", sa.String(length=253), nullable=True),
        sa.PrimaryKeyConstraint("id"),
    )
    with op.batch_alter_table("rollouts", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_rollouts_service"), ["service"], unique=False)


def downgrade() -> None:
    with op.batch_alter_table("rollouts", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_rollouts_service"))
    op.drop_table("rollouts")
