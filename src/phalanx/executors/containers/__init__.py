"""Container images: a role's ``image`` runs its tasks in containers on this host.

What runs where: the launcher starts the runtime's client (``podman run``, or ``docker
run`` where only docker is installed) under the task's usual wrapper, in the task's
process group; the client runs as the server's own user (root, as kubelet does) and
the container as the task's identity. Guarantees of every container:

- the task's working directory is mounted at the same path and is its working
  directory, and so is each of the role's ``mounts`` (a pipeline step's workspace); stdout and stderr go to its ``stdout.log`` and ``stderr.log`` there;
- its environment is the task's (the user's ``env``, the rendezvous, ``PHALANX_*``),
  written to a file of mode 0600 in the server's own directory of the task: no value is
  ever on a command line, where ``ps`` would show it to every user. The server's own
  variables (``PATH`` included) are not passed: the image's stay;
- ``--user uid:gid`` (and ``--group-add``) of the task's identity (none: the server's
  own), ``--security-opt no-new-privileges``, ``--network host`` (the rendezvous ports
  are the host's), ``--cpus`` and ``--memory`` from the request, and one CDI device
  ``nvidia.com/gpu=<id>`` per GPU the engine bound, so ``CUDA_VISIBLE_DEVICES`` counts
  from 0 inside;
- a deterministic name (``container_name``) and the labels ``phalanx.io/job``,
  ``phalanx.io/task`` and ``phalanx.io/data-dir`` (the server's scope), by which a
  restarted server finds it. No container outlives its task: the client's shell
  (``CLEANUP``) removes it once it has the exit code, and the server removes one whose
  end the client may not have seen (``ContainerTask``). Not ``--rm`` with podman: its
  cleanup process can remove the container before the exit code is read;
- ``--init`` where the runtime has an init (podman's catatonit, docker's own): a signal
  reaches the command as it would on the host (a command that handles no SIGTERM dies
  of it, instead of being PID 1, which ignores it). A command missing from the image
  then ends with code 1 and the init's words in ``stderr.log`` (127 without).

Refusals, each a FAILED_TO_START that names the fix: an image that is not on the node
(unless pulls are allowed), GPUs on a node without a CDI spec for them. A container the
runtime could not set up ends with 125 and ``RUNTIME_FAILED``.

Stopping: SIGTERM goes to the task's group as for any task, and the client passes it
on to the container; the SIGKILL after the grace goes through the runtime (``podman
kill``), since a killed client would leave the container running. Pausing freezes the
container (``podman pause``), not its client.

Ends and restarts: the task's exit code is the container command's, as the runtime
recorded it (``command.CLEANUP``).
The client's wrapper runs as root, so it writes ``exit_code`` into the server's own
directory of the task (beside the record and the env file), never into the task's,
where a link left by the task would have root write through it. A restarted server
re-attaches a running client by its record, as for any task; a container whose client
ended unwatched is found by its labels, removed, and reported with its exit code when
it had one, else as lost.

Settings (``detect_runtime`` reads them from the server's environment):

- ``PHALANX_CONTAINER_RUNTIME``: ``podman``, ``docker``, a client's path, or ``none``
  (default: podman when installed, else docker when its daemon answers);
- ``PHALANX_CONTAINER_OCI_RUNTIME``: the ``--runtime`` of every container (default:
  ``runc`` on a host with the hybrid cgroup v1/v2 layout, which crun refuses; empty:
  the runtime's own choice);
- ``PHALANX_CONTAINER_ULIMITS``: ``nofile=N:N,nproc=N:N`` (default: the server's own
  soft limits, nproc at most 32768). Podman's defaults are above what some hosts let
  a container have, and runc then refuses to start it;
- ``PHALANX_CONTAINER_PULL``: ``never`` (default: an image must be on the node, else
  the task fails to start saying how to get it there) or ``missing``;
- ``PHALANX_CONTAINER_INIT``: ``1`` or ``0`` for ``--init`` (default: 1 with docker, and
  with podman when its catatonit is installed).
"""

from phalanx.executors.containers.command import (
    CLEANUP,
    ENV_FILE,
    cdi_problem,
    container_env,
    container_name,
    run_argv,
    write_env_file,
)
from phalanx.executors.containers.detect import detect_runtime, node_labels
from phalanx.executors.containers.runtime import (
    JOB_LABEL,
    SCOPE_LABEL,
    TASK_LABEL,
    ContainerRuntime,
    Found,
    PresentImages,
    RuntimeKind,
    Ulimit,
)
from phalanx.executors.containers.task import RUNTIME_FAILED, ContainerTask

__all__ = [
    "CLEANUP",
    "ENV_FILE",
    "JOB_LABEL",
    "RUNTIME_FAILED",
    "SCOPE_LABEL",
    "TASK_LABEL",
    "ContainerRuntime",
    "ContainerTask",
    "Found",
    "PresentImages",
    "RuntimeKind",
    "Ulimit",
    "cdi_problem",
    "container_env",
    "container_name",
    "detect_runtime",
    "node_labels",
    "run_argv",
    "write_env_file",
]
