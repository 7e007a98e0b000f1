"""inference services and their replicas

An Inference document is a ``services`` row; each replica of one of its predictors is a
job of its own, recorded in ``service_replicas`` with its port and readiness.

Revision ID: 0015
Revises: 0014
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0015"
down_revision = "0014"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "services",
        sa.Column("name", sa.String(length=63), nullable=False),
        sa.Column("user", sa.String(length=253), nullable=False),
        sa.Column("document", sa.JSON(), nullable=False),
        sa.Column("created_at", sa.Float(), nullable=False),
        sa.Column("updated_at", sa.Float(), nullable=False),
        sa.Column("replicas_made", sa.Integer(), nullable=False),
        sa.PrimaryKeyConstraint("name"),
    )
    with op.batch_alter_table("services", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_services_user"), ["user"], unique=False)
    op.create_table(
        "service_replicas",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("service", sa.String(length=63), nullable=False),
        sa.Column("predictor", sa.String(length=63), nullable=False),
        sa.Column("job", sa.String(length=253), nullable=False),
        sa.Column("port", sa.Integer(), nullable=False),
        sa.Column("created_at", sa.Float(), nullable=False),
        sa.Column("ready", sa.Boolean(), nullable=False),
        sa.Column("url", sa.String(length=300), nullable=True),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("job"),
    )
    with op.batch_alter_table("service_replicas", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_service_replicas_service"), ["service"], unique=False)


def downgrade() -> None:
    with op.batch_alter_table("service_replicas", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_service_replicas_service"))
    op.drop_table("service_replicas")
    with op.batch_alter_table("services", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_services_user"))
    op.drop_table("services")
