"""The data dir is private to the server's user: mode 0700, owned by that user.

It holds the admin and metrics tokens, the SQLite database and every task's logs, so
whoever else can read it can become an admin, and whoever else can write it could plant
files the server then trusts.

Guarantees of ``prepare_data_dir``, which runs before anything is read or written there:

- a missing data dir is created with mode 0700, whatever the umask (its missing parents
  get the umask's usual mode);
- an existing one owned by the server's user and open to others only for reading or
  entering (such as 0755) is tightened to 0700, with a warning;
- one that others could write into (group or world write, such as 0777) is tightened
  when it is empty and refused otherwise: what is already in it cannot be trusted;
- one owned by another user, or that is not a directory, is refused.

A refusal is an ``InvalidInput`` naming ``--data-dir`` and the fix; nothing is changed.
"""

from __future__ import annotations

import logging
import os
import stat
from pathlib import Path
from typing import Final

from phalanx.domain.errors import InvalidInput

log = logging.getLogger(__name__)

#: The mode of a data dir.
PRIVATE: Final = 0o700
#: Permission bits that make a data dir loose: anything for its group or other users.
_LOOSE: Final = 0o077
_WRITABLE_BY_OTHERS: Final = 0o022
_FIELD: Final = "--data-dir"


def prepare_data_dir(path: Path) -> None:
    """Create ``path`` private, or make sure an existing one is (see the module)."""
    try:
        info = path.stat()
    except FileNotFoundError:
        path.mkdir(parents=True, mode=PRIVATE)
        path.chmod(PRIVATE)  # mkdir's mode passes through the umask
        return
    if not stat.S_ISDIR(info.st_mode):
        raise InvalidInput(
            f"{path} is not a directory", field=_FIELD, fix="give a directory, or a new path"
        )
    user = os.geteuid()
    if info.st_uid != user:
        raise InvalidInput(
            f"{path} belongs to uid {info.st_uid}, not to the server's user (uid {user}); "
            "its owner could read the tokens and the database",
            field=_FIELD,
            fix=f"chown -R {user} {path}, or choose a directory of the server's user",
        )
    mode = stat.S_IMODE(info.st_mode)
    if not mode & _LOOSE:
        return
    if mode & _WRITABLE_BY_OTHERS and any(path.iterdir()):
        raise InvalidInput(
            f"{path} (mode {mode:04o}) could be written by other users, so its contents "
            "cannot be trusted",
            field=_FIELD,
            fix=f"check what is in it, then chmod 700 {path}; or choose a new directory",
        )
    try:
        path.chmod(PRIVATE)
    except OSError as error:
        raise InvalidInput(
            f"{path} (mode {mode:04o}) is open to other users and cannot be made private: "
            f"{error.strerror or error}",
            field=_FIELD,
            fix=f"chmod 700 {path}, or choose another directory",
        ) from None
    log.warning(
        "data dir %s was mode %04o (open to other users); made it 0700. Whoever could "
        "read it may know the tokens in it: revoke them",
        path,
        mode,
    )
