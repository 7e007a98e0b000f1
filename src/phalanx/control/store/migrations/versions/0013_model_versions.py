"""model versions, and which jobs still owe theirs

A job whose roles declare a model output is ``model_intake = 'pending'`` until it
succeeds and the model is copied into the model store as its next version (a row of
``model_versions``), or the copy is refused (``failed``). Jobs before this revision
declare none (NULL).

Revision ID: 0013
Revises: 0012
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0013"
down_revision = "0012"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("jobs", schema=None) as batch_op:
        batch_op.add_column(sa.Column("model_intake", sa.String(length=16), nullable=True))
        batch_op.create_index(batch_op.f("ix_jobs_model_intake"), ["model_intake"], unique=False)
    op.create_table(
        "model_versions",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("name", sa.String(length=63), nullable=False),
        sa.Column("version", sa.Integer(), nullable=False),
        sa.Column("digest", sa.String(length=71), nullable=False),
        sa.Column("size", sa.BigInteger(), nullable=False),
        sa.Column("files", sa.Integer(), nullable=False),
        sa.Column("user", sa.String(length=253), nullable=False),
        sa.Column("created_at", sa.Float(), nullable=False),
        sa.Column("job", sa.String(length=253), nullable=False),
        sa.Column("role", sa.String(length=63), nullable=False),
        sa.Column("run_id", sa.String(length=128), nullable=True),
        sa.Column("step", sa.String(length=300), nullable=True),
        sa.Column("lineage", sa.JSON(), nullable=False),
        sa.Column("deleted_at", sa.Float(), nullable=True),
        sa.Column("image_phase", sa.String(length=16), nullable=True),
        sa.Column("image", sa.String(length=255), nullable=True),
        sa.Column("image_message", sa.Text(), nullable=False),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("name", "version"),
    )
    with op.batch_alter_table("model_versions", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_model_versions_name"), ["name"], unique=False)
        batch_op.create_index(batch_op.f("ix_model_versions_digest"), ["digest"], unique=False)
        batch_op.create_index(batch_op.f("ix_model_versions_user"), ["user"], unique=False)
        batch_op.create_index(
            batch_op.f("ix_model_versions_image_phase"), ["image_phase"], unique=False
        )


def downgrade() -> None:
    op.drop_table("model_versions")
    with op.batch_alter_table("jobs", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_jobs_model_intake"))
        batch_op.drop_column("model_intake")
