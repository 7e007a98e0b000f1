"""The ``Inference`` document: a service of predictors behind the gateway.

An Inference (KubeDL's Inference, KServe's InferenceService) runs one or more
*predictors*. Each serves one model version with a runtime (a command, or an image's,
that answers HTTP on ``$PORT`` and says it is ready on ``readinessPath``), has its
resources, a replica range and a share of the traffic. Each replica is a phalanx Job of
one task (``replica_job``), placed by the engine through the service's queue like any
other job; the gateway routes ``/serve/NAME/...`` to the Ready replicas.

Guarantees of a validated ``InferenceDocument``: predictor names are unique, the
traffic shares are whole percentages summing to 100, every predictor's replica range is
ordered (``minReplicas <= maxReplicas``), and a replica job built from it validates
as a Job.
"""

from __future__ import annotations

from typing import Annotated, Final, Literal, Self

from pydantic import Field, model_validator

from phalanx.spec.common import (
    API_VERSION,
    DnsLabel,
    EnvName,
    ImageRef,
    Metadata,
    Name,
    Priority,
    SpecModel,
    UserName,
    located,
)
from phalanx.spec.job import Command, JobDocument
from phalanx.spec.model import ModelReference, model_reference
from phalanx.spec.quantity import ResourceMap

#: Most predictors of one service, and most replicas of one predictor.
MAX_PREDICTORS: Final = 16
MAX_SERVICE_REPLICAS: Final = 1_000
#: The role of a replica job.
REPLICA_ROLE: Final = "server"
#: Where a replica serves HTTP, and the name of the path prefix the gateway strips.
PORT_ENV: Final = "PORT"
#: The module each built-in runtime runs (``python -m MODULE``).
RUNTIMES: Final = {"torchscript": "phalanx.runtimes.torchscript"}


class PredictorSpec(SpecModel):
    """One predictor: a model version served by a runtime, its replicas and traffic."""

    name: DnsLabel
    """The predictor's name (e.g. main, canary)."""
    model_version: ModelReference
    """The model version it serves: NAME (the newest, pinned when the service is applied),
    NAME:vN or NAME:vN@sha256:...; each replica reads it at PHALANX_MODEL_PATH."""
    command: Command | None = None
    """What each replica runs: a server answering HTTP on $PHALANX_HOST:$PORT (its node's
    address and the port reserved for it there; or all interfaces) that reads its model
    from $PHALANX_MODEL_PATH. Omitted: ``runtime``."""
    runtime: Literal["torchscript"] | None = None
    """A built-in runtime instead of a command: torchscript serves the version's model.pt
    (a file torch.jit.save wrote) with KServe's V1 protocol, POST
    /v1/models/MODEL:predict {"instances": [...]} (MODEL: the model's name), run by the
    server's own Python (it needs torch)."""
    image: ImageRef | None = None
    """A container image the replicas run in; omitted: on the host."""
    env: dict[EnvName, str] = Field(default_factory=dict)
    """Extra environment variables of each replica (not PORT: the executor sets it)."""
    resources: ResourceMap
    """What each replica needs: cpu, memory, gpu (a share below 1, such as 0.25, shares
    a card), gpu-memory."""
    readiness_path: Annotated[str, Field(pattern=r"^/[!-~]*$", max_length=1024)] = "/healthz"
    """The path a replica answers 200 on once it can serve; until then it gets no traffic."""
    min_replicas: Annotated[int, Field(ge=0, le=MAX_SERVICE_REPLICAS)] = 1
    """The fewest replicas it keeps (0: none while it gets no requests; the first request
    waits for one to start)."""
    max_replicas: Annotated[int, Field(ge=1, le=MAX_SERVICE_REPLICAS)] | None = None
    """The most replicas it scales to; omitted: minReplicas (at least 1)."""
    concurrency: Annotated[int, Field(ge=0, le=100_000)] = 0
    """The most requests one replica is sent at once (0: no limit); more wait at the
    gateway for a free replica."""
    scale_target: Annotated[float, Field(gt=0, le=100_000)] | None = None
    """The requests in flight one replica should carry: between minReplicas and
    maxReplicas the replicas follow the load at 70% of it (Knative's KPA: a 60 s stable
    window, a 6 s panic window at twice the replicas); omitted: concurrency, or 10
    without a concurrency limit."""
    traffic: Annotated[int, Field(ge=0, le=100)] = 100
    """Its share of the service's requests, in percent; the shares sum to 100."""

    @property
    def most_replicas(self) -> int:
        """``maxReplicas``, or ``minReplicas`` (at least 1) when it is omitted."""
        return self.max_replicas if self.max_replicas is not None else max(1, self.min_replicas)

    @property
    def target(self) -> float:
        """``scaleTarget``, or its default (``concurrency``, else 10)."""
        if self.scale_target is not None:
            return self.scale_target
        return float(self.concurrency or 10)

    @model_validator(mode="after")
    def _one_runtime(self) -> Self:
        if (self.command is None) == (self.runtime is None):
            raise located(
                "a predictor runs a command or a built-in runtime"
                + (", not both" if self.command is not None else ": it names neither"),
                "give command (a server of your own on $PORT) or runtime: torchscript",
                at=("runtime" if self.runtime is not None else "command",),
            )
        if self.runtime is not None and self.image is not None:
            raise located(
                f"the {self.runtime} runtime runs on the host, not in an image",
                "omit image, or give a command the image runs",
                at=("image",),
            )
        return self

    @model_validator(mode="after")
    def _port_is_given(self) -> Self:
        if PORT_ENV in self.env:
            raise located(
                f"{PORT_ENV} is set for each replica: the port reserved for it on its node",
                f"remove {PORT_ENV} from env; the replica serves on the $PORT it is given",
                at=("env", PORT_ENV),
            )
        return self

    @model_validator(mode="after")
    def _ordered(self) -> Self:
        if self.min_replicas > self.most_replicas:
            raise located(
                f"minReplicas {self.min_replicas} is above maxReplicas {self.max_replicas}",
                "give minReplicas <= maxReplicas",
                at=("minReplicas",),
            )
        return self


