"""What the API returns. Read schemas: clients ignore fields they do not know."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, model_validator


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


class JobSummaryView(View):
    """A job as a listing shows it: its phase, why it is there, and how many of its
    tasks are in each phase (never the tasks themselves)."""

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
    #: deleted while live: it is removed once its tasks have stopped
    delete_requested: bool = False
    #: what all its replicas ask for together: cpu in millicores, memory in bytes, gpu
    requests: dict[str, float] = {}
    #: how many of its tasks are in each task phase (every task of the job)
    task_counts: dict[str, int] = {}
    #: what its tasks in Bound, Running or Releasing hold now (their requests), same units
    allocated: dict[str, float] = {}
    #: the nodes its tasks in Bound, Running or Releasing are on, by name
    nodes: list[str] = []
    #: its place in its queue's line as of the last scheduling session (1: served
    #: first), counted among the jobs that session left waiting in that queue in the
    #: order the scheduler serves them (priority, then arrival); None unless waiting
    #: (Pending or Queued) and ranked by a session since it was submitted
    queue_position: int | None = None


class PriorityFactorsView(View):
    """The four factors of a multifactor priority (or their weights), as the fairshare
    plugin names them: ``age`` (time waited over its ``maxAge``), ``fair_share``
    (``2 ** (-U / S)`` of the job's user in its queue), ``size`` (the gang's share of the
    cluster) and ``priority`` (the job's own priority, scaled among the waiting jobs)."""

    age: float
    fair_share: float
    size: float
    priority: float


class JobPriorityView(View):
    """A waiting job's multifactor priority as of the last scheduling tick: each factor
    (0..1), each factor's weight, and ``total``, the sum of factor times weight (higher
    goes first among jobs that nothing else sets apart)."""

    factors: PriorityFactorsView
    weights: PriorityFactorsView
    total: float
    #: when the controller computed it (seconds since the epoch)
    time: float

    def line(self) -> str:
        """One line for people: ``1.23 (age 0.50 x1, fair-share 0.73 x1, ...)``."""
        f, w = self.factors, self.weights
        parts = [("age", f.age, w.age), ("fair-share", f.fair_share, w.fair_share)]
        parts += [("size", f.size, w.size), ("class", f.priority, w.priority)]
        said = ", ".join(f"{name} {value:.2f} x{weight:g}" for name, value, weight in parts)
        return f"{self.total:.2f} ({said})"


class JobView(JobSummaryView):
    """A job with its document and its first tasks (at most 1,000, in order); when it
    has more, ``tasks_omitted`` says how many, and ``GET /api/v1/jobs/{name}/tasks``
    pages through them all."""

    tasks: list[TaskView] = []
    #: how many tasks follow those in ``tasks``
    tasks_omitted: int = 0
    document: dict[str, Any] | None = None
    #: its tasks' latest progress report (step, samplesPerSecond, ... and ``time``, when
    #: it was read); None until one reports
    progress: dict[str, Any] | None = None
    #: its multifactor priority while it waits (Pending or Queued) and the server's
    #: scheduler has the fairshare plugin; None otherwise, or until a tick saw it
    priority: JobPriorityView | None = None


class JobPage(View):
    """One page of jobs; pass ``next`` as ``after`` for the following page."""

    items: list[JobSummaryView]
    next: int | None = None


class TaskPage(View):
    """One page of a job's tasks, in order; pass ``next`` as ``after`` for the following
    page (None: this is the last)."""

    items: list[TaskView]
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
    #: the fair share the last scheduling session computed, never below the guarantee
    #: (the guarantee alone until a session ran: ``share_computed``)
    deserved: dict[str, float]
    #: whether ``deserved`` is a session's computed share rather than the guarantee alone
    share_computed: bool = False
    #: the deserved share the queue's document sets (``spec.deserved``); None: computed
    #: from its weight
    configured_deserved: dict[str, float] | None = None
    capability: dict[str, float]
    allocated: dict[str, float]
    submitters: list[str] | None = None
    jobs: dict[str, int] = {}
    document: dict[str, Any]


class GpuView(View):
    """One GPU card of a node: how much of it is taken, and by which tasks: the names of
    those the caller may see (their own; every one for an admin) and how many others."""

    index: int
    model: str = ""
    used: float  # 0..1 of the card
    tasks: list[str] = []
    #: tasks of other users on the card, whose names are not shown to this caller
    other_tasks: int = 0
    uuid: str = ""
    #: at the node's latest reading (``read_at``; None: never read): percent busy, bytes
    #: of memory used and in all, degrees Celsius, watts, the last XID error (0: none)
    read_at: float | None = None
    utilisation: float | None = None
    memory_used: int | None = None
    memory_total: int | None = None
    temperature: float | None = None
    power: float | None = None
    xid: int = 0
    #: why the card is out of scheduling (its health, or an admin), since when; None: it
    #: takes work
    cordoned: str | None = None
    cordoned_by: Literal["health", "admin"] | None = None
    cordoned_since: float | None = None


#: A node's state for people: NotReady wins, then Draining/Drained, then Cordoned.
NodeStatus = Literal["Ready", "NotReady", "Cordoned", "Draining", "Drained"]


def node_status(fields: dict[str, Any]) -> NodeStatus:
    """The status of a node view's fields: NotReady (its executor lost it) first; a drain
    with no task left is Drained."""
    if not fields.get("ready", True):
        return "NotReady"
    if fields.get("draining", False):
        return "Draining" if fields.get("tasks", 0) else "Drained"
    if fields.get("cordoned", False):
        return "Cordoned"
    return "Ready"


class NodeView(View):
    """A node: capacity, what is allocated, its GPUs, and whether it takes new work."""

    name: str
    # where its tasks are reached, as declared in the Cluster document (None: the executor's host)
    address: str | None = None
    capacity: dict[str, float]
    allocated: dict[str, float]
    labels: dict[str, str] = {}
    #: its switch at each network tier, as the Cluster document places it (``tor``,
    #: ``spine``, ...; empty: no place declared)
    network: dict[str, str] = {}
    gpus: list[GpuView] = []
    #: why the node's GPUs are not read (no NVML library or driver); None: they are, or
    #: it has none to read
    gpu_readings_absent: str | None = None
    cordoned: bool = False
    draining: bool = False
    #: False when its executor lost it (a Ray node Ray declared dead): it takes no task
    ready: bool = True
    tasks: int = 0
    #: Ready, NotReady, Cordoned, Draining (tasks still stopping) or Drained (none left);
    #: derived from the fields above when not given (``node_status``)
    status: NodeStatus = "Ready"

    @model_validator(mode="before")
    @classmethod
    def _derive_status(cls, data: Any) -> Any:
        if isinstance(data, dict) and "status" not in data:
            data = {**data, "status": node_status(data)}
        return data

    #: how its tasks' CPU, memory and processes are limited, and the defaults
    limits: str = ""
    #: which Unix identity its tasks run as
    identity: str = ""


class UserView(View):
    """A user, the Unix identity their tasks run as (None: the server's own), and their
    default queue."""

    name: str
    role: str
    uid: int | None = None
    #: the existing account that identity is; None for an allocated uid
    account: str | None = None
    #: where their jobs that name no queue go; None: the queue named ``default``
    default_queue: str | None = None


class TokenView(View):
    """A new token with its secret, which is shown only in this answer; for a new user,
    the Unix identity their tasks run as and their default queue too."""

    user: str
    token: str
    id: int
    label: str = ""
    created_at: float
    #: when it stops working (epoch seconds); None: when it is revoked
    expires_at: float | None = None
    uid: int | None = None
    account: str | None = None
    default_queue: str | None = None


class TokenInfoView(View):
    """A token as listed: never its secret, which the server does not keep."""

    id: int
    user: str
    label: str = ""
    created_at: float
    #: when it stops working (epoch seconds); None: when it is revoked
    expires_at: float | None = None
    #: past its expiry: refused, kept listed until revoked
    expired: bool = False
    #: the token that made this request
    current: bool = False


class ProblemView(View):
    """One thing wrong with a request: where and what."""

    field: str
    detail: str


class ErrorView(View):
    """Every error answer: what is wrong (``detail``), where (``field``: a parameter, a
    header or a document path), and what to do (``fix``); a request that fails
    validation lists each problem in ``problems``."""

    detail: str
    field: str | None = None
    fix: str | None = None
    problems: list[ProblemView] | None = None


class PipelineView(View):
    """A registered pipeline: its document as stored (validated, canonical)."""

    name: str
    user: str
    created_at: float
    updated_at: float
    document: dict[str, Any]
    next_run_at: float | None = None  # when its schedule next starts a run (None: no schedule)


class StepView(View):
    """One unit of a run (a step, or one foreach item of a step ``train[3]``)."""

    unit: str
    phase: str
    attempt: int = 0
    job: str = ""
    reason: str = ""
    started_at: float | None = None
    finished_at: float | None = None
    retry_at: float | None = None  # its next attempt is submitted then (after a backoff)
    after: list[str] = []  # the steps it depends on (the DAG's edges into it)
    outputs: dict[str, Any] = {}


class RunView(View):
    """One run of a pipeline: its params, phase and (when asked for one run) its units in
    graph order."""

    id: str
    pipeline: str
    user: str
    phase: str
    message: str = ""
    params: dict[str, Any] = {}
    created_at: float
    finished_at: float | None = None
    stop_requested: bool = False
    resumed_from: str | None = None  # the run this one resumes, if any
    parent: str | None = None  # the run whose sub-pipeline step started this one, if any
    scheduled_at: float | None = None  # the schedule's firing it was started for, if any
    cache: str = "use"  # the step cache: use, refresh (write only) or off
    steps: list[StepView] = []


class RunPage(View):
    """One page of runs, oldest first; pass ``next`` (a run id) as ``after`` for the
    following page (None: this is the last)."""

    items: list[RunView]
    next: str | None = None


class CacheEntryView(View):
    """One entry of the step cache: the key, the step and run that produced it
    (lineage), when, until when it is served, its outputs as downstream steps see them,
    each artifact's URL and content hash, and the canonical document hashed into the key."""

    key: str
    pipeline: str
    step: str
    unit: str
    run_id: str
    user: str  # the producing run's user: the entry is served to their runs
    created_at: float
    expires_at: float | None = None
    outputs: dict[str, Any] = {}
    artifacts: dict[str, Any] = {}
    material: dict[str, Any] = {}


class ReportView(View):
    """One report of the server's reports folder (``phalanx up --reports DIR``): read it
    at ``/api/v1/reports/{name}``."""

    name: str
    media_type: str  # text/html, image/svg+xml or application/json
    size: int  # bytes
    modified_at: float
    servable: bool = True  # False: over the size the server serves


class HistoryBucketView(View):
    """What the control plane saw in ``[start, start + bucket_seconds)``: its scheduling
    sessions (count, mean and longest duration in seconds), the jobs they started, the
    tasks they evicted (preempt and reclaim), and the last pending-job count and GPU
    allocation ratio (0..1) a tick saw (None: none recorded in the bucket)."""

    start: float
    sessions: int
    session_mean: float
    session_max: float
    started: int
    evicted: int
    pending: int | None = None
    gpu_ratio: float | None = None


class HistoryView(View):
    """The server's own recent metrics, oldest bucket first: only buckets in which
    something was recorded (kept in memory: ``retention_seconds`` at most, none from
    before the server's start)."""

    bucket_seconds: float
    retention_seconds: float
    buckets: list[HistoryBucketView]


class ModelFileView(View):
    """One file of a model version: its path in the version, size and sha256."""

    path: str
    size: int
    digest: str


class ModelVersionView(View):
    """One immutable version of a model, ``name:vVERSION``: its content's digest, size
    and file count, who registered it when, and its lineage (the job and role whose task
    wrote it; the pipeline run and step when it was one; the command, image, environment
    names and the run's params); its container image, when its job asked for one.
    ``contents``: its files, when asked for one version."""

    name: str
    version: int
    digest: str
    size: int
    files: int
    user: str
    created_at: float
    job: str
    role: str
    run_id: str | None = None
    step: str | None = None
    lineage: dict[str, Any] = {}
    image_phase: str | None = None  # None: no image asked for; Building, Built or Failed
    image: str | None = None  # its container image's tag, once Built
    image_message: str = ""  # why its image failed
    contents: list[ModelFileView] = []


class ModelView(View):
    """A model: its name, owner, how many versions it has and the newest of them."""

    name: str
    user: str
    versions: int
    latest: ModelVersionView


class ReplicaView(View):
    """One replica of a predictor: the job that runs it, its phase, where it serves
    (``host:port`` on its node, once its task runs; None before), and whether it is
    Ready (answered its readiness path there; the gateway routes to it)."""

    job: str
    phase: str
    ready: bool
    endpoint: str | None = None


class PredictorView(View):
    """A predictor of a service: what it serves, its traffic share and its replicas."""

    name: str
    model_version: str
    traffic: int
    min_replicas: int
    max_replicas: int
    ready: int  # how many replicas are Ready
    replicas: list[ReplicaView]


class RolloutStepView(View):
    """One entry of a rollout's history: what was done, at what traffic, and the
    canary's figures over the window that led to it."""

    at: float
    action: Literal["started", "promoted", "completed", "rolled-back", "aborted"]
    traffic: int  # the canary's share of the predictor's traffic after it, in percent
    reason: str
    requests: int = 0  # the canary's requests in the window
    errors: int = 0  # of which answered 5xx
    p99_seconds: float | None = None  # the canary's p99 latency in the window


class RolloutView(View):
    """A rollout of a predictor to another model version: its steps, where it stands
    and why, and its history."""

    id: int
    service: str
    predictor: str
    canary: str  # the predictor that serves the new version while it rolls out
    from_version: str
    to_version: str
    steps: list[int]
    step: int  # the index in steps of the traffic share now given
    traffic: int  # the canary's share now, in percent
    phase: Literal["Progressing", "Succeeded", "RolledBack"]
    reason: str  # why it stands where it does (what it waits for, or why it ended)
    user: str  # who started it
    started_at: float
    finished_at: float | None = None
    interval_seconds: float
    max_error_rate: float
    max_p99_seconds: float | None = None
    min_requests: int
    ready_timeout_seconds: float
    history: list[RolloutStepView] = []


class InferenceView(View):
    """An inference service: its document as stored (model versions pinned), where it
    is reached, each predictor's replicas, and its rollouts (newest first)."""

    name: str
    user: str
    created_at: float
    updated_at: float
    url: str  # the gateway's path of it: /serve/NAME/
    ready: bool  # every predictor with traffic has a Ready replica
    predictors: list[PredictorView]
    document: dict[str, Any]
    rollouts: list[RolloutView] = []


class DatasetNodeView(View):
    """One node's cache with a dataset's current listing: ``state`` Warm (it holds a
    copy), Filling (one is being copied there) or Failed (``message`` says why)."""

    node: str
    state: str
    message: str = ""


class DatasetView(View):
    """A user's dataset as the API shows it: its document, and what the last listing of
    its source found. ``phase``: Listing (none yet), Ready, or Failed (``message`` says
    why; a dataset listed before keeps that listing, which jobs read). ``digest``
    names the listing (the copy the nodes cache); ``files`` and ``size`` count it;
    ``nodes`` are the nodes that hold it, are being given it, or could not be (a node
    not named holds no copy of it)."""

    name: str
    user: str
    document: dict[str, Any]
    phase: str
    message: str
    files: int
    size: int  # bytes
    digest: str | None
    listed_at: float | None
    created_at: float
    updated_at: float
    nodes: list[DatasetNodeView] = []


class SecretView(View):
    """A user's secret as the API shows it: its key names and total size, never a
    value (those are sealed at rest and only the owner's tasks get them)."""

    name: str
    user: str
    keys: list[str]  # sorted
    size: int  # bytes of all its values together
    created_at: float
    updated_at: float  # when it was last replaced (created_at until then)


class TrialView(View):
    """One trial of a tuning: its candidate (``params``: parameter name -> value), its
    ``state`` (Pending, Running, Complete, Failed, Unplaceable or Stopped; ``message``
    says why it ended otherwise than Complete, or what it fell short of), the replica
    job and node it ran on, what the load measured (``metrics``: one entry per rate:
    rate, scheduled, sent, ok, errors by kind, throughput, p50, p90, p99 and max latency
    in seconds, error_rate), the
    spec's ``cost``, the objective's ``value`` and whether it met the SLO."""

    number: int
    params: dict[str, Any]
    state: str
    message: str
    job: str | None
    node: str | None
    metrics: list[dict[str, Any]]
    cost: float | None
    value: float | None
    feasible: bool | None
    created_at: float
    ended_at: float | None


class TuningView(View):
    """A right-sizing experiment: its document, ``phase`` (Running, Succeeded, Failed
    or Stopped, with ``message``), its trials by number, and the best trial so far
    (``best``: the feasible Complete trial with the best value; None before one)."""

    name: str
    user: str
    document: dict[str, Any]
    phase: str
    message: str
    trials: list[TrialView]
    best: TrialView | None
    created_at: float
    updated_at: float
    ended_at: float | None
