"""right-sizing experiments and their trials

A ``tunings`` row is one Tuning (its document, owner, phase, and how many trials it
made); a ``tuning_trials`` row one trial: its candidate, replica job and node, state,
measurements, cost and the objective's value.

Revision ID: 0022
Revises: 0021
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0022"
down_revision = "0021"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "tunings",
        sa.Column("name", sa.String(length=63), nullable=False),
        sa.Column("user", sa.String(length=253), nullable=False),
        sa.Column("document", sa.JSON(), nullable=False),
        sa.Column("phase", sa.String(length=16), nullable=False),
        sa.Column("message", sa.Text(), nullable=False),
        sa.Column("trials_made", sa.Integer(), nullable=False),
        sa.Column("created_at", sa.Float(), nullable=False),
        sa.Column("updated_at", sa.Float(), nullable=False),
        sa.Column("ended_at", sa.Float(), nullable=True),
        sa.PrimaryKeyConstraint("name"),
    )
    op.create_index("ix_tunings_user", "tunings", ["user"])
    op.create_table(
        "tuning_trials",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("tuning", sa.String(length=63), nullable=False),
        sa.Column("number", sa.Integer(), nullable=False),
        sa.Column("params", sa.JSON(), nullable=False),
        sa.Column("state", sa.String(length=16), nullable=False),
        sa.Column("message", sa.Text(), nullable=False),
        sa.Column("job", sa.String(length=253), nullable=True),
        sa.Column("node", sa.String(length=253), nullable=True),
        sa.Column("metrics", sa.JSON(), nullable=False),
        sa.Column("cost", sa.Float(), nullable=True),
        sa.Column("value", sa.Float(), nullable=True),
        sa.Column("feasible", sa.Boolean(), nullable=True),
        sa.Column("created_at", sa.Float(), nullable=False),
        sa.Column("ended_at", sa.Float(), nullable=True),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("tuning", "number"),
    )
    op.create_index("ix_tuning_trials_tuning", "tuning_trials", ["tuning"])


def downgrade() -> None:
    op.drop_table("tuning_trials")
    op.drop_table("tunings")
