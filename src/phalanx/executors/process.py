"""One task's process group on this host: start it, signal it, see it end, find it again.

Every task runs under a tiny ``/bin/sh`` wrapper (``WRAPPER_SCRIPT``), started as the
leader of a new session and process group, in its working directory
(``taskdirs.TaskDirs``: ``<tasks root>/<job>/<task>/``, each name made a safe
directory name by ``dir_name``):

- the wrapper installs a no-op trap for HUP, INT, QUIT and TERM, then runs the real
  command as a *foreground child*. Signals go to the whole process group, so the real
  command receives them directly and handles them as it would without phalanx (caught
  signals are reset to their default on exec, so the command inherits nothing). The
  wrapper's trap only keeps the wrapper alive until the command has ended;
- when the command ends the wrapper writes ``<status> <wrapper pid>`` to ``exit_code``
  (the shell's own ``printf``: no program is run for it), then exits with that status;
  the file is read only once the wrapper has exited, so never half written. ``<status>`` is the shell's ``$?``: the command's exit code, or
  128+N for a death by signal N. Because the code is on disk, a server that restarted
  meanwhile still learns it; the pid in the file ties the code to this run;
- SIGKILL reaches the wrapper too, so a killed group leaves no ``exit_code``: its parent
  sees the wrapper killed (128+9), and a re-attached task is known to be killed only if
  this executor sent the signal.

Limits, by the host's isolation (``phalanx.executors.cgroups``):

- cgroup v2 or v1: the task's group (``phalanx.executors.taskgroups``) carries its CPU,
  memory and process limits, written before the wrapper starts. The wrapper is started
  *held*: it waits on its stdin (a pipe from the server) until the server has written
  its pid to the group's ``cgroup.procs`` (every hierarchy's, under v1) and then sends
  ``go``; only then does it run the command, so the command and all it forks are
  inside. This works whatever uid the task runs as (a task's uid could not move itself
  there). If the server cannot put it in, the start fails and nothing runs; a wrapper
  whose pipe closes without ``go`` runs nothing and records ``JOIN_FAILED``. No
  RLIMIT_AS then: the group limits what is used, not what is reserved;
- otherwise: ``memory_bytes`` becomes the wrapper's ``ulimit -v`` (RLIMIT_AS, inherited
  by the command) for tasks without GPUs, and ``cpu_millicores`` is not enforced.

Identity: with a ``TaskIdentity`` the wrapper, and so the command, runs as that uid and
gid with exactly its supplementary groups, so ``exit_code`` is written by
the task's own uid in its own directory: the code it holds is the task's word about
itself, bound to the wrapper's pid, and it is read without following links and at most
64 bytes of it (``read_exit_code``).

The switch is made by util-linux's ``setpriv`` (``SETPRIV``), exec'd before the
wrapper: the starter then ``vfork``s, where a switch in the child (``subprocess``'s
``user``, ``group`` and ``extra_groups``, the fallback on a host without ``setpriv``)
makes it ``fork`` and copy its page tables for every task. Neither needs a
``preexec_fn``, which is unsafe in a threaded process.

A task is identified across a server restart by its pid *and* the pid's start time
(``psutil.Process.create_time``): a pid that the kernel reused for another process has a
different start time and is never mistaken for the task.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
import signal
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

import psutil

from phalanx.executors.attempts import attempt_header, write_header
from phalanx.executors.cgroupfs import write_value
from phalanx.executors.identity import TaskIdentity
from phalanx.executors.launch import TaskLaunch
from phalanx.executors.logfiles import open_log
from phalanx.tenantfs import Place, TenantPathRefused, read_head

EXIT_FILE: Final = "exit_code"
STDOUT_LOG: Final = "stdout.log"
STDERR_LOG: Final = "stderr.log"

#: Two start times closer than this are the same process start (psutil's resolution is
#: the kernel's clock tick, 10 ms at most; a reused pid starts at least a tick later).
START_TIME_TOLERANCE: Final = 0.005

#: The status recorded by a held wrapper that was never let go (nothing ran).
JOIN_FAILED: Final = 125

#: Longest file name the common Linux file systems accept, in bytes.
NAME_MAX: Final = 255
#: What ``dir_name`` puts before the hash of a name it shortened; never in a name it keeps.
HASH_MARK: Final = "~"
#: The bytes of a long name's end that ``dir_name`` keeps (a task name ends in role-index).
_KEPT_END: Final = 48

#: util-linux's ``setpriv``, which switches a task's identity (None: not on this host).
SETPRIV: Final = shutil.which("setpriv", path="/usr/bin:/bin:/usr/sbin:/sbin")

#: What the server sends a held wrapper once it is in its cgroup.
GO: Final = b"go\n"
#: The most of ``exit_code`` ever read: a status and a pid.
EXIT_FILE_MAX: Final = 64

WRAPPER_SCRIPT: Final = """\
trap : HUP INT QUIT TERM
exit_file=$1 memory_kib=$2 held=$3
shift 3
finish() {
  umask 077
  printf '%s %s\\n' "$1" "$$" > "$exit_file"
  exit "$1"
}
if [ "$held" != - ]; then
  IFS= read -r go || go=
  [ "$go" = go ] || { echo "phalanx: the server did not put the task in its cgroup" >&2; finish 125; }
  exec </dev/null