class InferenceSpec(SpecModel):
    """``spec`` of an Inference: where its replicas run, and its predictors."""

    queue: Name = "default"
    """The leaf queue its replicas are submitted to."""
    user: UserName = "default"
    """The user it belongs to (the API sets it to the caller; an admin may name another)."""
    priority: Priority = 0
    """Its replicas' priority within their queue."""
    predictors: Annotated[list[PredictorSpec], Field(min_length=1, max_length=MAX_PREDICTORS)]
    """What it serves, and how the traffic is split among them."""
    callers: Annotated[list[UserName], Field(max_length=1_000)] = Field(default_factory=list)
    """Users besides its owner (and admins) who may send it requests."""

    @model_validator(mode="after")
    def _predictors(self) -> Self:
        names: set[str] = set()
        for i, predictor in enumerate(self.predictors):
            if predictor.name in names:
                raise located(
                    f"two predictors are named {predictor.name!r}",
                    "give each predictor its own name",
                    at=("predictors", i, "name"),
                )
            names.add(predictor.name)
        total = sum(p.traffic for p in self.predictors)
        if total != 100:
            shares = " + ".join(str(p.traffic) for p in self.predictors)
            raise located(
                f"the predictors' traffic shares sum to {total} ({shares}), not 100",
                "give shares that sum to 100 (one predictor: omit traffic)",
                at=("predictors",),
            )
        return self


class InferenceDocument(SpecModel):
    """``apiVersion: phalanx/v1, kind: Inference``."""

    api_version: Literal["phalanx/v1"] = API_VERSION
    """Always phalanx/v1."""
    kind: Literal["Inference"] = "Inference"
    """Always Inference."""
    metadata: Metadata
    """The service's name: requests reach it at /serve/NAME/."""
    spec: InferenceSpec
    """Its predictors, queue and callers."""

    @model_validator(mode="after")
    def _named_as_a_label(self) -> Self:
        name = self.metadata.name
        if "." in name or len(name) > 63:
            raise located(
                f"{name!r} cannot name a service (a path segment of /serve/NAME/)",
                "use at most 63 lowercase letters, digits and '-'",
                at=("metadata", "name"),
            )
        return self

    def replica_job(self, predictor: PredictorSpec, name: str, *, python: str) -> JobDocument:
        """The Job of one replica of ``predictor``, named ``name``: one online,
        non-preemptible task of the predictor's command (a built-in runtime: run by
        ``python``), image, resources and model version, retried
        as any job. It serves on the ``PORT`` its executor reserves on its node."""
        command = predictor.command
        if command is None:  # the built-in runtime
            model = model_reference(predictor.model_version).name
            command = [python, "-m", RUNTIMES[predictor.runtime or ""], "--name", model]
        role = {
            "name": REPLICA_ROLE,
            "replicas": 1,
            "resources": predictor.resources,
            "command": command,
            "env": predictor.env,
            "modelVersion": predictor.model_version,
        }
        if predictor.image is not None:
            role["image"] = predictor.image
        return JobDocument.model_validate(
            {
                "apiVersion": API_VERSION,
                "kind": "Job",
                "metadata": {
                    "name": name,
                    "labels": {
                        "phalanx.dev/inference": self.metadata.name,
                        "phalanx.dev/predictor": predictor.name,
                    },
                },
                "spec": {
                    "queue": self.spec.queue,
                    "user": self.spec.user,
                    "priority": self.spec.priority,
                    "preemptible": False,
                    "serviceClass": "online",
                    "roles": [role],
                },
            }
        )
