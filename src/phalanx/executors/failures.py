"""Why a task could not start, as a sentence a person can act on.

The local executor reports a task it could not start as ``FAILED_TO_START`` with one of
these sentences in ``TaskEvent.message``, never as LOST (which says its node failed).
Each names the cause and the fix. Two sources:

- ``missing_command``, checked before the spawn: a task runs under a shell wrapper
  (``process.WRAPPER_SCRIPT``), so a program that is not there would otherwise show
  only as the shell's exit code 127. An argv's program is looked up as that shell
  will look it up: in the task's ``PATH``, a relative path from the task's directory.
  A shell builtin is not a program (``[":"]`` is refused): a shell line runs those;
- ``start_failure``, for what a start raised: an ``OSError`` from the kernel (E2BIG,
  ENAMETOOLONG, ENOENT, EACCES, ENOSPC, ...), a ``ValueError`` from ``subprocess`` (a
  NUL character), an ``InvalidInput`` from making the launch, or anything else, which
  is a bug and says so.
"""

from __future__ import annotations

import errno
import os
from collections.abc import Mapping, Sequence
from pathlib import Path

from phalanx.domain.errors import InvalidInput
from phalanx.engine.lifecycle.effects import TaskEvent, TaskEventKind
from phalanx.executors.identity import TaskIdentity, unreachable

#: The sentence for E2BIG: one argument or variable over MAX_ARG_STRLEN (32 pages,
#: 128 KiB), or all of them over ARG_MAX.
TOO_BIG = (
    "the task's command line and environment are over the kernel's limit "
    "(ARG_MAX, about 128 KiB for one variable): pass large values in a file"
)


#: Why a task without an identity does not start on a server that runs tasks per user.
NO_IDENTITY = (
    "phalanx runs every task as its user's own Unix identity here, and this task has "
    "none: give its user one (phalanx users create), or start the server with "
    "--shared-identity"
)

#: Why a task with a container image does not start on an executor without a runtime.
NO_CONTAINERS = (
    "this task names a container image, and this node has no container runtime: install "
    "podman (or docker) on it and restart the server, or remove image from the role to "
    "run the task on the host"
)


def missing_command(
    argv: Sequence[str],
    *,
    env: Mapping[str, str],
    cwd: Path,
    identity: TaskIdentity | None = None,
) -> str | None:
    """Why the program of ``argv`` cannot be run with ``env``'s PATH from ``cwd``, or
    None when it can: it is an executable regular file, which ``identity`` (when the
    task has one) can reach and run by the mode bits on its way."""
    program = argv[0]
    if "/" in program:
        candidates = [cwd / program]
    else:
        # An empty PATH entry is the working directory, as for the shell.
        candidates = [cwd / (entry or ".") / program for entry in env.get("PATH", "").split(":")]
    found = [path for path in candidates if path.is_file()]
    runnable = [path for path in found if os.access(path, os.X_OK)]
    if runnable and identity is not None:
        why = unreachable(runnable[0], identity)
        if why is not None:
            return (
                f"permission denied: the task runs as uid {identity.uid}, and {why}: let "
                "it through (chmod o+x on the directories, o+rx on the program), or put "
                "the program where every user can run it"
            )
    if runnable:
        return None
    if found:
        return (
            f"permission denied: {found[0]} is not executable: make it executable "
            "(chmod +x), or start the command with its interpreter (sh, python, ...)"
        )
    if "/" in program and candidates[0].is_dir():
        return f"{program!r} is a directory, not a program: give the path of the program"
    if "/" in program:
        where = "" if program.startswith("/") else f" (a relative path starts in {cwd})"
        return f"command not found: {program!r} does not exist{where}: give the program's path"
    return (
        f"command not found: {program!r} is in no directory of the task's PATH "
        f"({env.get('PATH', '')}): install it there, give its full path, "
        "or set PATH in the role's env"
    )


def failed_to_start(
    job: str, task: str, node: str, now: float, message: str, *, retriable: bool = True
) -> TaskEvent:
    """The FAILED_TO_START of ``task`` of ``job`` on ``node`` at ``now``, saying why."""
    return TaskEvent(
        kind=TaskEventKind.FAILED_TO_START,
        time=now,
        job=job,
        task=task,
        node=node,
        message=message,
        retriable=retriable,
    )


def stopped_before_start(job: str, task: str, node: str, now: float, why: str) -> TaskEvent:
    """The end of ``task`` of ``job``, stopped at ``now`` while its start waited on
    ``node`` (it never ran): ``why`` it waited."""
    return TaskEvent(
        kind=TaskEventKind.EXITED,
        time=now,
        job=job,
        task=task,
        node=node,
        stopped=True,
        message=f"stopped before it started: {why}",
    )


#: The errnos of a start that a retry of the same task cannot fix.
_LASTING_ERRNOS = frozenset({errno.E2BIG, errno.ENAMETOOLONG, errno.EACCES, errno.EPERM})


def retriable(error: BaseException) -> bool:
    """Whether a retry could start a task whose start raised ``error``: not for a command
    line over the kernel's limit, a path too long, a program its user may not run, or a
    launch the executor refuses (``InvalidInput``, ``ValueError``); yes for the rest (a
    full disk, a program that may be installed by then, a bug)."""
    if isinstance(error, OSError):
        return error.errno not in _LASTING_ERRNOS
    return not isinstance(error, InvalidInput | ValueError)


def start_failure(
    error: BaseException, *, workdir: Path, identity: TaskIdentity | None = None
) -> str:
    """The sentence for ``error``, raised while starting the task in ``workdir`` (as
    ``identity``, when it has one)."""
    if isinstance(error, OSError):
        where = error.filename if error.filename is not None else workdir
        text = error.strerror or str(error)
        match error.errno:
            case errno.E2BIG:
                return TOO_BIG
            case errno.ENAMETOOLONG:
                return (
                    f"{text}: {where}: a file name or path is longer than the file "
                    "system allows: use a data dir with a shorter path"
                )
            case errno.ENOENT:
                return f"{text}: {where}: it must exist on this host"
            case errno.EACCES | errno.EPERM if identity is not None:
                return (
                    f"{text}: {where}: the task runs as uid {identity.uid}, which must be "
                    "able to run its command: every directory on the way to it must let "
                    "other users pass (chmod o+x), and the program must be executable by "
                    "them (chmod o+rx)"
                )
            case errno.EACCES | errno.EPERM:
                return (
                    f"{text}: {where}: the server's user must be able to write the task's "
                    f"directory {workdir} and to run its command"
                )
            case errno.ENOSPC | errno.EDQUOT:
                return f"{text}: {where}: free space on that file system, then retry the job"
            case _:
                return f"{text}: {where}"
    if isinstance(error, InvalidInput):
        return str(error)
    if isinstance(error, ValueError):
        return (
            f"the command or environment cannot be given to a process ({error}): remove "
            "NUL characters from them, and '=' from variable names"
        )
    return f"phalanx could not start it ({type(error).__name__}: {error}): a bug, please report it"
