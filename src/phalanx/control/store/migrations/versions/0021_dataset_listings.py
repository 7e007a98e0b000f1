"""dataset listings by digest

A listing moves from its dataset's row to a ``dataset_listings`` row of its own, by
digest: a job is pinned to a digest, and its tasks may start (on a Ray node, which
copies the dataset there and then) after the dataset was listed again, so the listing
a pin names is kept while a job not yet ended names it. The ``datasets.listing``
column goes; each dataset's last listing is carried over, and every dataset is listed
again: a digest now names the source as well as its files (``listing_digest``).

Revision ID: 0021
Revises: 0020
"""

from __future__ import annotations

import time

import sqlalchemy as sa
from alembic import op

revision = "0021"
down_revision = "0020"
branch_labels = None
depends_on = None


def upgrade() -> None:
    listings = op.create_table(
        "dataset_listings",
        sa.Column("digest", sa.String(length=71), nullable=False),
        sa.Column("files", sa.Integer(), nullable=False),
        sa.Column("size", sa.BigInteger(), nullable=False),
        sa.Column("listing", sa.JSON(), nullable=False),
        sa.Column("created_at", sa.Float(), nullable=False),
        sa.PrimaryKeyConstraint("digest"),
    )
    datasets = sa.table(
        "datasets",
        sa.column("digest", sa.String()),
        sa.column("files", sa.Integer()),
        sa.column("size", sa.BigInteger()),
        sa.column("listing", sa.JSON()),
        sa.column("wanted", sa.Integer()),
    )
    found = op.get_bind().execute(
        sa.select(datasets.c.digest, datasets.c.files, datasets.c.size, datasets.c.listing).where(
            datasets.c.digest.is_not(None)
        )
    )
    carried = {
        digest: {"digest": digest, "files": files, "size": size, "listing": listing}
        for digest, files, size, listing in found
    }
    if carried:
        now = time.time()
        op.bulk_insert(listings, [{**row, "created_at": now} for row in carried.values()])
    op.execute(datasets.update().values(wanted=datasets.c.wanted + 1))
    with op.batch_alter_table("datasets") as batch:
        batch.drop_column("listing")


def downgrade() -> None:
    with op.batch_alter_table("datasets") as batch:
        batch.add_column(sa.Column("listing", sa.JSON(), nullable=False, server_default="[]"))
    op.drop_table("dataset_listings")
