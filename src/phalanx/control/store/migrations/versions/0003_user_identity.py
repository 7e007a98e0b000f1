"""users carry the Unix identity their tasks run as

On a server that runs tasks per user (as root), each user's tasks run under a uid of
their own: an existing account (``account``) or a uid allocated from the server's range.
Allocated uids are also kept in ``task_uids``, which outlives the users, so that a uid is
never handed to a second user.

Revision ID: 0003
Revises: 0002
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("users", schema=None) as batch_op:
        batch_op.add_column(sa.Column("uid", sa.Integer(), nullable=True))
        batch_op.add_column(sa.Column("gid", sa.Integer(), nullable=True))
        batch_op.add_column(sa.Column("account", sa.String(length=32), nullable=True))
        batch_op.create_index(batch_op.f("ix_users_uid"), ["uid"], unique=True)
    op.create_table(
        "task_uids",
        sa.Column("uid", sa.Integer(), autoincrement=False, nullable=False),
        sa.Column("user", sa.String(length=253), nullable=False),
        sa.Column("created_at", sa.Float(), nullable=False),
        sa.PrimaryKeyConstraint("uid"),
    )


def downgrade() -> None:
    op.drop_table("task_uids")
    with op.batch_alter_table("users", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_users_uid"))
        batch_op.drop_column("account")
        batch_op.drop_column("gid")
        batch_op.drop_column("uid")
