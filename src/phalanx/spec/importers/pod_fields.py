"""Kubernetes pod-template fields that phalanx reads but does not honour, and what it
says of each: shared by the importers that read pod templates.

Guarantees: phalanx applies nothing of a ``securityContext`` (a pod's or a container's)
nor of a pod volume, and says so field by field: every field of a security context and
every volume's source is reported as a ``Notice`` at its own path
(``...containers[0].securityContext.privileged``, ``...volumes[0].hostPath``) with what
phalanx does instead. ``POD`` and ``CONTAINER`` word the other pod and container fields,
for a read model's ``unhonoured`` (on top of those that ``kubeflow_schema`` words).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import ClassVar, Final

from phalanx.spec.common import Loc
from phalanx.spec.diagnostics import Notice, format_path
from phalanx.spec.importers.kubeflow_schema import ReadModel

_PROFILE: Final = "a container gets the runtime's default security profile"
_UID: Final = "a task runs as its owner's uid and groups, whatever this says"
_NO_VOLUMES: Final = "phalanx mounts no volumes: the task runs without it"
_NETWORK: Final = "a task uses the host's network and its names, whatever this says"
_PROBES: Final = "phalanx probes no task: a task runs until its command ends"
_TTY: Final = "a task has no terminal: its stdin is empty, its output goes to its logs"
_END: Final = "a task's end is its exit code; its last words are in its stderr.log"


class SecurityContext(ReadModel):
    """A pod's or a container's ``securityContext``: none of it is applied."""

    unhonoured: ClassVar[Mapping[str, str]] = {
        "privileged": "phalanx runs no privileged containers: the task runs unprivileged",
        "allowPrivilegeEscalation": "a container runs with no-new-privileges, whatever this says",
        "capabilities": "phalanx adds no capabilities: the task has its user's",
        "runAsUser": _UID,
        "runAsGroup": _UID,
        "runAsNonRoot": _UID,
        "fsGroup": _UID,
        "fsGroupChangePolicy": _UID,
        "supplementalGroups": _UID,
        "supplementalGroupsPolicy": _UID,
        "readOnlyRootFilesystem": "phalanx leaves a container's root filesystem as its image has it",
        "procMount": _PROFILE,
        "seLinuxOptions": _PROFILE,
        "seccompProfile": _PROFILE,
        "appArmorProfile": _PROFILE,
        "windowsOptions": "phalanx runs Linux tasks only",
        "sysctls": "phalanx sets no sysctls: the node's apply",
    }


class Volume(ReadModel):
    """One pod volume: its source (``hostPath``, ``emptyDir`` ...) is reported; its name
    only ties it to ``volumeMounts``, which are reported where they are."""

    name: str = ""

    unhonoured: ClassVar[Mapping[str, str]] = {
        **dict.fromkeys(
            (
                "persistentVolumeClaim",
                "ephemeral",
                "nfs",
                "csi",
                "projected",
                "downwardAPI",
                "cephfs",
                "rbd",
                "iscsi",
                "glusterfs",
                "image",
            ),
            _NO_VOLUMES,
        ),
        "hostPath": "phalanx mounts no host path from a pod template: the task does not see "
        "it (an image role of a phalanx Job lists host directories its user may read "
        "under mounts)",
        "emptyDir": "phalanx mounts no volumes: a task's scratch space is its working "
        "directory ($PHALANX_WORKDIR)",
        "secret": "phalanx reads no Secret: nothing is mounted",
        "configMap": "phalanx reads no ConfigMap: nothing is mounted",
    }

    def notices(self, path: Loc) -> Iterator[Notice]:
        """A volume with no source (Kubernetes: an emptyDir) is reported as a whole."""
        found = list(super().notices(path))
        yield from found or [Notice(path=format_path(path), detail=f"not honoured: {_NO_VOLUMES}")]


#: Pod fields beyond those ``kubeflow_schema.PodSpec`` words.
POD: Final[Mapping[str, str]] = {
    "hostNetwork": _NETWORK,
    "dnsPolicy": _NETWORK,
    "dnsConfig": _NETWORK,
    "hostAliases": _NETWORK,
    "hostname": _NETWORK,
    "subdomain": _NETWORK,
    "setHostnameAsFQDN": _NETWORK,
    "hostPID": "phalanx chooses no process namespace: a container has its own, a task "
    "on the host the host's",
    "hostIPC": "phalanx chooses no IPC namespace: a container has its own, a task on the "
    "host the host's",
    "hostUsers": "phalanx chooses no user namespace: a task runs as its owner's uid",
    "shareProcessNamespace": "phalanx runs one container per task",
    "ephemeralContainers": "phalanx runs one container per task",
    "nodeName": "phalanx places every task itself: pin it with nodeSelector",
    "topologySpreadConstraints": "write phalanx's own affinity or networkTopology in a "
    "phalanx Job to use it",
    "serviceAccountName": "a task gets no Kubernetes credentials",
    "serviceAccount": "a task gets no Kubernetes credentials",
    "automountServiceAccountToken": "a task gets no Kubernetes credentials",
    "imagePullSecrets": "phalanx pulls images as the node's runtime is logged in "
    "(or not at all: PHALANX_CONTAINER_PULL)",
    "runtimeClassName": "the server's OCI runtime applies (PHALANX_CONTAINER_OCI_RUNTIME)",
    "terminationGracePeriodSeconds": "a stopped task gets phalanx's own grace between "
    "SIGTERM and SIGKILL",
    "activeDeadlineSeconds": "write walltime in a phalanx Job to bound a job's run",
    "priority": "phalanx reads a job's priority from its priority class name",
    "preemptionPolicy": "a job is preemptible unless a phalanx Job says preemptible: false",
}

#: Container fields beyond those ``kubeflow_schema.Container`` words.
CONTAINER: Final[Mapping[str, str]] = {
    "imagePullPolicy": "the server's pull setting applies (PHALANX_CONTAINER_PULL)",
    "livenessProbe": _PROBES,
    "readinessProbe": _PROBES,
    "startupProbe": _PROBES,
    "lifecycle": "phalanx runs no postStart or preStop hook: a stopped task gets SIGTERM, "
    "then SIGKILL",
    "stdin": _TTY,
    "stdinOnce": _TTY,
    "tty": _TTY,
    "terminationMessagePath": _END,
    "terminationMessagePolicy": _END,
    "restartPolicy": "a failed task fails the job, which phalanx retries whole",
    "resizePolicy": "a task's resources are fixed while it runs",
}
