"""what gateways in their own processes report

Each ``phalanx gateway`` rewrites, every second, one ``gateway_reports`` row per
predictor it routes to: its demand and held requests (for the autoscaler) and its
answers counted since it started (for rollouts).

Revision ID: 0017
Revises: 0016
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0017"
down_revision = "0016"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "gateway_reports",
        sa.Column("gateway", sa.String(length=100), nullable=False),
        sa.Column("service", sa.String(length=63), nullable=False),
        sa.Column("predictor", sa.String(length=63), nullable=False),
        sa.Column("demand", sa.Float(), nullable=False),
        sa.Column("held", sa.Integer(), nullable=False),
        sa.Column("requests", sa.BigInteger(), nullable=False),
        sa.Column("errors", sa.BigInteger(), nullable=False),
        sa.Column("buckets", sa.JSON(), nullable=False),
        sa.Column("updated_at", sa.Float(), nullable=False),
        sa.PrimaryKeyConstraint("gateway", "service", "predictor"),
    )
    with op.batch_alter_table("gateway_reports", schema=None) as batch_op:
        batch_op.create_index(
            batch_op.f("ix_gateway_reports_updated_at"), ["updated_at"], unique=False
        )


def downgrade() -> None:
    with op.batch_alter_table("gateway_reports", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_gateway_reports_updated_at"))
    op.drop_table("gateway_reports")
