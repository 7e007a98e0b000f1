"""runs: the run a run resumes

A nullable column: the run whose done steps ``phalanx pipeline resume`` reused.

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


def upgrade() -> None:
    op.add_column("runs", sa.Column("resumed_from", sa.String(128), nullable=True))


def downgrade() -> None:
    op.drop_column("runs", "resumed_from")