fi
if [ "$memory_kib" != - ]; then
  ulimit -v "$memory_kib" 2>/dev/null || echo "phalanx: cannot limit memory to ${memory_kib} KiB" >&2
fi
"$@"
finish "$?"
"""


@dataclass(frozen=True, slots=True)
class Exit:
    """A task's end. ``code`` is None when nothing recorded it (see the module docstring)."""

    code: int | None


def dir_name(name: str) -> str:
    """``name`` as one directory name of at most ``NAME_MAX`` bytes, readable and unique.

    A name that fits and holds no ``HASH_MARK`` is kept as it is (so is every job and
    task name the spec accepts, up to 255 bytes). Any other ends in ``~`` and 16 hex
    digits of its SHA-256, after the whole name when that fits, else after its start,
    ``..`` and its last 48 bytes (cut only between characters: the role and index at
    the end of a task's name stay readable). Distinct names therefore get distinct
    directory names: a kept name has no ``~`` where the others end in one followed by
    their hash, and two hashes differ unless 64 bits of SHA-256 collide. ``name`` must
    be a valid part of a path (no ``/`` or NUL, not ``.`` or ``..``: ``TaskLaunch``
    checks that).
    """
    encoded = name.encode()
    if len(encoded) <= NAME_MAX and HASH_MARK not in name:
        return name
    suffix = HASH_MARK + hashlib.sha256(encoded).hexdigest()[:16]
    if len(encoded) + len(suffix) <= NAME_MAX:
        return name + suffix
    room = NAME_MAX - len(suffix) - len("..") - _KEPT_END
    start = encoded[:room].decode(errors="ignore")
    end = encoded[-_KEPT_END:].decode(errors="ignore")
    return f"{start}..{end}{suffix}"


def shell_code(returncode: int) -> int:
    """A ``Popen.returncode`` as a shell reports it: a death by signal N is 128+N."""
    return 128 - returncode if returncode < 0 else returncode


def read_exit_code(workdir: Path, pid: int | None) -> int | None:
    """The status the wrapper with ``pid`` (None: any) recorded in ``workdir``, if any.

    Read through ``tenantfs``: only a regular file, never through a link, never blocking,
    at most ``EXIT_FILE_MAX`` bytes: the task's uid may have put anything there."""
    try:
        _, head = read_head(Place(workdir, EXIT_FILE), reader=None, limit=EXIT_FILE_MAX)
    except (TenantPathRefused, OSError):
        return None  # none, a link, or a directory of someone else's: no code recorded
    fields = head.decode(errors="replace").split()
    if len(fields) != 2 or not all(f.isdigit() for f in fields):
        return None
    if pid is not None and int(fields[1]) != pid:
        return None  # another run's file, or not ours at all
    return int(fields[0])


