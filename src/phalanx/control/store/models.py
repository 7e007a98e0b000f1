"""The tables. One row per user, token, queue, job, task, event, node and model version.

Documents are stored as submitted (after validation, in their canonical JSON form), so
a restarted server rebuilds every domain value from the store alone. Times are seconds
since the epoch (floats) and every phase change is stamped with a reason.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import (
    JSON,
    BigInteger,
    Boolean,
    Float,
    ForeignKey,
    Index,
    Integer,
    LargeBinary,
    String,
    Text,
    UniqueConstraint,
    false,
)
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column, relationship


class Base(DeclarativeBase):
    """Declarative base of every table."""


class UserRow(Base):
    """A person or robot; ``role`` is ``admin`` or ``user``.

    ``uid`` and ``gid`` are the Unix identity the user's tasks run as on a server that
    runs tasks per user (``phalanx.control.tenancy``); None on one that runs every task
    as itself. ``account`` names the existing account the identity is, or is None for
    a uid allocated from the server's range. No two users share a uid.
    ``default_queue`` is where their jobs that name no queue go (None: the queue named
    ``default``); an admin sets it, and it named an existing leaf queue when set.
    """

    __tablename__ = "users"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    name: Mapped[str] = mapped_column(String(253), unique=True)
    role: Mapped[str] = mapped_column(String(16))
    created_at: Mapped[float] = mapped_column(Float)
    uid: Mapped[int | None] = mapped_column(Integer, nullable=True, unique=True, index=True)
    gid: Mapped[int | None] = mapped_column(Integer, nullable=True)
    account: Mapped[str | None] = mapped_column(String(32), nullable=True)
    default_queue: Mapped[str | None] = mapped_column(String(253), nullable=True)


class TaskUidRow(Base):
    """A uid allocated to a user from the server's range, kept after the user is deleted:
    a uid is never given to a second user, who could otherwise reach what the first one's
    tasks left on the host (files in /tmp, in their task directories)."""

    __tablename__ = "task_uids"

    uid: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=False)
    user: Mapped[str] = mapped_column(String(253))
    created_at: Mapped[float] = mapped_column(Float)


class TokenRow(Base):
    """A bearer token, kept only as its SHA-256 digest; refused from ``expires_at`` on
    (None: it never expires). Revoking a token deletes its row; its id is never given to
    another token (SQLite: AUTOINCREMENT; PostgreSQL: its sequence), across restarts."""

    __tablename__ = "tokens"
    __table_args__ = ({"sqlite_autoincrement": True},)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    user_id: Mapped[int] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"), index=True)
    digest: Mapped[str] = mapped_column(String(64), unique=True)
    label: Mapped[str] = mapped_column(String(63), default="")
    created_at: Mapped[float] = mapped_column(Float)
    expires_at: Mapped[float | None] = mapped_column(Float, nullable=True)

    user: Mapped[UserRow] = relationship(lazy="joined")


class QueueRow(Base):
    """A queue: its validated Queue document (``parent`` repeated for queries)."""

    __tablename__ = "queues"

    name: Mapped[str] = mapped_column(String(253), primary_key=True)
    parent: Mapped[str] = mapped_column(String(253), index=True)
    document: Mapped[dict[str, Any]] = mapped_column(JSON)
    created_at: Mapped[float] = mapped_column(Float)
    updated_at: Mapped[float] = mapped_column(Float)


class JobRow(Base):
    """A job: its Job document, its phase with reason and time, retry and cancel state.

    ``attempts`` counts restarts after failure or node loss (checked against maxRetry);
    ``not_before`` holds a restarted job back until its backoff has passed.
    ``cancel_requested`` is the API's intent; the controller turns it into Cancelled.
    ``delete_requested``: the job was deleted while live; the tick that ends it deletes it.
    ``scale_requested``: its owner set a new size of its elastic role (in ``document``);
    the controller applies it.
    """

    __tablename__ = "jobs"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    name: Mapped[str] = mapped_column(String(253), unique=True)
    queue: Mapped[str] = mapped_column(String(253), index=True)
    user: Mapped[str] = mapped_column(String(253), index=True)
    document: Mapped[dict[str, Any]] = mapped_column(JSON)
    phase: Mapped[str] = mapped_column(String(16), index=True)
    reason: Mapped[str] = mapped_column(String(63), default="")
    message: Mapped[str] = mapped_column(Text, default="")
    phase_time: Mapped[float] = mapped_column(Float)
    created_at: Mapped[float] = mapped_column(Float)
    started_at: Mapped[float | None] = mapped_column(Float, nullable=True)
    finished_at: Mapped[float | None] = mapped_column(Float, nullable=True)
    attempts: Mapped[int] = mapped_column(Integer, default=0)
    preemptions: Mapped[int] = mapped_column(Integer, default=0)
    not_before: Mapped[float | None] = mapped_column(Float, nullable=True)
    #: why its tasks are being stopped (``phalanx.engine.lifecycle.Ending``), None: they are not
    ending: Mapped[str | None] = mapped_column(String(16), nullable=True)
    ending_message: Mapped[str] = mapped_column(Text, default="", server_default="")
    cancel_requested: Mapped[bool] = mapped_column(Boolean, default=False)
    delete_requested: Mapped[bool] = mapped_column(Boolean, default=False, server_default=false())
    scale_requested: Mapped[bool] = mapped_column(Boolean, default=False, server_default=false())
    #: the latest progress report of its tasks (``ProgressReport`` fields and ``time``)
    progress: Mapped[dict[str, Any] | None] = mapped_column(JSON, nullable=True)
    #: False until the controller has taken the job in (the API only inserts rows)
    ingested: Mapped[bool] = mapped_column(Boolean, default=False, index=True)
    #: Its roles' model outputs: None (it declares none), ``pending`` (registered once it
    #: succeeds), ``done`` or ``failed`` (the events say why).
    model_intake: Mapped[str | None] = mapped_column(String(16), nullable=True, index=True)
    #: Its roles' model inputs (``modelVersion``): None (it reads none), ``pending`` (being
    #: copied out for its tasks; the controller does not take it in yet), ``done`` or
    #: ``failed`` (the events say why; the controller fails the job).
    model_fetch: Mapped[str | None] = mapped_column(String(16), nullable=True, index=True)

    tasks: Mapped[list[TaskRow]] = relationship(
        back_populates="job", order_by="TaskRow.id", cascade="all, delete-orphan"
    )


class TaskRow(Base):
    """One replica of one role: phase, node, GPUs, exit code, and the executor's record.

    ``name`` (``<job>-<role>-<index>``) is unique within its job only: two jobs may
    make the same name (job ``a-b`` role ``c``, job ``a`` role ``b-c``).
    """

    __tablename__ = "tasks"
    __table_args__ = (UniqueConstraint("job_id", "name", name="uq_tasks_job_id_name"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    job_id: Mapped[int] = mapped_column(ForeignKey("jobs.id", ondelete="CASCADE"), index=True)
    name: Mapped[str] = mapped_column(String(330))
    role: Mapped[str] = mapped_column(String(63))
    index: Mapped[int] = mapped_column(Integer)
    phase: Mapped[str] = mapped_column(String(16))
    node: Mapped[str | None] = mapped_column(String(253), nullable=True)
    gpus: Mapped[list[int]] = mapped_column(JSON, default=list)
    exit_code: Mapped[int | None] = mapped_column(Integer, nullable=True)
    started_at: Mapped[float | None] = mapped_column(Float, nullable=True)
    finished_at: Mapped[float | None] = mapped_column(Float, nullable=True)
    process: Mapped[dict[str, Any] | None] = mapped_column(JSON, nullable=True)

    job: Mapped[JobRow] = relationship(back_populates="tasks")


class EventRow(Base):
    """Something that happened to a job, for people: ``kind`` and a sentence."""

    __tablename__ = "events"
    __table_args__ = (Index("ix_events_job_time", "job_id", "id"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    job_id: Mapped[int] = mapped_column(ForeignKey("jobs.id", ondelete="CASCADE"))
    time: Mapped[float] = mapped_column(Float)
    kind: Mapped[str] = mapped_column(String(32))
    message: Mapped[str] = mapped_column(Text)


class NodeRow(Base):
    """What an admin set on a node: cordoned (no new tasks), draining (evict its tasks too)."""

    __tablename__ = "nodes"

    name: Mapped[str] = mapped_column(String(253), primary_key=True)
    cordoned: Mapped[bool] = mapped_column(Boolean, default=False)
    draining: Mapped[bool] = mapped_column(Boolean, default=False)
    updated_at: Mapped[float] = mapped_column(Float)


class PipelineRow(Base):
    """A registered Pipeline: its validated document, and the user who registered it.

    ``scheduled_through``: for a pipeline with a ``schedule``, the time up to which its
    firings have been handled (registering or updating it sets it to then, so a schedule
    never fires for a time before it was given)."""

    __tablename__ = "pipelines"

    name: Mapped[str] = mapped_column(String(253), primary_key=True)
    user: Mapped[str] = mapped_column(String(253), index=True)
    document: Mapped[dict[str, Any]] = mapped_column(JSON)
    created_at: Mapped[float] = mapped_column(Float)
    updated_at: Mapped[float] = mapped_column(Float)
    scheduled_through: Mapped[float | None] = mapped_column(Float, nullable=True, default=None)


class RunRow(Base):
    """One run of a pipeline: the document as it was when the run was made, its params,
    its phase and the workflow controller's record of it (``state``: every unit's phase,
    attempt, outputs and job; see ``phalanx.control.controllers.runs``).

    ``stop_requested`` is the API's intent; the workflow controller turns it into
    Cancelled once the run's jobs have ended (its finally steps run first).
    """

    __tablename__ = "runs"

    id: Mapped[str] = mapped_column(String(128), primary_key=True)
    pipeline: Mapped[str] = mapped_column(String(253), index=True)
    user: Mapped[str] = mapped_column(String(253), index=True)
    document: Mapped[dict[str, Any]] = mapped_column(JSON)
    params: Mapped[dict[str, Any]] = mapped_column(JSON)
    phase: Mapped[str] = mapped_column(String(16), index=True)
    message: Mapped[str] = mapped_column(Text, default="")
    state: Mapped[dict[str, Any]] = mapped_column(JSON)
    stop_requested: Mapped[bool] = mapped_column(Boolean, default=False)
    created_at: Mapped[float] = mapped_column(Float)
    finished_at: Mapped[float | None] = mapped_column(Float, nullable=True)
    #: The run this one resumes (``phalanx pipeline resume``): its done steps were reused.
    resumed_from: Mapped[str | None] = mapped_column(String(128), nullable=True, default=None)
    #: The step cache for this run: ``use`` (read and write), ``refresh`` (write only),
    #: ``off`` (neither).
    cache_mode: Mapped[str] = mapped_column(String(16), default="use")
    #: The firing of the pipeline's schedule this run was started for (None: on request).
    scheduled_at: Mapped[float | None] = mapped_column(Float, nullable=True, default=None)
    #: The run whose sub-pipeline step started this one (None: none).
    parent: Mapped[str | None] = mapped_column(String(128), nullable=True, index=True, default=None)


class CacheEntryRow(Base):
    """One cached result of a step (``phalanx.workflow.cache``): written by the workflow
        controller when a step with ``cache.enabled`` succeeds, read when the same key comes
        again. ``outputs`` is what downstream steps see (output params, and artifact URLs in
        the producing run's workspace); ``artifacts`` each artifact's URL and content hash;
        ``run_id`` and ``unit`` its lineage; ``material`` the canonical document hashed. An
    entry is served only to runs of its ``user``, who owns the artifacts (a workspace
    directory is its user's alone when tasks run as users' own uids)."""

    __tablename__ = "cache_entries"

    key: Mapped[str] = mapped_column(String(64), primary_key=True)
    pipeline: Mapped[str] = mapped_column(String(253), index=True)
    step: Mapped[str] = mapped_column(String(253))
    unit: Mapped[str] = mapped_column(String(300))
    run_id: Mapped[str] = mapped_column(String(128))
    user: Mapped[str] = mapped_column(String(253))  # the producing run's: it owns the artifacts
    created_at: Mapped[float] = mapped_column(Float)
    expires_at: Mapped[float | None] = mapped_column(Float, nullable=True)
    outputs: Mapped[dict[str, Any]] = mapped_column(JSON)
    artifacts: Mapped[dict[str, Any]] = mapped_column(JSON)
    material: Mapped[dict[str, Any]] = mapped_column(JSON)


class ModelVersionRow(Base):
    """One immutable version of a model: ``NAME:vVERSION``, its content's ``digest`` (the
    manifest's, in the model store) and its lineage. Versions of a name are numbered from
    1 without reuse; a model belongs to the ``user`` of its first version."""

    __tablename__ = "model_versions"
    __table_args__ = (UniqueConstraint("name", "version"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    name: Mapped[str] = mapped_column(String(63), index=True)
    version: Mapped[int] = mapped_column(Integer)
    digest: Mapped[str] = mapped_column(String(71), index=True)
    size: Mapped[int] = mapped_column(BigInteger)
    files: Mapped[int] = mapped_column(Integer)
    user: Mapped[str] = mapped_column(String(253), index=True)
    created_at: Mapped[float] = mapped_column(Float)
    #: The job (and role) whose task wrote it; a pipeline's run and step when it was one.
    job: Mapped[str] = mapped_column(String(253))
    role: Mapped[str] = mapped_column(String(63))
    run_id: Mapped[str | None] = mapped_column(String(128), nullable=True)
    step: Mapped[str | None] = mapped_column(String(300), nullable=True)
    #: What made it: command, image, env names, params, inputs' digests.
    lineage: Mapped[dict[str, Any]] = mapped_column(JSON)
    #: When it was deleted: the row stays, so that its number is never given again and
    #: the name stays its user's; its files leave the store.
    deleted_at: Mapped[float | None] = mapped_column(Float, nullable=True, default=None)
    #: Its container image, when the job asked for one: ``image_phase`` is None (not
    #: asked), Building, Built or Failed (``image_message`` says why); ``image`` its tag.
    image_phase: Mapped[str | None] = mapped_column(String(16), nullable=True, index=True)
    image: Mapped[str | None] = mapped_column(String(255), nullable=True)
    image_message: Mapped[str] = mapped_column(Text, default="")


class ServiceRow(Base):
    """An inference service: its validated Inference document (model versions pinned)
    and its owner. ``replicas_made`` counts the replica jobs ever made for it, so that a
    replica's name (``<service>-<predictor>-<n>``) is never given twice."""

    __tablename__ = "services"

    name: Mapped[str] = mapped_column(String(63), primary_key=True)
    user: Mapped[str] = mapped_column(String(253), index=True)
    document: Mapped[dict[str, Any]] = mapped_column(JSON)
    created_at: Mapped[float] = mapped_column(Float)
    updated_at: Mapped[float] = mapped_column(Float)
    replicas_made: Mapped[int] = mapped_column(Integer, default=0)


class ServiceReplicaRow(Base):
    """One replica of a service's predictor: the job that runs it, and whether it
    answered its readiness path (``url`` then reaches it)."""

    __tablename__ = "service_replicas"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    service: Mapped[str] = mapped_column(String(63), index=True)
    predictor: Mapped[str] = mapped_column(String(63))
    job: Mapped[str] = mapped_column(String(253), unique=True)
    created_at: Mapped[float] = mapped_column(Float)
    ready: Mapped[bool] = mapped_column(Boolean, default=False)
    url: Mapped[str | None] = mapped_column(String(300), nullable=True)


class RolloutRow(Base):
    """A rollout of a service's predictor to another model version: the ``canary``
    predictor it added, the predictor's traffic share before it (``base_traffic``), its
    ``steps`` (canary shares in percent) and the index of the one given now, its phase
    and the reason for it, its thresholds (``settings``, as the API took them) and its
    ``history`` (one entry per action). ``ready_at``: when the canary first had a Ready
    replica; ``abort_by``: who asked to stop it (the serving pass rolls it back)."""

    __tablename__ = "rollouts"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    service: Mapped[str] = mapped_column(String(63), index=True)
    predictor: Mapped[str] = mapped_column(String(63))
    canary: Mapped[str] = mapped_column(String(63))
    from_version: Mapped[str] = mapped_column(String(400))
    to_version: Mapped[str] = mapped_column(String(400))
    base_traffic: Mapped[int] = mapped_column(Integer)
    steps: Mapped[list[int]] = mapped_column(JSON)
    step: Mapped[int] = mapped_column(Integer)
    phase: Mapped[str] = mapped_column(String(16))
    reason: Mapped[str] = mapped_column(Text)
    user: Mapped[str] = mapped_column(String(253))
    settings: Mapped[dict[str, Any]] = mapped_column(JSON)
    history: Mapped[list[dict[str, Any]]] = mapped_column(JSON)
    started_at: Mapped[float] = mapped_column(Float)
    step_started_at: Mapped[float] = mapped_column(Float)
    ready_at: Mapped[float | None] = mapped_column(Float, nullable=True)
    finished_at: Mapped[float | None] = mapped_column(Float, nullable=True)
    abort_by: Mapped[str | None] = mapped_column(String(253), nullable=True)


class GatewayReportRow(Base):
    """What a gateway in its own process (``phalanx gateway``) reports of one predictor,
    rewritten every second: its ``demand`` (requests in flight and its share of those
    held), the requests ``held`` for the service, and its answers counted since that
    gateway started (``requests``, 5xx ``errors``, the latency ``buckets``)."""

    __tablename__ = "gateway_reports"

    gateway: Mapped[str] = mapped_column(String(100), primary_key=True)
    service: Mapped[str] = mapped_column(String(63), primary_key=True)
    predictor: Mapped[str] = mapped_column(String(63), primary_key=True)
    demand: Mapped[float] = mapped_column(Float)
    held: Mapped[int] = mapped_column(Integer)
    requests: Mapped[int] = mapped_column(BigInteger)
    errors: Mapped[int] = mapped_column(BigInteger)
    buckets: Mapped[list[int]] = mapped_column(JSON)
    updated_at: Mapped[float] = mapped_column(Float, index=True)


class SecretRow(Base):
    """A user's secret: its key names (in clear, sorted), its values sealed by the
    server's ``SecretBox`` (never stored in clear) and their total size in bytes. A
    secret is its user's: ``(user, name)`` is its identity, so two users may each have
    a secret of the same name."""

    __tablename__ = "secrets"

    user: Mapped[str] = mapped_column(String(253), primary_key=True)
    name: Mapped[str] = mapped_column(String(253), primary_key=True)
    keys: Mapped[list[str]] = mapped_column(JSON)
    sealed: Mapped[bytes] = mapped_column(LargeBinary)
    size: Mapped[int] = mapped_column(Integer)
    created_at: Mapped[float] = mapped_column(Float)
    updated_at: Mapped[float] = mapped_column(Float)


class DatasetRow(Base):
    """A user's dataset: its document, and what the last listing of its source found
    (``phase`` Listing until one succeeded, Ready, or Failed with ``message``): the
    count and total size of its files, and the ``digest`` of that listing
    (``ListingRow``), which names the copy the nodes cache. ``(user, name)``
    is its identity. ``wanted`` is bumped by each change of its document and each
    request to list it again; ``listed`` is the value it had when the listing was taken."""

    __tablename__ = "datasets"

    user: Mapped[str] = mapped_column(String(253), primary_key=True)
    name: Mapped[str] = mapped_column(String(253), primary_key=True)
    document: Mapped[dict[str, Any]] = mapped_column(JSON)
    phase: Mapped[str] = mapped_column(String(16))
    message: Mapped[str] = mapped_column(Text, default="")
    files: Mapped[int] = mapped_column(Integer, default=0)
    size: Mapped[int] = mapped_column(BigInteger, default=0)
    digest: Mapped[str | None] = mapped_column(String(71), nullable=True)
    wanted: Mapped[int] = mapped_column(Integer, default=1)
    listed: Mapped[int] = mapped_column(Integer, default=0)
    listed_at: Mapped[float | None] = mapped_column(Float, nullable=True)
    created_at: Mapped[float] = mapped_column(Float)
    updated_at: Mapped[float] = mapped_column(Float)


class ListingRow(Base):
    """A dataset listing by its digest: ``[path, size, version]`` per file, by path. It
    is kept while a dataset names it or a job not yet ended is pinned to it, so a task
    started long after its job was pinned still copies exactly what the pin names."""

    __tablename__ = "dataset_listings"

    digest: Mapped[str] = mapped_column(String(71), primary_key=True)
    files: Mapped[int] = mapped_column(Integer)
    size: Mapped[int] = mapped_column(BigInteger)
    listing: Mapped[list[list[Any]]] = mapped_column(JSON)
    created_at: Mapped[float] = mapped_column(Float)


class TuningRow(Base):
    """A right-sizing experiment: its validated Tuning document, its owner, where it is
    (``phase`` Running, Succeeded, Failed or Stopped, with ``message``), and how many
    trials it made (a trial's number and its replica's name are never given twice)."""

    __tablename__ = "tunings"

    name: Mapped[str] = mapped_column(String(63), primary_key=True)
    user: Mapped[str] = mapped_column(String(253), index=True)
    document: Mapped[dict[str, Any]] = mapped_column(JSON)
    phase: Mapped[str] = mapped_column(String(16))
    message: Mapped[str] = mapped_column(Text, default="")
    trials_made: Mapped[int] = mapped_column(Integer, default=0)
    created_at: Mapped[float] = mapped_column(Float)
    updated_at: Mapped[float] = mapped_column(Float)
    ended_at: Mapped[float | None] = mapped_column(Float, nullable=True)


class TrialRow(Base):
    """One trial of a tuning: the candidate (``params``), the replica job that ran it
    and its node, its ``state`` (Pending, Running, Complete, Failed, Unplaceable or
    Stopped, with ``message``), what the load measured (``metrics``: one entry per rate),
    the spec's ``cost``, the objective's ``value`` and whether the spec met the SLO
    (``feasible``)."""

    __tablename__ = "tuning_trials"
    __table_args__ = (UniqueConstraint("tuning", "number"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    tuning: Mapped[str] = mapped_column(String(63), index=True)
    number: Mapped[int] = mapped_column(Integer)
    params: Mapped[dict[str, Any]] = mapped_column(JSON)
    state: Mapped[str] = mapped_column(String(16))
    message: Mapped[str] = mapped_column(Text, default="")
    job: Mapped[str | None] = mapped_column(String(253), nullable=True)
    node: Mapped[str | None] = mapped_column(String(253), nullable=True)
    metrics: Mapped[list[dict[str, Any]]] = mapped_column(JSON, default=list)
    cost: Mapped[float | None] = mapped_column(Float, nullable=True)
    value: Mapped[float | None] = mapped_column(Float, nullable=True)
    feasible: Mapped[bool | None] = mapped_column(Boolean, nullable=True)
    created_at: Mapped[float] = mapped_column(Float)
    ended_at: Mapped[float | None] = mapped_column(Float, nullable=True)


class AllocationRow(Base):
    """One placement of one task: what it held (its role's ``resources`` in canonical
    units, its ``gpus``) on which ``node`` from ``start`` (bound) to ``end`` (off the
    node; None while it holds it), and why it ended (``ended_by``). The job's ``user``,
    ``queue`` and ``role`` are copied, and the node's ``labels`` and whether it was
    ``reclaimable``, so that a report needs neither a job nor a node that may be gone:
    rows outlive their job (no foreign key). ``job_id`` is the job's row while it lives.
    ``elastic``: the task's role is elastic (what it saved on reclaimable nodes counts)."""

    __tablename__ = "allocations"
    __table_args__ = (
        Index("ix_allocations_open", "job_id", "task", "end"),
        Index("ix_allocations_end", "end"),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    job_id: Mapped[int] = mapped_column(Integer)
    job: Mapped[str] = mapped_column(String(253), index=True)
    user: Mapped[str] = mapped_column(String(253), index=True)
    queue: Mapped[str] = mapped_column(String(253), index=True)
    task: Mapped[str] = mapped_column(String(330))
    role: Mapped[str] = mapped_column(String(63))
    node: Mapped[str] = mapped_column(String(253))
    resources: Mapped[dict[str, float]] = mapped_column(JSON)
    gpus: Mapped[list[int]] = mapped_column(JSON, default=list)
    labels: Mapped[dict[str, str]] = mapped_column(JSON, default=dict)
    reclaimable: Mapped[bool] = mapped_column(Boolean, default=False)
    elastic: Mapped[bool] = mapped_column(Boolean, default=False)
    start: Mapped[float] = mapped_column(Float, index=True)
    end: Mapped[float | None] = mapped_column(Float, nullable=True)
    ended_by: Mapped[str] = mapped_column(String(32), default="")


class CardCordonRow(Base):
    """One card of one node out of scheduling: ``source`` ``health`` (its readings
    failed a health rule: ``reason`` says which) or ``admin``, ``since`` when."""

    __tablename__ = "card_cordons"

    node: Mapped[str] = mapped_column(String(253), primary_key=True)
    gpu: Mapped[int] = mapped_column(Integer, primary_key=True)
    uuid: Mapped[str] = mapped_column(String(80))
    reason: Mapped[str] = mapped_column(Text)
    source: Mapped[str] = mapped_column(String(16))
    since: Mapped[float] = mapped_column(Float)


class GpuUseRow(Base):
    """One job's use of its cards from ``start`` to ``end`` (one window, about a
    minute): ``samples`` readings of ``cards`` cards, utilisation in percent (mean and
    peak of any one card) and memory in bytes (mean and peak of all its cards)."""

    __tablename__ = "gpu_use"
    __table_args__ = (Index("ix_gpu_use_job", "job_id", "start"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    job_id: Mapped[int] = mapped_column(ForeignKey("jobs.id", ondelete="CASCADE"))
    start: Mapped[float] = mapped_column(Float)
    end: Mapped[float] = mapped_column(Float)
    samples: Mapped[int] = mapped_column(Integer)
    cards: Mapped[int] = mapped_column(Integer)
    utilisation: Mapped[float] = mapped_column(Float)
    utilisation_peak: Mapped[float] = mapped_column(Float)
    memory: Mapped[float] = mapped_column(Float)
    memory_peak: Mapped[float] = mapped_column(Float)
