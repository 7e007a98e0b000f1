"""Import Volcano's ``batch.volcano.sh/v1alpha1 Job`` and ``scheduling.volcano.sh/v1beta1 Queue``.

Read-side shape: a field phalanx maps must be well-formed, or a ``ValidationError``
names its path in the Volcano document (``spec.tasks[1].replicas``) and the fix. The
result is a ``JobDocument`` or ``QueueDocument``, validated like a hand-written one.
Every other field present is read but not honoured, and each one is reported as a
``Notice`` (to ``note``, as the Kubeflow importer does) naming its path and what
phalanx does instead: ``metadata.namespace``; the job's ``schedulerName``,
``volumes``, ``policies``, ``plugins``, ``runningEstimate``,
``ttlSecondsAfterFinished``, ``minSuccess`` and ``networkTopology``; a task's
``minAvailable``, ``maxRetry``, ``policies``, ``topologyPolicy`` and ``dependsOn``
with ``iteration: any``; the pod template's ``metadata``, every field of a pod's or
container's ``securityContext`` (``privileged`` ...), each volume's source
(``hostPath`` ...), ``hostNetwork``, ``affinity``, ``restartPolicy`` and the other pod
fields; a toleration's ``tolerationSeconds``; a container's ``env``, ``volumeMounts``,
``ports``, probes ... (see ``pod_fields``); each container after the first (not run);
a queue's ``affinity`` and ``extendClusters``. Nothing is dropped without a word; only
what the Kubernetes API server writes (``status``, ``metadata.uid`` ...) passes in
silence.

Mapping:

- a task becomes a role: ``replicas``, ``dependsOn.name``, the pod template's
  ``nodeSelector`` and ``tolerations``; its resources are the sum over containers of
  each container's requests, falling back per resource to its limits; ``command``
  is the first container's ``command`` followed by its ``args``, ``image`` its image;
- ``nvidia.com/gpu`` becomes ``gpu`` (see ``RESOURCE_NAMES``);
- ``priorityClassName`` becomes ``priority``: its value in ``priority_classes``,
  else the digits it ends with (``prio-500`` -> 500), else 0; the class name is kept
  in the ``phalanx.io/priority-class`` annotation;
- ``minAvailable: 0`` (no gang in Volcano) becomes 1;
- ``queue`` becomes ``queue``; without it the job names no queue, and goes to its
  user's default queue, else to the queue named ``default`` (as in Volcano).

The limits of ``phalanx.spec.limits`` hold for imported documents too; those on
fields read from Volcano (replicas, tasks, ``maxRetry``, ``weight``, ``priority``) are
reported at the Volcano field.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Annotated, Any, ClassVar, Final

from pydantic import Field

from phalanx.domain.resources import parse_quantity
from phalanx.spec.common import API_VERSION, DnsLabel, ImageRef, Loc, Name, Priority
from phalanx.spec.diagnostics import Notice, format_path
from phalanx.spec.importers import pod_fields
from phalanx.spec.importers.kubeflow_schema import (
    Container,
    ObjectMeta,
    PodSpec,
    PodTemplate,
    ReadModel,
    Requirements,
    Toleration,
)
from phalanx.spec.importers.pod_fields import SecurityContext, Volume
from phalanx.spec.job import JobDocument
from phalanx.spec.limits import MAX_REPLICAS, MAX_RETRY, MAX_ROLES, MAX_WEIGHT, MIN_WEIGHT
from phalanx.spec.quantity import Quantity, QuantityValue
from phalanx.spec.queue import QueueDocument

BATCH_API_VERSION: Final = "batch.volcano.sh/v1alpha1"
SCHEDULING_API_VERSION: Final = "scheduling.volcano.sh/v1beta1"

#: Kubernetes resource names that phalanx calls differently.
RESOURCE_NAMES: Final[Mapping[str, str]] = {"nvidia.com/gpu": "gpu"}

#: Kubernetes' built-in priority classes.
DEFAULT_PRIORITY_CLASSES: Final[Mapping[str, int]] = {
    "system-cluster-critical": 2_000_000_000,
    "system-node-critical": 2_000_001_000,
}
PRIORITY_CLASS_ANNOTATION: Final = "phalanx.io/priority-class"


_POLICIES: Final = (
    "phalanx retries a failed job whole, up to maxRetry: no event or exit code "
    "triggers another action"
)


class _Container(ReadModel):
    name: str = ""
    image: ImageRef | None = None
    command: list[str] = Field(default_factory=list)
    args: list[str] = Field(default_factory=list)
    resources: Requirements = Requirements()
    security_context: SecurityContext | None = None

    unhonoured: ClassVar[Mapping[str, str]] = {
        **Container.unhonoured,
        **pod_fields.CONTAINER,
        "env": "the Volcano importer sets no variables: write them under env of the "
        "role in a phalanx Job",
    }


class _PodSpec(ReadModel):
    containers: Annotated[list[_Container], Field(min_length=1)]
    node_selector: dict[str, str] = Field(default_factory=dict)
    tolerations: list[Toleration] = Field(default_factory=list)
    security_context: SecurityContext | None = None
    volumes: list[Volume] = Field(default_factory=list)

    unhonoured: ClassVar[Mapping[str, str]] = {
        **PodSpec.unhonoured,
        **pod_fields.POD,
        "priorityClassName": "use spec.priorityClassName of the Volcano job",
    }

    def notices(self, path: Loc) -> Iterator[Notice]:
        """Containers after the first are reported once each, besides their fields."""
        yield from super().notices(path)
        for i, other in enumerate(self.containers[1:], start=1):
            named = f" ({other.name})" if other.name else ""
            yield Notice(
                path=format_path((*path, "containers", i)),
                detail=f"not run{named}: phalanx runs the first container only; "
                "its resources are added to the task's",
            )


class _PodTemplate(ReadModel):
    spec: _PodSpec

    unhonoured: ClassVar[Mapping[str, str]] = PodTemplate.unhonoured


class _DependsOn(ReadModel):
    name: list[str] = Field(default_factory=list)
    iteration: str | None = None

    def notices(self, path: Loc) -> Iterator[Notice]:
        """``iteration: any`` is reported: phalanx waits for every task named."""
        yield from super().notices(path)
        if self.iteration not in (None, "all"):
            yield Notice(
                path=format_path((*path, "iteration")),
                detail="not honoured: a task starts once every task it names is Running "
                "(iteration: all)",
            )


class _Task(ReadModel):
    name: DnsLabel
    replicas: Annotated[int, Field(ge=1, le=MAX_REPLICAS)]
    template: _PodTemplate
    depends_on: _DependsOn = _DependsOn()

    unhonoured: ClassVar[Mapping[str, str]] = {
        "minAvailable": "phalanx gangs the job as a whole (spec.minAvailable), not each task",
        "maxRetry": "phalanx retries the whole job (spec.maxRetry), not one task",
        "policies": _POLICIES,
        "topologyPolicy": "phalanx applies no NUMA topology policy to a task",
    }


class _JobSpec(ReadModel):
    tasks: Annotated[list[_Task], Field(min_length=1, max_length=MAX_ROLES)]
    min_available: Annotated[int, Field(ge=0)] | None = None
    queue: Name | None = None
    priority_class_name: str | None = None
    max_retry: Annotated[int, Field(ge=0, le=MAX_RETRY)] = 3

    unhonoured: ClassVar[Mapping[str, str]] = {
        "schedulerName": "phalanx schedules every task itself",
        "volumes": "phalanx creates and mounts no PersistentVolumeClaim: nothing is "
        "mounted at its mountPath",
        "policies": _POLICIES,
        "plugins": "phalanx runs no job plugin (env, svc, ssh ...): tasks find each other "
        "through phalanx's rendezvous variables (RANK, MASTER_ADDR, PHALANX_HOSTS_*), "
        "and no ssh keys are made",
        "runningEstimate": "write it as runtimeEstimate in a phalanx Job",
        "ttlSecondsAfterFinished": "phalanx keeps a job until it is deleted",
        "minSuccess": "a phalanx job succeeds when every task does",
        "networkTopology": "write phalanx's networkTopology (a tier of the cluster's "
        "network) in a phalanx Job to use it",
    }


class _VolcanoJob(ReadModel):
    metadata: ObjectMeta
    spec: _JobSpec

    silent: ClassVar[frozenset[str]] = frozenset({"apiVersion", "kind", "status"})


class _Guarantee(ReadModel):
    resource: dict[str, Quantity] = Field(default_factory=dict)


class _QueueSpec(ReadModel):
    weight: Annotated[float, Field(ge=MIN_WEIGHT, le=MAX_WEIGHT, allow_inf_nan=False)] = 1.0
    capability: dict[str, Quantity] | None = None
    deserved: dict[str, Quantity] | None = None
    guarantee: _Guarantee = _Guarantee()
    reclaimable: bool = True
    parent: Name | None = None
    priority: Priority = 0

    unhonoured: ClassVar[Mapping[str, str]] = {
        "affinity": "a phalanx queue has no node-group affinity: its jobs run wherever "
        "their own nodeSelector and affinity allow",
        "extendClusters": "phalanx schedules one cluster",
    }


class _VolcanoQueue(ReadModel):
    metadata: ObjectMeta
    spec: _QueueSpec = _QueueSpec()

    silent: ClassVar[frozenset[str]] = frozenset({"apiVersion", "kind", "status"})


def import_volcano_job(
    raw: Mapping[str, Any],
    *,
    note: Callable[[Notice], None] | None = None,
    priority_classes: Mapping[str, int] = DEFAULT_PRIORITY_CLASSES,
) -> JobDocument:
    """The ``JobDocument`` for a Volcano vcjob; raises ``ValidationError`` naming the field.
    ``note`` gets a ``Notice`` for every field read but not honoured."""
    job = _VolcanoJob.model_validate(raw)
    spec = job.spec
    metadata = _metadata(job.metadata)
    job_spec: dict[str, Any] = {
        "maxRetry": spec.max_retry,
        "roles": [_role(task) for task in spec.tasks],
    }
    if spec.queue is not None:
        job_spec["queue"] = spec.queue
    if spec.min_available is not None:
        job_spec["minAvailable"] = max(spec.min_available, 1)
    if spec.priority_class_name is not None:
        job_spec["priority"] = priority_of_class(spec.priority_class_name, priority_classes)
        metadata["annotations"][PRIORITY_CLASS_ANNOTATION] = spec.priority_class_name
    document = JobDocument.model_validate(
        {"apiVersion": API_VERSION, "kind": "Job", "metadata": metadata, "spec": job_spec}
    )
    _report(job, note)
    return document


def import_volcano_queue(
    raw: Mapping[str, Any], *, note: Callable[[Notice], None] | None = None
) -> QueueDocument:
    """The ``QueueDocument`` for a Volcano Queue; raises ``ValidationError`` naming the
    field. ``note`` gets a ``Notice`` for every field read but not honoured."""
    queue = _VolcanoQueue.model_validate(raw)
    spec = queue.spec
    queue_spec: dict[str, Any] = {
        "weight": spec.weight,
        "guarantee": _summed([spec.guarantee.resource]),
        "reclaimable": spec.reclaimable,
        "priority": spec.priority,
    }
    if spec.parent is not None:
        queue_spec["parent"] = spec.parent
    for field, amounts in (("capability", spec.capability), ("deserved", spec.deserved)):
        if amounts is not None:
            queue_spec[field] = _summed([amounts])
    document = QueueDocument.model_validate(
        {
            "apiVersion": API_VERSION,
            "kind": "Queue",
            "metadata": _metadata(queue.metadata),
            "spec": queue_spec,
        }
    )
    _report(queue, note)
    return document


def _report(read: ReadModel, note: Callable[[Notice], None] | None) -> None:
    """Gives ``note`` what ``read`` read but phalanx does not honour, once the import holds."""
    if note is not None:
        for notice in read.notices(()):
            note(notice)


def _metadata(meta: ObjectMeta) -> dict[str, Any]:
    return {"name": meta.name, "labels": dict(meta.labels), "annotations": dict(meta.annotations)}


def _role(task: _Task) -> dict[str, Any]:
    pod = task.template.spec
    first = pod.containers[0]
    role: dict[str, Any] = {
        "name": task.name,
        "replicas": task.replicas,
        "resources": _summed(
            {**c.resources.limits, **c.resources.requests} for c in pod.containers
        ),
        "nodeSelector": dict(pod.node_selector),
        "tolerations": [_toleration(t) for t in pod.tolerations],
        "dependsOn": [{"role": name, "phase": "Running"} for name in task.depends_on.name],
    }
    if first.command or first.args:
        role["command"] = [*first.command, *first.args]
    if first.image:
        role["image"] = first.image
    return role


def _toleration(toleration: Toleration) -> dict[str, Any]:
    fields = {"key": toleration.key, "operator": toleration.operator, "value": toleration.value}
    return fields | ({"effect": toleration.effect} if toleration.effect else {})


def _summed(maps: Iterable[Mapping[str, QuantityValue]]) -> dict[str, int | float]:
    """Per resource name (renamed by ``RESOURCE_NAMES``), the sum in base units."""
    total: dict[str, float] = {}
    for amounts in maps:
        for written, value in amounts.items():
            name = RESOURCE_NAMES.get(written, written)
            total[name] = total.get(name, 0.0) + parse_quantity(value)
    return {name: int(v) if v.is_integer() else v for name, v in total.items()}


def priority_of_class(class_name: str, priority_classes: Mapping[str, int]) -> int:
    """A PriorityClass's value: from ``priority_classes``, else the digits the name ends
    with (``prio-500`` -> 500), else 0."""
    if class_name in priority_classes:
        return priority_classes[class_name]
    digits = re.search(r"\d{1,9}$", class_name)
    return int(digits[0]) if digits else 0
