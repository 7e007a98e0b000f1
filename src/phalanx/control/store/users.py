"""Users, their tokens and their task uids in the store: every query of ``UserRow``,
``TokenRow`` and ``TaskUidRow``.

A token is stored as its digest alone (``auth``); a uid once given to a user is never
given again (``TaskUidRow`` keeps it after the user is gone).
"""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from phalanx.control.store.models import TaskUidRow, TokenRow, UserRow


def user(session: Session, name: str) -> UserRow | None:
    """The user called ``name``, if any."""
    return session.scalar(select(UserRow).where(UserRow.name == name))


def users(session: Session) -> Sequence[UserRow]:
    """Every user, by name."""
    return session.scalars(select(UserRow).order_by(UserRow.name)).all()


def default_queues(session: Session, names: Sequence[str]) -> dict[str, str]:
    """The default queue of each of the users ``names`` that has one, by user name: one
    query (a submission batch's)."""
    query = select(UserRow.name, UserRow.default_queue).where(
        UserRow.name.in_(list(names)), UserRow.default_queue.is_not(None)
    )
    return {name: queue for name, queue in session.execute(query) if queue is not None}


def count(session: Session) -> int:
    """How many users there are."""
    return int(session.scalar(select(func.count(UserRow.id))) or 0)


def any_user(session: Session) -> bool:
    """Whether there is any user at all."""
    return session.scalar(select(UserRow.id).limit(1)) is not None


def holder_of_uid(session: Session, uid: int) -> str | None:
    """The name of the user whose tasks run as ``uid``, if any."""
    return session.scalar(select(UserRow.name).where(UserRow.uid == uid))


def uids_taken(session: Session, first: int) -> set[int]:
    """Every uid from ``first`` up ever given to a user, and every uid a user has now."""
    given = set(session.scalars(select(TaskUidRow.uid).where(TaskUidRow.uid >= first)))
    held = session.scalars(select(UserRow.uid).where(UserRow.uid.is_not(None)))
    return given | {uid for uid in held if uid is not None}


def without_identity(session: Session) -> list[UserRow]:
    """The users with no uid yet."""
    return list(session.scalars(select(UserRow).where(UserRow.uid.is_(None))))


def token(session: Session, digest: str) -> TokenRow | None:
    """The token whose digest is ``digest``, if any."""
    return session.scalar(select(TokenRow).where(TokenRow.digest == digest))


def tokens(session: Session, user_id: int) -> Sequence[TokenRow]:
    """User ``user_id``'s tokens, oldest first."""
    return session.scalars(
        select(TokenRow).where(TokenRow.user_id == user_id).order_by(TokenRow.id)
    ).all()


def another_token_of_role(session: Session, role: str, token_id: int, now: float) -> bool:
    """Whether a user of ``role`` holds a token valid at ``now`` other than ``token_id``."""
    query = (
        select(func.count())
        .select_from(TokenRow)
        .join(UserRow, TokenRow.user_id == UserRow.id)
        .where(
            UserRow.role == role,
            TokenRow.id != token_id,
            (TokenRow.expires_at.is_(None)) | (TokenRow.expires_at > now),
        )
    )
    return bool(session.scalar(query))
