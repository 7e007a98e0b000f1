"""token ids are never handed out again

SQLite gives a new row the largest id in use plus one, so revoking the newest token
(deleting its row) handed its id to the next token made. The tokens table is rebuilt
with AUTOINCREMENT: from this revision on, an id once given is never given again,
across restarts. PostgreSQL's sequence never reused one: nothing to do there. (An id
revoked before this revision, while it was the newest, left no trace to rebuild from.)

Revision ID: 0011
Revises: 0010
"""

from __future__ import annotations

from alembic import op

revision = "0011"
down_revision = "0010"
branch_labels = None
depends_on = None


# A batch rebuild copies the table and drops the old one: safe here, as no table refers
# to tokens (the drop cascades to nothing; see 0006 for a table where it would).
def upgrade() -> None:
    if op.get_bind().dialect.name != "sqlite":
        return
    with op.batch_alter_table(
        "tokens", recreate="always", table_kwargs={"sqlite_autoincrement": True}
    ):
        pass


def downgrade() -> None:
    if op.get_bind().dialect.name != "sqlite":
        return
    with op.batch_alter_table(
        "tokens", recreate="always", table_kwargs={"sqlite_autoincrement": False}
    ):
        pass
