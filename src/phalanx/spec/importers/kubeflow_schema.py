"""The read schemas of Kubeflow's ``kubeflow.org/v1`` jobs (``phalanx.spec.importers.kubeflow``).

Guarantees: a field phalanx maps is checked for its shape, and a failure names its path
in the Kubeflow document; every other field is kept (``extra="allow"``) so that
``ReadModel.notices`` can report it with what phalanx does instead. Only what the
Kubernetes API server writes (``status``, ``metadata.uid`` ...) passes in silence.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Annotated, Any, ClassVar, Final, Self

from pydantic import BaseModel, ConfigDict, Field, model_validator
from pydantic.alias_generators import to_camel

from phalanx.spec.common import EnvName, ImageRef, Loc, Name, located
from phalanx.spec.diagnostics import Notice, format_path
from phalanx.spec.job import MAX_SLOTS
from phalanx.spec.limits import MAX_DURATION, MAX_REPLICAS, MAX_RETRY
from phalanx.spec.quantity import Quantity

_NOT_HONOURED: Final = "phalanx does not model it"


@dataclass(frozen=True, slots=True)
class Kind:
    """One Kubeflow job kind: where its replica specs are, its replica types in rank
    order, and those of them that must have exactly one replica."""

    field: str
    types: tuple[str, ...]
    single: tuple[str, ...]
    required: tuple[str, ...] = ()


KINDS: Final[Mapping[str, Kind]] = {
    "PyTorchJob": Kind("pytorchReplicaSpecs", ("Master", "Worker"), ("Master",)),
    "TFJob": Kind(
        "tfReplicaSpecs", ("Chief", "Master", "PS", "Worker", "Evaluator"), ("Chief", "Master")
    ),
    "MPIJob": Kind("mpiReplicaSpecs", ("Launcher", "Worker"), ("Launcher",), ("Launcher",)),
}


class ReadModel(BaseModel):
    """A read schema that keeps what it does not map, to report it (``notices``).

    ``unhonoured`` words, per field, what phalanx does instead of it; ``silent`` lists
    fields that the API server writes, not the user."""

    model_config = ConfigDict(extra="allow", strict=True, frozen=True, alias_generator=to_camel)

    unhonoured: ClassVar[Mapping[str, str]] = {}
    silent: ClassVar[frozenset[str]] = frozenset()

    def notices(self, path: Loc) -> Iterator[Notice]:
        """A notice for every field present that is not mapped, here and below."""
        for key in self.model_extra or {}:
            if key not in self.silent:
                reason = self.unhonoured.get(key, _NOT_HONOURED)
                yield Notice(path=format_path((*path, key)), detail=f"not honoured: {reason}")
        for name, info in type(self).model_fields.items():
            yield from _notices_in(getattr(self, name), (*path, info.alias or name))


def _notices_in(value: Any, path: Loc) -> Iterator[Notice]:
    if isinstance(value, ReadModel):
        yield from value.notices(path)
    elif isinstance(value, list):
        for i, item in enumerate(value):
            yield from _notices_in(item, (*path, i))
    elif isinstance(value, dict):
        for key, item in value.items():
            yield from _notices_in(item, (*path, key))


class ObjectMeta(ReadModel):
    name: Name
    labels: dict[str, str] = {}
    annotations: dict[str, str] = {}

    unhonoured = {"namespace": "phalanx has no namespaces: job names are unique per server"}
    silent = frozenset(
        {"uid", "resourceVersion", "generation", "creationTimestamp", "managedFields", "selfLink"}
    )


class Requirements(ReadModel):
    requests: dict[str, Quantity] = {}
    limits: dict[str, Quantity] = {}


class EnvVar(ReadModel):
    name: EnvName
    value: str | None = None

    unhonoured = {
        "valueFrom": "phalanx reads no Secret, ConfigMap or pod field: the variable is not set"
    }


class Container(ReadModel):
    name: str = ""
    image: ImageRef | None = None
    command: list[str] = []
    args: list[str] = []
    env: list[EnvVar] = []
    resources: Requirements = Requirements()

    unhonoured = {
        "ports": "phalanx chooses the rendezvous ports (MASTER_PORT, TF_CONFIG, PHALANX_HOSTS_*)",
        "workingDir": "a task runs in its own directory ($PHALANX_WORKDIR)",
        "volumeMounts": "phalanx mounts no volumes",
        "envFrom": "phalanx reads no Secret or ConfigMap: no variable is set from it",
    }


class Toleration(ReadModel):
    key: str = ""
    operator: str = "Equal"
    value: str = ""
    effect: str = ""  # Kubernetes: empty matches every effect

    unhonoured = {"tolerationSeconds": "a toleration in phalanx does not expire"}


class PodSpec(ReadModel):
    containers: Annotated[list[Container], Field(min_length=1)]
    node_selector: dict[str, str] = {}
    tolerations: list[Toleration] = []

    unhonoured = {
        "volumes": "phalanx mounts no volumes",
        "initContainers": "phalanx runs no init containers",
        "affinity": "write phalanx's own affinity in a phalanx Job to use it",
        "restartPolicy": "a failed task fails the job, which phalanx retries whole",
        "schedulerName": "phalanx schedules every task itself",
        "priorityClassName": "use runPolicy.schedulingPolicy.priorityClass",
    }

    def notices(self, path: Loc) -> Iterator[Notice]:
        """Containers after the first are reported once each, not field by field."""
        first, *others = self.containers
        yield from super().notices(path)
        for i, other in enumerate(others, start=1):
            named = f" ({other.name})" if other.name else ""
            yield Notice(
                path=format_path((*path, "containers", i)),
                detail=f"not run{named}: phalanx runs the first container only, "
                "and only its resources are requested",
            )
        if first.args and not first.command:
            yield Notice(
                path=format_path((*path, "containers", 0, "args")),
                detail="run as the command itself: phalanx does not know the image's entrypoint",
            )
        elif not first.args and not first.command:
            yield Notice(
                path=format_path((*path, "containers", 0)),
                detail="has no command: phalanx runs a role's command, not an image's "
                "entrypoint, and refuses a role without one; give its command",
            )


class PodTemplate(ReadModel):
    spec: PodSpec

    unhonoured = {"metadata": "a task has no pod, so no pod labels or annotations"}


class ReplicaSpec(ReadModel):
    replicas: Annotated[int, Field(ge=1, le=MAX_REPLICAS)] = 1
    template: PodTemplate

    unhonoured = {
        "restartPolicy": "a failed task fails the job, which phalanx retries whole "
        "(up to maxRetry, from runPolicy.backoffLimit)"
    }


class SchedulingPolicy(ReadModel):
    min_available: Annotated[int, Field(ge=1)] | None = None
    queue: Name | None = None
    priority_class: str | None = None

    unhonoured = {
        "minResources": "phalanx computes the gang's resources from its tasks",
        "scheduleTimeoutSeconds": "a phalanx job waits in its queue until it is placed",
    }


class RunPolicy(ReadModel):
    backoff_limit: Annotated[int, Field(ge=0, le=MAX_RETRY)] | None = None
    active_deadline_seconds: Annotated[int, Field(ge=1, le=int(MAX_DURATION))] | None = None
    scheduling_policy: SchedulingPolicy = SchedulingPolicy()

    unhonoured = {
        "cleanPodPolicy": "a phalanx job's tasks all stop when it ends",
        "ttlSecondsAfterFinished": "phalanx keeps a job until it is deleted",
        "suspend": "submit the job when it should run",
    }


class JobSpec(ReadModel):
    """What the three kinds share; ``replica_specs`` is each kind's own field."""

    run_policy: RunPolicy = RunPolicy()

    unhonoured = {"cleanPodPolicy": "a phalanx job's tasks all stop when it ends"}
    kind: ClassVar[Kind]

    @property
    def replica_specs(self) -> dict[str, ReplicaSpec]:
        """The replica specs, keyed as written."""
        specs: dict[str, ReplicaSpec] = getattr(self, _snake(self.kind.field))
        return specs

    @model_validator(mode="after")
    def _known_types(self) -> Self:
        kind, specs = self.kind, self.replica_specs
        canonical = {t.lower(): t for t in kind.types}
        seen: dict[str, str] = {}
        for key, spec in specs.items():
            at = (kind.field, key)
            if key.lower() not in canonical:
                raise located(
                    f"{key[:40]!r} is not a replica type of this kind",
                    f"use {', '.join(kind.types)}",
                    at=at,
                )
            if key.lower() in seen:
                raise located(
                    f"replica types {seen[key.lower()]!r} and {key!r} are the same",
                    "keep one of them",
                    at=at,
                )
            seen[key.lower()] = key
            if canonical[key.lower()] in kind.single and spec.replicas != 1:
                raise located(
                    f"{spec.replicas} replicas: a job has one {canonical[key.lower()]}",
                    "set replicas: 1",
                    at=(*at, "replicas"),
                )
        for required in kind.required:
            if required.lower() not in seen:
                raise located(
                    f"has no {required}", f"add a {required} replica spec", at=(kind.field,)
                )
        gang = self.run_policy.scheduling_policy.min_available
        total = sum(spec.replicas for spec in specs.values())
        if gang is not None and gang > total:
            raise located(
                f"{gang} is more than the job's {total} replicas",
                f"set minAvailable between 1 and {total}, or omit it to gang every replica",
                at=("runPolicy", "schedulingPolicy", "minAvailable"),
            )
        return self


