"""Cards out of scheduling, in the store: every query of ``CardCordonRow``.

A card is cordoned by its health (the telemetry controller, when a reading fails a
health rule) or by an admin, and stays so until an uncordon deletes its row: a restart
of the server keeps it out. One row per (node, card): cordoning a card that already is
keeps the first reason and time.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Literal

from sqlalchemy import delete, func, select
from sqlalchemy.orm import Session

from phalanx.control.store.models import CardCordonRow

#: Who took a card out: its health readings, or an admin.
CordonSource = Literal["health", "admin"]
#: The table's version: its row count and newest cordon time (None: empty).
Version = tuple[int, float | None]


@dataclass(frozen=True, slots=True, kw_only=True)
class CardCordon:
    """One card out of scheduling, and why."""

    node: str
    gpu: int
    uuid: str
    reason: str
    source: CordonSource
    since: float


def cordons(session: Session) -> list[CardCordon]:
    """Every card out of scheduling, by node then card."""
    rows = session.scalars(select(CardCordonRow).order_by(CardCordonRow.node, CardCordonRow.gpu))
    return [_value(row) for row in rows]


def cordon_of(session: Session, node: str, gpu: int) -> CardCordon | None:
    """Card ``gpu`` of ``node``'s cordon, if it is out of scheduling."""
    session.flush()
    row = session.get(CardCordonRow, (node, gpu))
    return None if row is None else _value(row)


def _value(row: CardCordonRow) -> CardCordon:
    source: CordonSource = "admin" if row.source == "admin" else "health"
    return CardCordon(
        node=row.node, gpu=row.gpu, uuid=row.uuid, reason=row.reason, source=source, since=row.since
    )


def by_node(session: Session) -> Mapping[str, frozenset[int]]:
    """The cordoned cards of each node that has any."""
    held: dict[str, set[int]] = {}
    for node, gpu in session.execute(select(CardCordonRow.node, CardCordonRow.gpu)):
        held.setdefault(node, set()).add(gpu)
    return {node: frozenset(gpus) for node, gpus in held.items()}


def version(session: Session) -> Version:
    """The table's version: it moves with every cordon and uncordon."""
    seen = session.execute(select(func.count(), func.max(CardCordonRow.since))).one()
    return int(seen[0]), seen[1]


def cordon(session: Session, card: CardCordon) -> bool:
    """Take the card out of scheduling; False when it already was (kept as it was)."""
    if session.get(CardCordonRow, (card.node, card.gpu)) is not None:
        return False
    session.add(CardCordonRow(**asdict(card)))
    return True


def uncordon(session: Session, node: str, gpus: Sequence[int] | None = None) -> int:
    """Bring ``gpus`` of ``node`` (every cordoned card of it: None) back; how many were out."""
    query = delete(CardCordonRow).where(CardCordonRow.node == node)
    if gpus is not None:
        query = query.where(CardCordonRow.gpu.in_(list(gpus)))
    return int(session.execute(query).rowcount)  # type: ignore[attr-defined]
