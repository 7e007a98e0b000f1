"""Import Kubeflow's ``kubeflow.org/v1`` PyTorchJob, TFJob and MPIJob as phalanx Jobs.

Read-side shape: every field phalanx maps must be well-formed, or a ``ValidationError``
names its path in the Kubeflow document (``spec.pytorchReplicaSpecs.Worker.replicas``)
and the fix. Every other field present is read but not honoured, and each one is
reported as a ``Notice`` naming its path and what phalanx does instead: nothing is
dropped without a word. Only what the Kubernetes API server itself writes (``status``,
``metadata.uid``, ``resourceVersion`` ...) passes in silence.

Mapping:

- each replica type becomes a role named in lowercase (``Worker`` -> ``worker``), the
  roles in the order the training operator ranks them: PyTorch ``Master`` then
  ``Worker`` (``RANK`` 0 is the master); TF ``Chief``, ``Master``, ``PS``, ``Worker``,
  ``Evaluator`` (``TF_CONFIG`` lists them so); MPI ``Launcher`` then ``Worker``;
- ``replicas`` (default 1); from the first container of the pod template: ``image``,
  ``command`` followed by ``args``, ``env`` entries with a ``value``, and resources
  (requests, falling back per resource to limits), ``nvidia.com/gpu`` as ``gpu`` and
  ``aliyun.com/gpu-mem`` (GiB, as Alibaba's GPU sharing counts it) as ``gpu-memory``; the
  pod's ``nodeSelector`` and ``tolerations``;
- ``runPolicy.backoffLimit`` -> ``maxRetry``; ``runPolicy.activeDeadlineSeconds`` ->
  ``walltime``; ``runPolicy.schedulingPolicy``: ``queue``, ``minAvailable``, and
  ``priorityClass`` -> ``priority`` as the Volcano importer reads a class
  (``phalanx.spec.importers.volcano.priority_of_class``); without
  ``schedulingPolicy.queue`` (Kubeflow's own examples have none) the job names no
  queue, and goes to its user's default queue, else to the queue named ``default``;
- MPIJob: the launcher ``dependsOn`` the workers Running and gets a ``hostfile`` of the
  workers with ``slotsPerWorker`` slots each (default 1): ``$PHALANX_HOSTFILE``.

The limits of ``phalanx.spec.limits`` hold; those on fields read from Kubeflow
(replicas, ``backoffLimit``, ``activeDeadlineSeconds``, ``minAvailable``) are reported
at the Kubeflow field.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from typing import Any, Final

from pydantic import ValidationError
from pydantic_core import InitErrorDetails

from phalanx.domain.resources import GPU_MEMORY, parse_quantity
from phalanx.spec.common import API_VERSION, located
from phalanx.spec.diagnostics import Notice, format_path
from phalanx.spec.importers.kubeflow_schema import (
    JOBS,
    KINDS,
    JobSpec,
    MPISpec,
    ReplicaSpec,
    Requirements,
    TFSpec,
    Toleration,
)
from phalanx.spec.importers.volcano import (
    DEFAULT_PRIORITY_CLASSES,
    PRIORITY_CLASS_ANNOTATION,
    RESOURCE_NAMES,
    priority_of_class,
)
from phalanx.spec.job import JobDocument

KUBEFLOW_API_VERSION: Final = "kubeflow.org/v1"

#: The Kubeflow kinds accepted under ``KUBEFLOW_API_VERSION``.
KUBEFLOW_KINDS: Final = tuple(KINDS)

#: Alibaba's GPU-sharing resource: device memory in GiB.
GPU_MEM_RESOURCE: Final = "aliyun.com/gpu-mem"


def import_kubeflow_job(
    raw: Mapping[str, Any],
    *,
    note: Callable[[Notice], None] | None = None,
    priority_classes: Mapping[str, int] = DEFAULT_PRIORITY_CLASSES,
) -> JobDocument:
    """The ``JobDocument`` for a Kubeflow PyTorchJob, TFJob or MPIJob; raises
    ``ValidationError`` naming the field. ``note`` gets a ``Notice`` for every field read
    but not honoured."""
    kind = raw.get("kind")
    if not isinstance(kind, str) or kind not in JOBS:
        error = located(f"{str(kind)[:40]!r} is not a Kubeflow job kind", f"use {', '.join(JOBS)}")
        details = InitErrorDetails(type=error, loc=("kind",), input=kind)
        raise ValidationError.from_exception_data("Kubeflow job", [details])
    job = JOBS[kind].model_validate(raw)
    spec = job.spec
    policy = spec.run_policy
    annotations = dict(job.metadata.annotations)
    metadata = {"name": job.metadata.name, "labels": dict(job.metadata.labels)}
    job_spec: dict[str, Any] = {"roles": _roles(spec)}
    if policy.backoff_limit is not None:
        job_spec["maxRetry"] = policy.backoff_limit
    if policy.active_deadline_seconds is not None:
        job_spec["walltime"] = policy.active_deadline_seconds
    scheduling = policy.scheduling_policy
    if scheduling.queue is not None:
        job_spec["queue"] = scheduling.queue
    if scheduling.min_available is not None:
        job_spec["minAvailable"] = scheduling.min_available
    if scheduling.priority_class is not None:
        job_spec["priority"] = priority_of_class(scheduling.priority_class, priority_classes)
        annotations[PRIORITY_CLASS_ANNOTATION] = scheduling.priority_class
    metadata["annotations"] = annotations
    document = JobDocument.model_validate(
        {"apiVersion": API_VERSION, "kind": "Job", "metadata": metadata, "spec": job_spec}
    )
    if note is not None:
        for notice in [*job.notices(()), *_semantics(spec)]:
            note(notice)
    return document


def _roles(spec: JobSpec) -> list[dict[str, Any]]:
    kind = spec.kind
    by_type = {key.lower(): replica for key, replica in spec.replica_specs.items()}
    names = [t.lower() for t in kind.types if t.lower() in by_type]
    roles = [_role(name, by_type[name]) for name in names]
    if isinstance(spec, MPISpec) and "worker" in by_type:
        launcher = roles[names.index("launcher")]
        launcher["dependsOn"] = [{"role": "worker", "phase": "Running"}]
        launcher["hostfile"] = {"role": "worker", "slots": spec.slots_per_worker}
    return roles


def _role(name: str, replica: ReplicaSpec) -> dict[str, Any]:
    pod = replica.template.spec
    first = pod.containers[0]
    role: dict[str, Any] = {
        "name": name,
        "replicas": replica.replicas,
        "resources": _resources(first.resources),
        "env": {var.name: var.value for var in first.env if var.value is not None},
        "nodeSelector": dict(pod.node_selector),
        "tolerations": [_toleration(t) for t in pod.tolerations],
    }
    if first.command or first.args:
        role["command"] = [*first.command, *first.args]
    if first.image:
        role["image"] = first.image
    return role


def _resources(requirements: Requirements) -> dict[str, int | float]:
    """Requests, falling back per resource to limits, in phalanx's names and base units."""
    amounts: dict[str, float] = {}
    for written, value in {**requirements.limits, **requirements.requests}.items():
        if written == GPU_MEM_RESOURCE:
            amounts[GPU_MEMORY] = parse_quantity(value) * 2**30
        else:
            amounts[RESOURCE_NAMES.get(written, written)] = parse_quantity(value)
    return {name: int(v) if v.is_integer() else v for name, v in amounts.items()}


def _toleration(toleration: Toleration) -> dict[str, Any]:
    fields = {"key": toleration.key, "operator": toleration.operator, "value": toleration.value}
    return fields | ({"effect": toleration.effect} if toleration.effect else {})


def _semantics(spec: JobSpec) -> Iterator[Notice]:
    """Where the job as a whole behaves otherwise than under the training operator."""
    by_type = {key.lower(): key for key in spec.replica_specs}
    field = spec.kind.field
    if isinstance(spec, MPISpec) and "worker" in by_type:
        yield Notice(
            path=format_path(("spec", field, by_type["worker"])),
            detail="a phalanx job succeeds when every task does, workers included "
            "(the MPI operator: when the launcher does): workers must end by themselves",
        )
    if isinstance(spec, TFSpec) and not {"ps", "chief"} & by_type.keys():
        yield Notice(
            path=format_path(("spec", field)),
            detail="TF_CONFIG is not set: phalanx sets it for a job with a PS or Chief role",
        )