def _snake(camel: str) -> str:
    return "".join(f"_{c.lower()}" if c.isupper() else c for c in camel)


_Specs = Annotated[dict[str, ReplicaSpec], Field(min_length=1)]


class PyTorchSpec(JobSpec):
    kind = KINDS["PyTorchJob"]
    pytorch_replica_specs: _Specs

    unhonoured = {
        **JobSpec.unhonoured,
        "elasticPolicy": "a phalanx job has a fixed size (its gang)",
        "nprocPerNode": "start the processes of a task in its command (torchrun)",
    }


class TFSpec(JobSpec):
    kind = KINDS["TFJob"]
    tf_replica_specs: _Specs

    unhonoured = {
        **JobSpec.unhonoured,
        "successPolicy": "a phalanx job succeeds when every task does",
        "enableDynamicWorker": "a phalanx job has a fixed size (its gang)",
    }


class MPISpec(JobSpec):
    kind = KINDS["MPIJob"]
    mpi_replica_specs: _Specs
    slots_per_worker: Annotated[int, Field(ge=1, le=MAX_SLOTS)] = 1

    unhonoured = {
        **JobSpec.unhonoured,
        "mainContainer": "phalanx runs the first container",
    }


class KubeflowJob(ReadModel):
    metadata: ObjectMeta
    spec: JobSpec

    silent = frozenset({"apiVersion", "kind", "status"})


class PyTorchJob(KubeflowJob):
    spec: PyTorchSpec


class TFJob(KubeflowJob):
    spec: TFSpec


class MPIJob(KubeflowJob):
    spec: MPISpec


JOBS: Final[Mapping[str, type[KubeflowJob]]] = {
    "PyTorchJob": PyTorchJob,
    "TFJob": TFJob,
    "MPIJob": MPIJob,
}
