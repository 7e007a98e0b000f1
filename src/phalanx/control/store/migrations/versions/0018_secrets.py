"""users' secrets

A ``secrets`` row is one user's secret: its key names in clear, its values sealed by
the server's key (``DATA_DIR/secrets.key``), their total size, and when it was made and
last replaced. ``(user, name)`` is its identity.

Revision ID: 0018
Revises: 0017
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0018"
down_revision = "0017"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "secrets",
        sa.Column("user", sa.String(length=253), nullable=False),
        sa.Column("name", sa.String(length=253), nullable=False),
        sa.Column("keys", sa.JSON(), nullable=False),
        sa.Column("sealed", sa.LargeBinary(), nullable=False),
        sa.Column("size", sa.Integer(), nullable=False),
        sa.Column("created_at", sa.Float(), nullable=False),
        sa.Column("updated_at", sa.Float(), nullable=False),
        sa.PrimaryKeyConstraint("user", "name"),
    )


def downgrade() -> None:
    op.drop_table("secrets")
