"""What the API returns. Read schemas: clients ignore fields they do not know."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict


class View(BaseModel):
    """Base of every read schema."""

    model_config = ConfigDict(extra="ignore")


class TaskView(View):
    """One task of a job."""

    name: str
    role: str
    index: int
    phase: str
    node: str | None = None
    gpus: list[int] = []
    exit_code: int | None = None
    started_at: float | None = None
    finished_at: float | None = None


class JobView(View):
    """A job with its phase, why it is there, and its tasks."""

    name: str
    queue: str
    user: str
    phase: str
    reason: str = ""
    message: str = ""
    created_at: float
    started_at: float | None = None
    finished_at: float | None = None
    attempts: int = 0
    preemptions: int = 0
    cancel_requested: bool = False
    #: what all its replicas ask for together: cpu in millicores, memory in bytes, gpu
    requests: dict[str, float] = {}
    tasks: list[TaskView] = []
    document: dict[str, Any] | None = None


class JobPage(View):
    """One page of jobs; pass ``next`` as ``after`` for the following page."""

    items: list[JobView]
    next: int | None = None


class EventView(View):
    """Something that happened to a job."""

    time: float
    kind: str
    message: str


class WhyView(View):
    """Why a job is where it is: the engine's latest reason for a pending job."""

    name: str
    phase: str
    reason: str
    message: str


class QueueView(View):
    """A queue with its quotas and what it holds now (canonical units: cpu in
    millicores, memory in bytes, gpu in devices)."""

    name: str
    parent: str
    weight: float
    guarantee: dict[str, float]
    deserved: dict[str, float]
    capability: dict[str, float]
    allocated: dict[str, float]
    submitters: list[str] | None = None
    jobs: dict[str, int] = {}
    document: dict[str, Any]


class GpuView(View):
    """One GPU card of a node: how much of it is taken, and by which tasks."""

    index: int
    model: str = ""
    used: float  # 0..1 of the card
    tasks: list[str] = []


class NodeView(View):
    """A node: capacity, what is allocated, its GPUs, and whether it takes new work."""

    name: str
    # where its tasks are reached, as declared in the Cluster document (None: the executor's host)
    address: str | None = None
    capacity: dict[str, float]
    allocated: dict[str, float]
    labels: dict[str, str] = {}
    gpus: list[GpuView] = []
    cordoned: bool = False
    draining: bool = False
    tasks: int = 0
    #: how its tasks' CPU, memory and processes are limited, and the defaults
    limits: str = ""
    #: which Unix identity its tasks run as
    identity: str = ""


class UserView(View):
    """A user, and the Unix identity their tasks run as (None: the server's own)."""

    name: str
    role: str
    uid: int | None = None
    #: the existing account that identity is; None for an allocated uid
    account: str | None = None


class TokenView(View):
    """A new token: shown once. For a new user, the uid their tasks run as too."""

    user: str
    token: str
    uid: int | None = None
    account: str | None = None