def address_space_kib(launch: TaskLaunch) -> int | None:
    """The RLIMIT_AS for the task in KiB, or None for no limit.

    GPU tasks get none: a CUDA context reserves far more virtual address space than it
    ever backs with memory, so an address-space cap would break it at start-up.
    """
    if launch.memory_bytes is None or launch.gpus:
        return None
    return max(1, launch.memory_bytes // 1024)


def process_start_time(pid: int) -> float:
    """When ``pid`` started, in seconds since the epoch, as psutil reads it."""
    return float(psutil.Process(pid).create_time())


class GroupSignals:
    """The signals a task's process group is sent, each through ``send``, which says
    whether the group could be reached."""

    __slots__ = ()

    def send(self, signum: int) -> bool:
        raise NotImplementedError

    def terminate(self) -> bool:
        """Ask the group to stop (SIGTERM)."""
        return self.send(signal.SIGTERM)

    def kill(self) -> bool:
        """Kill the group (SIGKILL)."""
        return self.send(signal.SIGKILL)

    def pause(self) -> bool:
        """Freeze the group (SIGSTOP); it keeps its memory and its files."""
        return self.send(signal.SIGSTOP)

    def resume(self) -> bool:
        """Let a frozen group run again (SIGCONT)."""
        return self.send(signal.SIGCONT)


class TaskProcess(GroupSignals):
    """A task's process group, led by its wrapper; every signal goes to the whole group.

    Started by this server (a child, reaped with ``waitid``) or re-attached after a
    restart (watched through psutil, since only a parent can wait for a process).
    """

    __slots__ = ("_handle", "_popen", "pid", "start_time", "workdir")

    def __init__(
        self,
        *,
        pid: int,
        start_time: float,
        workdir: Path,
        popen: subprocess.Popen[bytes] | None = None,
        handle: Any = None,
    ) -> None:
        self.pid = pid
        self.start_time = start_time
        self.workdir = workdir
        self._popen = popen
        self._handle = handle  # a psutil.Process, for a re-attached task

    @property
    def adopted(self) -> bool:
        """True when this server did not start the process (it was re-attached)."""
        return self._popen is None

    def send(self, signum: int) -> bool:
        """Send ``signum`` to the process group; False when the group is gone."""
        if self._handle is not None and not self._handle.is_running():
            return False  # the pid may belong to someone else by now: never signal it
        try:
            os.killpg(self.pid, signum)
        except (ProcessLookupError, PermissionError):
            return False
        return True

    def poll(self) -> Exit | None:
        """The task's end once its wrapper has exited, else None. Never blocks.

        Processes the task left behind in its group are killed at that moment, as a
        container's are when its main process ends.
        """
        return self._poll_child() if self._popen is not None else self._poll_adopted()

    def _poll_child(self) -> Exit | None:
        assert self._popen is not None
        # WNOWAIT leaves the wrapper a zombie, which keeps its pid (and so the group id)
        # from being reused while the leftovers of the group are killed.
        if self._popen.returncode is None:
            flags = os.WEXITED | os.WNOHANG | os.WNOWAIT
            try:
                if os.waitid(os.P_PID, self.pid, flags) is None:
                    return None
            except ChildProcessError:
                pass  # reaped behind our back (a stray os.wait): Popen.wait reports it
            self.kill()
        returncode = self._popen.wait()
        recorded = read_exit_code(self.workdir, self.pid)
        return Exit(recorded if recorded is not None else shell_code(returncode))

    def _poll_adopted(self) -> Exit | None:
        try:
            if not self._handle.is_running():
                return Exit(read_exit_code(self.workdir, self.pid))
            if self._handle.status() != psutil.STATUS_ZOMBIE:
                return None
        except psutil.NoSuchProcess:
            return Exit(read_exit_code(self.workdir, self.pid))
        # A zombie still holds its pid, so its group can be cleaned up safely.
        self.kill()
        return Exit(read_exit_code(self.workdir, self.pid))


def spawn(
    argv: Sequence[str],
    *,
    workdir: Path,
    env: Mapping[str, str],
    cgroups: Sequence[Path] = (),
    identity: TaskIdentity | None = None,
    memory_kib: int | None = None,
    fresh: bool = False,
    exit_dir: Path | None = None,
    as_server: bool = False,
    attempt: int | None = None,
) -> TaskProcess:
    """Start ``argv`` under the wrapper in ``workdir``, with exactly ``env``.

    With ``cgroups`` (a task group's directories, made by ``taskgroups``) the wrapper is
    held until this function has put it into each of them; without, ``memory_kib`` (if
    given: ``address_space_kib``) becomes its RLIMIT_AS. With an ``identity`` the task
    runs as it, and its logs belong to it. Output is appended to ``stdout.log`` and
    ``stderr.log`` (``logfiles.open_log``); a previous run's ``exit_code`` is removed
    first so that it can never be read as this run's. ``workdir`` must exist
    (``TaskDirs.prepare``); ``fresh`` says it was made empty just now. Called by the
    launcher process (``executors.launcher``), whose children the tasks are. Raises ``OSError`` when the logs cannot be opened, the
    process cannot be started, or the task cannot be put into its group (then the
    wrapper is killed: nothing ran).

    ``as_server`` runs ``argv`` as the server's own user although ``identity`` owns the
    directory and the logs: a container runtime's client, which starts the command as
    ``identity`` itself (``containers``). Its wrapper then writes ``exit_code`` into
    ``exit_dir``, which must be the server's alone: a root wrapper must never write
    where the task could have put a link. The returned process reads its code there.
    ``attempt`` is the job's attempt the run belongs to, for its logs' header
    (``attempts.attempt_header``).
    """
    codes = workdir if exit_dir is None else exit_dir
    previous = None if fresh else read_exit_code(codes, None)
    header = attempt_header(workdir, identity, fresh=fresh, previous=previous, attempt=attempt)
    if not fresh or exit_dir is not None:
        (codes / EXIT_FILE).unlink(missing_ok=True)
    limit = None if cgroups else memory_kib
    wrapped = [
        "/bin/sh", "-c", WRAPPER_SCRIPT, "phalanx-task",  # $0 names the wrapper in `ps`
        str(codes / EXIT_FILE), "-" if limit is None else str(limit),
        "held" if cgroups else "-", *argv,
    ]  # fmt: skip
    options: dict[str, Any] = {}
    if as_server:
        pass  # the runtime's client switches the container to the identity
    elif identity is not None and SETPRIV is not None:
        wrapped = [*identity.setpriv_argv(SETPRIV), *wrapped]
    elif identity is not None:
        options = dict(identity.popen_options())
    held, release = os.pipe() if cgroups else (subprocess.DEVNULL, -1)
    descriptors = [held] if cgroups else []
    try:
        out = open_log(workdir / STDOUT_LOG, identity, fresh=fresh)
        descriptors.append(out)
        err = open_log(workdir / STDERR_LOG, identity, fresh=fresh)
        descriptors.append(err)
        write_header(header, (out, err))  # a later run's output begins with its attempt
        popen = subprocess.Popen(
            wrapped,
            cwd=workdir,
            env=dict(env),
            stdin=held,
            stdout=out,
            stderr=err,
            start_new_session=True,  # own session and group: signals reach all of it, only it
            close_fds=True,
            **options,
        )
    except BaseException:
        if release >= 0:
            os.close(release)
        raise
    finally:
        for fd in descriptors:
            os.close(fd)
    # The wrapper cannot be reaped before we wait for it, so its start time is readable.
    process = TaskProcess(
        pid=popen.pid, start_time=process_start_time(popen.pid), workdir=codes, popen=popen
    )
    if cgroups:
        _release_into(process, popen, cgroups, release)
    return process


def _release_into(
    process: TaskProcess, popen: subprocess.Popen[bytes], cgroups: Sequence[Path], release: int
) -> None:
    """Put the held wrapper into each group, then let it go; on failure kill it and raise."""
    try:
        for group in cgroups:
            try:
                write_value(group / "cgroup.procs", str(popen.pid))
            except OSError as error:
                process.kill()
                popen.wait()
                raise OSError(
                    error.errno,
                    f"cannot put the task into its cgroup: {error.strerror}",
                    str(group / "cgroup.procs"),
                ) from error
        with contextlib.suppress(BrokenPipeError):  # ended already: poll reports how
            os.write(release, GO)
    finally:
        os.close(release)


def attach(*, pid: int, start_time: float, workdir: Path) -> TaskProcess | None:
    """Re-attach the task whose wrapper is ``pid`` started at ``start_time``, if it still runs.

    None when the pid is gone, ended (a zombie), belongs to another process (its start
    time differs: the pid was reused), or does not lead its own process group.
    """
    try:
        handle = psutil.Process(pid)
        same_start = abs(float(handle.create_time()) - start_time) <= START_TIME_TOLERANCE
        ended = handle.status() == psutil.STATUS_ZOMBIE
        leads_group = os.getpgid(pid) == pid
    except (psutil.NoSuchProcess, psutil.AccessDenied, ProcessLookupError):
        return None
    if not same_start or ended or not leads_group:
        return None
    return TaskProcess(pid=pid, start_time=start_time, workdir=workdir, handle=handle)
