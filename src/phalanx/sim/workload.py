"""What the simulator replays: jobs with their true run time, queues, and where they came from.

A ``WorkloadJob`` is a domain ``Job`` (its ``creation_time`` is the submit time) plus what
only a replay knows: how long it runs on the resources it asked for, how often it
checkpoints (progress since the last checkpoint is lost on eviction) and how long each
of its runs takes to start making progress. An elastic training job carries its
application's profile (``ElasticModel``) instead: the simulator then advances it by
that model on whatever placement it has, and ``duration`` is only its time at the
size it asked for, for reports. A workload may say how large the datasets its jobs'
roles read are (``Workload.datasets``; ``phalanx.sim.data`` models reading them).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from phalanx.domain.errors import InvalidInput
from phalanx.domain.job import Job
from phalanx.domain.queue import Queue
from phalanx.sim.elastic.profile import AppProfile


@dataclass(frozen=True, slots=True, kw_only=True)
class ElasticModel:
    """How an elastic training job progresses: Pollux's model of ``profile``'s
    application (``phalanx.sim.elastic``). ``batch_size`` is the total batch it runs at
    when the policy keeps it at a fixed size, or always when ``adaptive`` is False;
    with ``adaptive`` (and an elastic policy) the job picks the batch of best goodput
    for each placement from its own measurements, as Pollux's jobs do.

    ``by_model``: per GPU model (a node's ``phalanx.io/gpu-model``), the application's
    profile measured on it (same progress and gradient statistics, its own step times);
    the job then trains at the speed of the type it runs on, and on a type not named
    here at ``profile``'s. Empty: ``profile``'s curves hold for any GPU."""

    profile: AppProfile
    batch_size: int
    adaptive: bool = True
    by_model: Mapping[str, AppProfile] = field(default_factory=dict)

    def on(self, model: str) -> AppProfile | None:
        """The profile measured on GPU ``model``; None when there is none."""
        return self.by_model.get(model)


@dataclass(frozen=True, slots=True, kw_only=True)
class WorkloadJob:
    """One job of a workload."""

    job: Job
    duration: float  # seconds of run time on the requested resources
    checkpoint_interval: float | None = None  # seconds; None: restarts from zero
    #: seconds each run (the first and every resume) spends starting before it progresses
    restart_delay: float = 0.0
    #: an online service's GPU load over time: (time, share of its GPUs busy) steps, sorted
    load: tuple[tuple[float, float], ...] = ()
    #: runs that fail: the n-th failing run has a task exit with code 1 after
    #: ``fail_after[n]`` seconds (its retries follow the job's maxRetry); then runs succeed
    fail_after: tuple[float, ...] = ()
    #: an elastic training job's progress model; None: it runs ``duration`` seconds
    elastic: ElasticModel | None = None
    #: its recorded mean GPU utilisation, in percent (0..100), which queues' ``idleGpus``
    #: judge (``phalanx.sim.idle``); None: not recorded, never judged idle
    gpu_util: float | None = None

    def __post_init__(self) -> None:
        if self.gpu_util is not None and not 0.0 <= self.gpu_util <= 100.0:
            raise InvalidInput(
                f"job {self.job.name!r} has a GPU utilisation of {self.gpu_util!r}%",
                field="gpu_util",
                fix="give a percent within 0..100, or none",
            )

    def load_at(self, time: float) -> float:
        """The service's load at ``time``: the last step at or before it (0 before the first)."""
        current = 0.0
        for at, value in self.load:
            if at > time:
                break
            current = value
        return current

    @property
    def name(self) -> str:
        """The job's name."""
        return self.job.name

    @property
    def submit_time(self) -> float:
        """When the job arrives (seconds from the workload's start)."""
        return self.job.creation_time


@dataclass(frozen=True, slots=True, kw_only=True)
class Dataset:
    """A dataset jobs of a workload read: ``name`` (as roles name it) and ``size`` in bytes."""

    name: str
    size: int

    def __post_init__(self) -> None:
        if self.size < 0:
            raise InvalidInput(
                f"dataset {self.name!r} has {self.size} bytes", field="size", fix="give >= 0"
            )


@dataclass(frozen=True, slots=True, kw_only=True)
class NodeFailure:
    """Node ``node`` fails at ``at`` (every task on it is lost) and is back ``repair`` s later."""

    node: str
    at: float
    repair: float


@dataclass(frozen=True, slots=True, kw_only=True)
class Workload:
    """Jobs sorted by (submit time, name), with the queues they need.

    ``queues`` are the queues a loader derives from the trace (for example Philly's
    virtual clusters); a ``--queues`` file replaces them.
    """

    jobs: tuple[WorkloadJob, ...]
    queues: tuple[Queue, ...] = ()
    source: str = ""
    notes: tuple[str, ...] = field(default=())  # what the loader assumed, for the report
    node_failures: tuple[NodeFailure, ...] = ()  # besides SimOptions' random ones
    #: the sizes of datasets its jobs' roles read, by name (``Role.datasets``)
    datasets: tuple[Dataset, ...] = ()
