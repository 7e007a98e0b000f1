"""Every bound phalanx puts on what a user may ask for, in one place.

A value past one of these limits is refused where the document is validated (the CLI
and the SDK before anything is sent, the API at submit, the importers as they build a
phalanx document), with the field and the fix, never stored. They are chosen so that
what is accepted fits the machine and means something, and so that a user of
Kubernetes, Volcano or Slurm finds them generous:

- ``MAX_INPUT_SIZE``: 10 MiB, a document's text or the body of an API request.
  (etcd, behind Kubernetes, refuses requests over 1.5 MiB.)
- ``MAX_REPLICAS``: 10,000 tasks per job, in all its roles together (so per role as
  well): one task on every node of the largest cluster phalanx is built for (10,000
  nodes); Kubernetes itself is tested to 5,000 nodes.
- ``MAX_ROLES``: 64 roles per job (Kubeflow's jobs have 2 to 4 kinds of replica).
- ``MIN_PRIORITY``..``MAX_PRIORITY``: a 32-bit signed integer, as the ``value`` of a
  Kubernetes PriorityClass (whose built-in system classes, 2,000,000,000 and
  2,000,001,000, fit) and of a Slurm priority; for jobs and queues.
- ``MAX_RETRY``: 1,000 retries (Volcano's ``maxRetry`` defaults to 3, a Kubernetes
  Job's ``backoffLimit`` to 6).
- ``MAX_DURATION``: 365 days for ``walltime``, ``runtimeEstimate`` and
  ``starvationThreshold`` (a Slurm partition's ``MaxTime`` is typically days; a service
  that runs for ever leaves ``walltime`` out).
- ``MIN_WEIGHT``..``MAX_WEIGHT``: a queue's ``weight`` from 0.001 to 1,000,000 (Volcano
  takes a whole number from 1), so the shares computed from weights stay ordinary
  numbers.
- ``MAX_QUANTITY``: 2**63 (about 9.2e18) of a resource's base unit (cores, bytes,
  devices) in any one quantity, as Kubernetes quantities are 64-bit: 8 EiB of memory.
- Environment and command of a role, which the executor hands to ``execve``: Linux
  refuses any one string over 128 KiB (``MAX_ARG_STRLEN``) and arguments plus
  environment over ``ARG_MAX`` (2 MiB with the usual 8 MiB stack). A role's
  ``env`` holds at most ``MAX_ENV_VARS`` (4,096) variables, each ``NAME=value`` at
  most ``MAX_ENV_ENTRY`` (64 KiB of UTF-8), ``MAX_ENV_BYTES`` (512 KiB) in all; its
  ``command`` at most ``MAX_COMMAND_ARGS`` (4,096) arguments, each at most
  ``MAX_COMMAND_ARG`` (64 KiB), ``MAX_COMMAND_BYTES`` (512 KiB) in all. Together that
  is at most 1 MiB, leaving the other half of ``ARG_MAX`` to what phalanx adds
  (``RANK``, ``MASTER_ADDR``, ``NCCL_IB_HCA`` ...) and the server variables a task
  inherits (``PATH``, ``HOME`` ...).
- Names: a job, queue or cluster name is a DNS-1123 subdomain of at most
  ``MAX_NAME`` (253) characters and a role a DNS-1123 label of at most ``MAX_LABEL``
  (63), as in Kubernetes; user names at most 253. A task's directory under the data
  dir is named by ``executors.process.dir_name``, which keeps every path component
  within the file system's 255 bytes however long the names are.
- ``MAX_ANNOTATIONS_BYTES``: 256 KiB of annotation keys and values per document, as
  Kubernetes allows.
"""

from __future__ import annotations

from typing import Final

#: Largest input accepted: characters of document text, bytes of a file or of an API
#: request body.
MAX_INPUT_SIZE: Final = 10 * 2**20

#: Most tasks one job may have, all roles together (and so per role).
MAX_REPLICAS: Final = 10_000
#: Most roles one job may have.
MAX_ROLES: Final = 64

#: Bounds of a job's or a queue's ``priority`` (a 32-bit signed integer).
MIN_PRIORITY: Final = -(2**31)
MAX_PRIORITY: Final = 2**31 - 1

#: Most retries a job may ask for (``maxRetry``).
MAX_RETRY: Final = 1_000

#: Longest ``walltime``, ``runtimeEstimate`` and ``starvationThreshold``, in seconds.
MAX_DURATION: Final = 365 * 86_400.0

#: Bounds of a queue's ``weight``.
MIN_WEIGHT: Final = 0.001
MAX_WEIGHT: Final = 1_000_000.0

#: Largest quantity of any resource, in its base unit (cores, bytes, devices).
MAX_QUANTITY: Final = float(2**63)

#: A role's environment: variables, bytes of one ``NAME=value`` (UTF-8), bytes in all.
MAX_ENV_VARS: Final = 4_096
MAX_ENV_ENTRY: Final = 64 * 2**10
MAX_ENV_BYTES: Final = 512 * 2**10

#: A role's command: arguments, bytes of one argument (UTF-8), bytes in all.
MAX_COMMAND_ARGS: Final = 4_096
MAX_COMMAND_ARG: Final = 64 * 2**10
MAX_COMMAND_BYTES: Final = 512 * 2**10

#: Longest job, queue, cluster and user name (a DNS-1123 subdomain) and role name (label).
MAX_NAME: Final = 253
MAX_LABEL: Final = 63

#: Most bytes of annotation keys and values in one document's metadata.
MAX_ANNOTATIONS_BYTES: Final = 256 * 2**10


def size(limit: float) -> str:
    """A byte limit for people: ``10 MiB``, ``64 KiB``, ``100 bytes``."""
    for unit, scale in (("MiB", 2**20), ("KiB", 2**10)):
        if limit >= scale and limit % scale == 0:
            return f"{int(limit // scale)} {unit}"
    return f"{int(limit)} bytes"
