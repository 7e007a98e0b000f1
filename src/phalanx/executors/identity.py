"""The Unix identity a task runs as, and whether a path is within that identity's reach.

A ``TaskIdentity`` is never root: its uid, its gid and its supplementary groups are all
non-zero, so a task that has one can neither read what only root may read nor signal
processes of other uids. A task started with one has exactly these groups: the
server's own supplementary groups are dropped (``popen_options``). Whoever makes an
identity decides where it comes from (``phalanx.control.tenancy``: an existing account,
or a uid allocated for the user).
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass
from pathlib import Path

from phalanx.domain.errors import InvalidInput
from phalanx.tenantfs import Reader


@dataclass(frozen=True, slots=True, kw_only=True)
class TaskIdentity:
    """A uid, gid and supplementary groups to run a task as, none of them 0.

    ``name`` is the task's ``USER`` and ``LOGNAME``; ``home`` its ``HOME`` (empty: the
    task's working directory, for a uid with no home of its own).
    """

    uid: int
    gid: int
    name: str
    groups: tuple[int, ...] = ()
    home: str = ""

    def __post_init__(self) -> None:
        for field, value in (("uid", self.uid), ("gid", self.gid)):
            if not 0 < value < 2**32 - 1:
                raise InvalidInput(
                    f"{value} cannot run a task: 0 is root's and the id must fit 32 bits",
                    field=field,
                    fix="give a non-root account or an allocated uid",
                )
        if any(not 0 < group < 2**32 - 1 for group in self.groups):
            raise InvalidInput(
                f"{list(self.groups)} holds group 0 (root's) or an id out of range",
                field="groups",
                fix="map an account that is not in the root group",
            )
        if not self.name or "\0" in self.name or "=" in self.name:
            raise InvalidInput(
                f"{self.name!r} cannot be USER", field="name", fix="give the user's name"
            )

    def popen_options(self) -> dict[str, int | list[int]]:
        """``subprocess.Popen``'s ``user``, ``group`` and ``extra_groups`` for this identity
        (``extra_groups`` always given: the server's own groups never reach the task)."""
        return {"user": self.uid, "group": self.gid, "extra_groups": list(self.groups)}

    def setpriv_argv(self, setpriv: str) -> list[str]:
        """The argv prefix that runs a program as this identity through util-linux's
        ``setpriv`` (run as root): the same uid, gid and groups as ``popen_options``, the
        saved ids too, and no inheritable capabilities. It lets the starter ``vfork``,
        which a uid switch in the child would rule out."""
        groups = f"--groups={','.join(map(str, self.groups))}" if self.groups else "--clear-groups"
        return [
            setpriv, f"--reuid={self.uid}", f"--regid={self.gid}", groups, "--inh-caps=-all", "--",
        ]  # fmt: skip

    def reader(self) -> Reader:
        """This identity as ``tenantfs`` reads on its behalf: its uid, gid and groups."""
        return Reader(uid=self.uid, gids=(self.gid, *self.groups))

    def env(self, workdir: Path) -> dict[str, str]:
        """``HOME``, ``USER`` and ``LOGNAME`` for a task in ``workdir``."""
        return {"HOME": self.home or str(workdir), "USER": self.name, "LOGNAME": self.name}


def unreachable_by_others(path: Path) -> str | None:
    """Why a uid that owns nothing on the way and shares no group with the owners cannot
    reach ``path``, or None when it can (see ``unreachable``)."""
    return unreachable(path, None)


def unreachable(path: Path, identity: TaskIdentity | None) -> str | None:
    """Why ``identity`` (None: any other user) cannot reach ``path``, or None when it can.

    Every directory from ``/`` down to ``path``'s parent must let it pass (``x`` for its
    owner, group or others, whichever applies to it), and so must ``path`` itself when it
    is a directory or a program. Symbolic links are followed, and the directories of the
    link itself checked too. A path that does not exist is checked up to its deepest
    existing directory. Mode bits only: an ACL that grants more is not seen.
    """
    seen: set[Path] = set()
    for candidate in (path.absolute(), path.resolve()):
        for directory in reversed(candidate.parents):
            if directory in seen:
                continue
            seen.add(directory)
            why = _closed(directory, identity)
            if why:
                return why
    return _closed(path, identity, last=True)


def _closed(path: Path, identity: TaskIdentity | None, *, last: bool = False) -> str | None:
    try:
        status = os.stat(path)
    except FileNotFoundError:
        return None
    except OSError as error:
        return f"{path} cannot be examined: {error.strerror}"
    if identity is not None and status.st_uid == identity.uid:
        allowed = status.st_mode & stat.S_IXUSR
    elif identity is not None and status.st_gid in (identity.gid, *identity.groups):
        allowed = status.st_mode & stat.S_IXGRP
    else:
        allowed = status.st_mode & stat.S_IXOTH
    if allowed:
        return None
    who = "other users" if identity is None else f"uid {identity.uid}"
    mode = stat.S_IMODE(status.st_mode)
    if last and not stat.S_ISDIR(status.st_mode):
        return f"{path} cannot be run by {who} (mode {mode:04o})"
    return f"{path} does not let {who} pass (mode {mode:04o})"
