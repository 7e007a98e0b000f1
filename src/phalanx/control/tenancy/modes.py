"""Who tasks run as: the three identity modes, the uid range, and what is said at start."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from enum import StrEnum
from typing import Final

from phalanx.domain.errors import InvalidInput

#: The option that accepts one identity for every user.
SHARED_FLAG: Final = "--shared-identity"
#: The option that sets the range of allocated uids.
UIDS_FLAG: Final = "--task-uids"
#: Below this, uids belong to the system's own accounts (Debian, Fedora, systemd agree).
FIRST_REGULAR_UID: Final = 1000
#: The largest uid any allocation may reach: signed 32 bits, and never -1 as unsigned.
LAST_UID: Final = 2**31 - 2


class IdentityMode(StrEnum):
    """Whose uid a user's tasks run as."""

    PER_USER = "per-user"  # the server is root: each user's tasks run as a uid of their own
    SINGLE_USER = "single-user"  # not root: every task runs as the server, so one user only
    SHARED = "shared"  # --shared-identity: every user's tasks run as the server, accepted


def decide(*, root: bool, shared: bool) -> IdentityMode:
    """The mode of a server that runs as root or not, with ``--shared-identity`` or not."""
    if shared:
        return IdentityMode.SHARED
    return IdentityMode.PER_USER if root else IdentityMode.SINGLE_USER


@dataclass(frozen=True, slots=True, kw_only=True)
class UidRange:
    """The uids (and equal gids) a server allocates to users, ``first`` to ``last``."""

    first: int
    last: int

    def __post_init__(self) -> None:
        if not FIRST_REGULAR_UID <= self.first <= self.last <= LAST_UID:
            raise InvalidInput(
                f"{self} is not a range of regular uids",
                field=UIDS_FLAG,
                fix=f"give FIRST-LAST with {FIRST_REGULAR_UID} <= FIRST <= LAST <= {LAST_UID}, "
                "e.g. 70000-79999",
            )

    @classmethod
    def parse(cls, text: str) -> UidRange:
        """``"FIRST-LAST"`` as a range; ``InvalidInput`` naming ``--task-uids`` otherwise."""
        first, _, last = text.strip().partition("-")
        if not (first.isdigit() and last.isdigit()):
            raise InvalidInput(
                f"{text!r} is not FIRST-LAST", field=UIDS_FLAG, fix="give e.g. 70000-79999"
            )
        return cls(first=int(first), last=int(last))

    def __str__(self) -> str:
        return f"{self.first}-{self.last}"

    def __len__(self) -> int:
        return self.last - self.first + 1


#: The default range: above 65535 (systemd's dynamic users end at 65519, nobody is 65534)
#: and below 100000, where /etc/subuid ranges for user namespaces begin by default.
DEFAULT_TASK_UIDS: Final = UidRange(first=70000, last=79999)


def announcement(mode: IdentityMode, *, server_uid: int, users: int) -> tuple[int, str]:
    """The log level and line a server says at start about who its tasks run as."""
    match mode:
        case IdentityMode.PER_USER:
            return logging.INFO, (
                "per-user identities: each user's tasks run as a uid of their own (an "
                "account named for them, or one allocated from the server's range); tasks "
                "cannot read the data dir, other users' files or signal their processes"
            )
        case IdentityMode.SINGLE_USER:
            return logging.WARNING, (
                f"single-user mode: phalanx runs as uid {server_uid}, not root, so every task "
                "runs as that uid and could read the data dir (the database, tokens) and "
                "every other task's files; creating a second user is refused. Fix: run "
                "phalanx up as root to give each user a uid of their own, or start it with "
                f"{SHARED_FLAG} to accept one identity for all users"
                + (f" ({users} users exist already and share it)" if users > 1 else "")
            )
        case IdentityMode.SHARED:
            return logging.WARNING, (
                f"shared identity ({SHARED_FLAG}): every user's tasks run as uid "
                f"{server_uid}, the server's own, and can read the data dir (the database, "
                "tokens) and each other's files. Fix: start phalanx up as root without "
                f"{SHARED_FLAG} to give each user a uid of their own"
            )


def single_user_refusal(server_uid: int) -> str:
    """Why a server in single-user mode makes no second user."""
    return (
        f"single-user mode: this server runs as uid {server_uid}, not root, so a second "
        "user's tasks would run as the same uid as the first's and could read their files "
        "and the server's data dir"
    )


SINGLE_USER_FIX: Final = (
    "run phalanx up as root (each user then gets a uid of their own), or start it with "
    f"{SHARED_FLAG} to accept that all users share one identity"
)
