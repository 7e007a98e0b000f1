"""The launcher: a small process beside the server that starts, signals and reaps tasks.

Why a process of its own: starting a task forks, and a fork costs in proportion to the
forking process's memory. The server is large (the engine, the API, the database), so
forking it for every task made task starts slow (about 5 ms each as root, where a uid
switch rules out ``vfork``) and held the server's interpreter while it did. The
launcher imports only the executor's host-side modules (about 20 MiB), forks cheaply,
and does every host-side step of a start on the other core: the task's directory, its
cgroup and limits, its logs, the wrapper's start as the task's uid, putting it into its
group, and the record a restarted server re-adopts it from (``process``, ``taskdirs``,
``taskgroups``, ``records``).

- ``messages``: what the server and the launcher say to each other (pickled over one
  socket pair: both ends are the same release, started together);
- ``agent``: the launcher process itself (``python -m phalanx.executors.launcher``);
- ``client``: the server's side (``Launcher``) and its handle on one task (``LaunchedTask``).

Guarantees:

- the tasks are the launcher's children: it alone reaps them, and it signals only a
  task it has not reaped, so no signal can reach a process that reused a task's pid;
- a started task's record is on disk before the server hears that it started, so a
  server that crashes in between still finds the task;
- the launcher ends when the server does (its socket closes); the tasks run on and a
  restarted server re-adopts them, as it would after any crash. A launcher that dies
  under a live server is replaced, and its tasks re-adopted the same way.
"""

from phalanx.executors.launcher.client import LaunchedTask, Launcher
from phalanx.executors.launcher.messages import Exited, Failed, Signal, Start, Started

__all__ = ["Exited", "Failed", "LaunchedTask", "Launcher", "Signal", "Start", "Started"]
