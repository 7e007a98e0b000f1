"""Import Volcano's ``batch.volcano.sh/v1alpha1 Job`` and ``scheduling.volcano.sh/v1beta1 Queue``.

Read-side tolerance: fields phalanx does not model (namespace, plugins, policies,
volumes ...) are ignored; a field it does model must still have the right
shape, or a ``ValidationError`` names its path in the Volcano document. The result
is a ``JobDocument`` or ``QueueDocument``, validated like a hand-written one.

Mapping:

- a task becomes a role: ``replicas``, ``dependsOn.name``, the pod template's
  ``nodeSelector`` and ``tolerations``; its resources are the sum over containers of
  each container's requests, falling back per resource to its limits; ``command``
  is the first container's ``command`` followed by its ``args``, ``image`` its image;
- ``nvidia.com/gpu`` becomes ``gpu`` (see ``RESOURCE_NAMES``);
- ``priorityClassName`` becomes ``priority``: its value in ``priority_classes``,
  else the digits it ends with (``prio-500`` -> 500), else 0; the class name is kept
  in the ``phalanx.io/priority-class`` annotation;
- ``minAvailable: 0`` (no gang in Volcano) becomes 1.

The limits of ``phalanx.spec.limits`` hold for imported documents too; those on
fields read from Volcano (replicas, tasks, ``maxRetry``, ``weight``, ``priority``) are
reported at the Volcano field.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Annotated, Any, Final

from pydantic import BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel

from phalanx.domain.resources import parse_quantity
from phalanx.spec.common import API_VERSION, DnsLabel, ImageRef, Name, Priority
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


class _ReadModel(BaseModel):
    """A read schema: unknown fields are ignored, known ones must be well-formed."""

    model_config = ConfigDict(extra="ignore", strict=True, frozen=True, alias_generator=to_camel)


class _ObjectMeta(_ReadModel):
    name: Name
    labels: dict[str, str] = {}
    annotations: dict[str, str] = {}


class _Requirements(_ReadModel):
    requests: dict[str, Quantity] = {}
    limits: dict[str, Quantity] = {}


class _Container(_ReadModel):
    image: ImageRef | None = None
    command: list[str] = []
    args: list[str] = []
    resources: _Requirements = _Requirements()


class _Toleration(_ReadModel):
    key: str = ""
    operator: str = "Equal"
    value: str = ""
    effect: str = ""  # Kubernetes: empty matches every effect


class _PodSpec(_ReadModel):
    containers: Annotated[list[_Container], Field(min_length=1)]
    node_selector: dict[str, str] = {}
    tolerations: list[_Toleration] = []


class _PodTemplate(_ReadModel):
    spec: _PodSpec


class _DependsOn(_ReadModel):
    name: list[str] = []


class _Task(_ReadModel):
    name: DnsLabel
    replicas: Annotated[int, Field(ge=1, le=MAX_REPLICAS)]
    template: _PodTemplate
    depends_on: _DependsOn = _DependsOn()


class _JobSpec(_ReadModel):
    tasks: Annotated[list[_Task], Field(min_length=1, max_length=MAX_ROLES)]
    min_available: Annotated[int, Field(ge=0)] | None = None
    queue: Name = "default"
    priority_class_name: str | None = None
    max_retry: Annotated[int, Field(ge=0, le=MAX_RETRY)] = 3


class _VolcanoJob(_ReadModel):
    metadata: _ObjectMeta
    spec: _JobSpec


class _Guarantee(_ReadModel):
    resource: dict[str, Quantity] = {}


class _QueueSpec(_ReadModel):
    weight: Annotated[float, Field(ge=MIN_WEIGHT, le=MAX_WEIGHT, allow_inf_nan=False)] = 1.0
    capability: dict[str, Quantity] | None = None
    deserved: dict[str, Quantity] | None = None
    guarantee: _Guarantee = _Guarantee()
    reclaimable: bool = True
    parent: Name | None = None
    priority: Priority = 0


class _VolcanoQueue(_ReadModel):
    metadata: _ObjectMeta
    spec: _QueueSpec = _QueueSpec()


def import_volcano_job(
    raw: Mapping[str, Any], *, priority_classes: Mapping[str, int] = DEFAULT_PRIORITY_CLASSES
) -> JobDocument:
    """The ``JobDocument`` for a Volcano vcjob; raises ``ValidationError`` naming the field."""
    job = _VolcanoJob.model_validate(raw)
    spec = job.spec
    metadata = _metadata(job.metadata)
    job_spec: dict[str, Any] = {
        "queue": spec.queue,
        "maxRetry": spec.max_retry,
        "roles": [_role(task) for task in spec.tasks],
    }
    if spec.min_available is not None:
        job_spec["minAvailable"] = max(spec.min_available, 1)
    if spec.priority_class_name is not None:
        job_spec["priority"] = priority_of_class(spec.priority_class_name, priority_classes)
        metadata["annotations"][PRIORITY_CLASS_ANNOTATION] = spec.priority_class_name
    return JobDocument.model_validate(
        {"apiVersion": API_VERSION, "kind": "Job", "metadata": metadata, "spec": job_spec}
    )


def import_volcano_queue(raw: Mapping[str, Any]) -> QueueDocument:
    """The ``QueueDocument`` for a Volcano Queue; raises ``ValidationError`` naming the field."""
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
    return QueueDocument.model_validate(
        {
            "apiVersion": API_VERSION,
            "kind": "Queue",
            "metadata": _metadata(queue.metadata),
            "spec": queue_spec,
        }
    )


def _metadata(meta: _ObjectMeta) -> dict[str, Any]:
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


def _toleration(toleration: _Toleration) -> dict[str, Any]:
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
