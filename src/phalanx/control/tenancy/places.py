"""Where a server keeps its own data and where its tasks run, per identity mode.

- The data dir (database, admin token, the Ray agents' key, the records of task
  processes) is the server's alone: created with mode 0700, and with per-user identities
  an existing one that lets anyone else in is closed (0700) at start, since SQLite
  creates its files readable by all.
- Task directories live in the tasks dir. Without per-user identities it is
  ``DATA_DIR/tasks``, as it always was: every task runs as the server and can read the
  data dir anyway. With per-user identities a task must reach its own directory by its
  path but must not enter the data dir, so the default is ``DATA_DIR-tasks``, beside
  it. Any tasks dir must then lie outside the data dir (and the data dir outside it),
  and every directory above it must let other users pass (``o+x``); a server refuses to
  start otherwise, naming ``--tasks-dir`` and the fix.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Final

from phalanx.domain.errors import InvalidInput
from phalanx.executors.identity import unreachable_by_others
from phalanx.tenantfs import passage

log = logging.getLogger(__name__)

TASKS_FLAG: Final = "--tasks-dir"
WORKSPACE_FLAG: Final = "--workspace"
#: The mode of the data dir: the server's alone.
DATA_DIR_MODE: Final = 0o700


def default_tasks_dir(data_dir: Path, *, per_user: bool) -> Path:
    """``DATA_DIR/tasks``, or ``DATA_DIR-tasks`` beside it with per-user identities."""
    if per_user:
        return data_dir.with_name(f"{data_dir.name}-tasks")
    return data_dir / "tasks"


def check_tasks_dir(tasks_dir: Path, data_dir: Path) -> None:
    """Refuse a tasks dir that tasks of other uids could not reach, or that would let
    them near the data dir: ``InvalidInput`` naming ``--tasks-dir`` and the fix."""
    _check_place(tasks_dir, data_dir, flag=TASKS_FLAG, what="tasks dir", suffix="tasks")


def check_workspace_dir(workspace: Path, data_dir: Path) -> None:
    """Refuse a local workspace that steps running as their users' own uids could not
    reach (they write their outputs there), or that lies in the data dir or holds it:
    ``InvalidInput`` naming ``--workspace`` and the fix."""
    _check_place(workspace, data_dir, flag=WORKSPACE_FLAG, what="workspace", suffix="workspace")


def _check_place(place: Path, data_dir: Path, *, flag: str, what: str, suffix: str) -> None:
    """The checks of a directory that tasks of other uids use, beside the data dir."""
    path, data = place.absolute(), data_dir.absolute()
    beside = data.with_name(f"{data.name}-{suffix}")
    if path.is_relative_to(data) or data.is_relative_to(path):
        raise InvalidInput(
            f"the {what} {path} and the data dir {data} are one inside the other; tasks "
            "run as their users' own uids and must reach their directories, never the "
            "data dir",
            field=flag,
            fix=f"give a {what} beside the data dir, e.g. {flag} {beside}",
        )
    why = unreachable_by_others(path.parent)
    if why is not None:
        raise InvalidInput(
            f"tasks run as their users' own uids and must reach the {what} {path}, but {why}",
            field=flag,
            fix=f"give a {what} whose parent directories every user may pass (o+x), e.g. "
            f"{flag} /var/lib/phalanx-{suffix} (the default of a server run as root)",
        )


def open_tasks_dir(tasks_dir: Path) -> None:
    """Make the tasks dir a passage (root's, 0711: see ``executors.taskdirs``), or
    ``InvalidInput`` naming ``--tasks-dir`` when it cannot be (a link, another owner)."""
    try:
        passage(tasks_dir)
    except OSError as error:
        raise InvalidInput(
            f"{tasks_dir} cannot be made the tasks dir: {error.strerror or error}",
            field=TASKS_FLAG,
            fix="give a directory of the server's own (not a link), or a path that does "
            "not exist yet",
        ) from None
