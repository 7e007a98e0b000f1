"""A pipeline's runs replayed in the simulator: each step (each foreach item) a job.

The replay drives runs exactly as the workflow controller does, with the same pure
parts: ``phalanx.workflow.plan`` decides what starts, what is skipped (``when``,
upstream failures, ``onFailure``) and when ``finally`` steps run, over the graph of
``build_graph``; ``job_spec`` makes each unit's job (its queue, resources and roles, its
``timeout`` as walltime); ``attempt_ended`` and the step's ``retry`` decide a retry of
a failed or preempted attempt (a preempted job is cancelled: its attempt is over). The
jobs go through ``Simulation``: the engine's sessions place them, the one lifecycle runs
them, and a job's end (``on_job_end``) feeds the plan, which submits what became ready
at that very time. What the replay cannot know comes from ``Timings``: how long each
unit runs once placed, its output params, how many of its attempts fail. The step cache
is not consulted: every step runs.

Guarantees: the same document, timings, params, cluster, queues and config give the
same outcomes; a unit's queue delay is the time its jobs waited to be placed (summed
over attempts) and its JCT the time from its first job's submission to its end; a run's
makespan is from its arrival to its last unit's end. A run whose job can never be
placed (more GPUs than a node has, say) does not finish: its unit says why, in the
engine's words.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import TextIO

from phalanx.domain.errors import InvalidInput
from phalanx.domain.job import JobPhase
from phalanx.domain.node import Node
from phalanx.domain.queue import Queue
from phalanx.engine.decisions import Decisions
from phalanx.engine.framework.config import SchedulerConfig
from phalanx.engine.framework.registry import Registry
from phalanx.engine.lifecycle import Event, JobChanged
from phalanx.sim.metrics import Metrics
from phalanx.sim.pipeline.timings import Timings
from phalanx.sim.runner import SimOptions, Simulation
from phalanx.sim.workload import Workload, WorkloadJob
from phalanx.spec.pipeline import Graph, StepNode
from phalanx.spec.pipeline.params import ParamValue
from phalanx.spec.pipeline.parts import FailureCause
from phalanx.spec.pipeline.templates import Value
from phalanx.workflow import (
    Phase,
    RunPhase,
    RunState,
    Start,
    Unit,
    Workspace,
    job_name,
    job_spec,
    plan,
    unit_context,
)
from phalanx.workflow.jobs import attempt_ended

#: Where replayed runs "write" their artifacts: the paths templates render to.
SIM_WORKSPACE = Workspace("sim://workspace")


@dataclass(frozen=True, slots=True, kw_only=True)
class UnitOutcome:
    """One unit of one run as the replay saw it (times in simulated seconds)."""

    unit: str
    step: str
    phase: Phase
    reason: str = ""
    jobs: tuple[str, ...] = ()  # one per attempt, in order
    submitted: float | None = None  # its first job's submission
    started: float | None = None  # its last job's first placement
    ended: float | None = None
    queue_delay: float | None = None  # summed over attempts; None: no job was placed

    @property
    def jct(self) -> float | None:
        """From the first job's submission to the unit's end; None: no job, or unfinished."""
        if self.submitted is None or self.ended is None:
            return None
        return self.ended - self.submitted


@dataclass(frozen=True, slots=True, kw_only=True)
class RunOutcome:
    """One run: when it arrived and ended, its phase, its units in graph order."""

    id: str
    arrival: float
    ended: float | None
    phase: RunPhase
    units: tuple[UnitOutcome, ...]

    @property
    def makespan(self) -> float | None:
        """Arrival to end; None: the run did not finish (a step never got placed)."""
        return None if self.ended is None else self.ended - self.arrival


@dataclass(frozen=True, slots=True, kw_only=True)
class Replay:
    """What a replay produced: each run, and the simulation's metrics of all jobs."""

    pipeline: str
    runs: tuple[RunOutcome, ...]
    metrics: Metrics
    wall_seconds: float


@dataclass(slots=True)
class _Unit:
    jobs: list[str] = field(default_factory=list)
    submitted: float | None = None
    started: float | None = None
    ended: float | None = None
    delay: float | None = None
    reason: str = ""
    start: Start | None = None  # what the plan said, for retries


@dataclass(slots=True)
class _Run:
    id: str
    arrival: float
    params: Mapping[str, Value]
    phases: dict[Unit, Phase] = field(default_factory=dict)
    outputs: dict[Unit, dict[str, Value]] = field(default_factory=dict)
    expanded: dict[str, int] = field(default_factory=dict)
    units: dict[Unit, _Unit] = field(default_factory=dict)
    ended: float | None = None
    phase: RunPhase = RunPhase.PENDING

    def state(self) -> RunState:
        # The planner copies what it changes: the live mappings can be handed over as they are.
        return RunState(
            params=self.params,
            phases=self.phases,
            outputs=self.outputs,
            expanded=self.expanded,
            run_id=self.id,
        )

    def unit(self, unit: Unit) -> _Unit:
        return self.units.setdefault(unit, _Unit())


class _Driver:
    """The workflow controller of the replay: plans runs, submits and follows their jobs."""

    sim: Simulation  # set once the simulation, which calls ``job_ended``, exists

    def __init__(self, graph: Graph, timings: Timings) -> None:
        self.graph = graph
        self.timings = timings
        self.jobs: dict[str, tuple[_Run, Unit]] = {}  # live jobs
        self.pending: dict[str, str] = {}  # why a live job was last left pending

    def arrive(self, run: _Run, now: float) -> None:
        run.phase = RunPhase.RUNNING
        self.advance(run, now)

    def advance(self, run: _Run, now: float) -> None:
        """Plan ``run`` until nothing more happens now: record settles, submit starts."""
        while run.ended is None:
            step = plan(self.graph, run.state())
            run.expanded.update(step.expand)
            for settle in step.settle:
                self._end(run, settle.unit, settle.phase, settle.reason, now)
            run.phases.update({start.unit: Phase.RUNNING for start in step.start})
            for start in step.start:
                run.unit(start.unit).start = start
                self._submit(run, start, attempt=1, now=now)
            if step.finished:
                run.ended, run.phase = now, step.phase
            elif not (step.expand or step.settle or step.start):
                return

    def _submit(self, run: _Run, start: Start, *, attempt: int, now: float) -> None:
        unit = start.unit
        node = self.graph.node(unit.step)
        try:
            outputs = SIM_WORKSPACE.outputs(run.id, unit, node)
            context = unit_context(self.graph, run.state(), start, outputs=outputs)
            spec = job_spec(node, context, unit=str(unit))
        except InvalidInput as error:  # a reference that does not resolve, say
            self._end(run, unit, Phase.FAILED, str(error), now)
            return
        name = job_name(run.id, unit, attempt)
        timing = self.timings.of(unit)
        # A failing attempt fails once it has run its duration: the cluster fails a run at
        # ``fail_after`` only when that comes before the end of its work, so the work is longer.
        fails = attempt <= timing.failures
        self.sim.submit(
            WorkloadJob(
                job=spec.to_job(name, now),
                duration=2 * timing.duration if fails else timing.duration,
                fail_after=(timing.duration,) if fails else (),
            )
        )
        self.jobs[name] = (run, unit)
        record = run.unit(unit)
        record.jobs.append(name)
        record.submitted = now if record.submitted is None else record.submitted

    def job_ended(self, change: JobChanged) -> None:
        """Record the unit of the job that ended; retry it or plan its run on."""
        found = self._attempt_over(change.job)
        if found is None:
            return
        run, unit = found
        now = change.time
        if change.phase is JobPhase.SUCCEEDED:
            node = self.graph.node(unit.step)
            values: dict[str, Value] = dict(SIM_WORKSPACE.outputs(run.id, unit, node))
            for name in node.outputs.params:
                values.pop(name)
            values.update(self.timings.of(unit).outputs)
            run.outputs[unit] = values
            self._end(run, unit, Phase.SUCCEEDED, "", now)
        elif change.phase is JobPhase.FAILED:
            ended = attempt_ended(
                change.job, failed=True, reason=change.reason, message=change.message
            )
            if self._retried(run, unit, *ended, now=now):
                return
        else:
            self._end(run, unit, Phase.CANCELLED, f"job {change.job} was cancelled", now)
        self.advance(run, now)

    def preempted(self, event: Event) -> None:
        """A session evicted a live job: as in the control plane, its attempt is over (the
        job is cancelled) and the step's ``retry`` decides for the cause ``preempted``."""
        found = self._attempt_over(event.job)
        if found is None:
            return
        run, unit = found
        now = event.time
        # Cancelled from an action of its own: the lifecycle is amid its effects here.
        message = f"its step's attempt ended: {event.message}"
        self.sim.call_at(now, lambda _: self.sim.cancel(event.job, message))
        ended = attempt_ended(event.job, failed=False, reason="", message=event.message)
        if not self._retried(run, unit, *ended, now=now):
            self.advance(run, now)

    def _attempt_over(self, job: str) -> tuple[_Run, Unit] | None:
        """The run and unit of the live ``job``, no longer live; its wait recorded."""
        found = self.jobs.pop(job, None)
        if found is not None:
            record = found[0].unit(found[1])
            figures = self.sim.metrics.jobs[job]
            if figures.first_start is not None:
                record.started = figures.first_start
                record.delay = (record.delay or 0.0) + figures.first_start - figures.submit
        return found

    def _retried(self, run: _Run, unit: Unit, cause: FailureCause, why: str, *, now: float) -> bool:
        """Retry ``unit`` by its step's policy (True), or end it Failed (False)."""
        record = run.unit(unit)
        delay = self.graph.node(unit.step).retry.delay(len(record.jobs), cause)
        if delay is None:
            self._end(run, unit, Phase.FAILED, why, now)
            return False
        record.reason = f"{why}; retried after {delay:g} s"
        self.sim.call_at(now + delay, lambda at: self._retry(run, unit, at))
        return True

    def session(self, now: float, decisions: Decisions) -> None:
        """Remember why each live job of the replay was left pending."""
        for item in decisions.unschedulable:
            if item.job in self.jobs:
                self.pending[item.job] = item.reason.message

    def finish(self) -> None:
        """The simulation ended: a unit whose job was never placed says why."""
        for name, (run, unit) in self.jobs.items():
            if self.sim.metrics.jobs[name].first_start is None:
                why = self.pending.get(name, "no session placed it")
                run.unit(unit).reason = f"job {name} was never placed: {why}"

    def _retry(self, run: _Run, unit: Unit, now: float) -> None:
        record = run.unit(unit)
        assert record.start is not None  # a unit retried was started
        self._submit(run, record.start, attempt=len(record.jobs) + 1, now=now)
        self.advance(run, now)

    def _end(self, run: _Run, unit: Unit, phase: Phase, reason: str, now: float) -> None:
        run.phases[unit] = phase
        record = run.unit(unit)
        record.ended, record.reason = now, reason


def replay_pipeline(
    graph: Graph,
    timings: Timings,
    *,
    name: str,
    nodes: Sequence[Node],
    queues: Sequence[Queue],
    config: SchedulerConfig,
    params: Mapping[str, ParamValue],
    runs: int = 1,
    interval: float = 0.0,
    options: SimOptions | None = None,
    registry: Registry | None = None,
    events_out: TextIO | None = None,
) -> Replay:
    """``runs`` runs of the pipeline ``name`` (its ``graph``, with ``params`` resolved),
    the i-th arriving at ``i * interval``, replayed on ``nodes`` with ``queues`` under
    ``config``. ``options`` default: a session as soon as a job arrives or ends (no
    trigger delay), so an idle cluster adds no wait between steps. Raises
    ``InvalidInput`` for a graph ``check_replayable`` refuses."""
    check_replayable(graph)
    driver = _Driver(graph, timings)
    simulation = Simulation(
        nodes,
        Workload(jobs=(), queues=tuple(queues), source=f"pipeline {name}"),
        config,
        options=options or SimOptions(trigger_delay=0.0),
        registry=registry,
        events_out=events_out,
        on_job_end=driver.job_ended,
        on_session=driver.session,
        on_preempted=driver.preempted,
    )
    driver.sim = simulation
    values = {key: _value(value) for key, value in params.items()}
    played = [_Run(id=f"{name}-{i}", arrival=i * interval, params=values) for i in range(runs)]
    for run in played:
        simulation.call_at(run.arrival, partial(driver.arrive, run))
    metrics = simulation.run()
    driver.finish()
    return Replay(
        pipeline=name,
        runs=tuple(_outcome(graph, run) for run in played),
        metrics=metrics,
        wall_seconds=simulation.wall_seconds,
    )


def _value(value: ParamValue) -> Value:
    if isinstance(value, list):
        items: list[Value] = list(value)
        return items
    return value


def _outcome(graph: Graph, run: _Run) -> RunOutcome:
    units: list[UnitOutcome] = []
    for step in [*graph.order, *graph.final]:
        count = run.expanded.get(step)
        own = [Unit(step)] if count is None or Unit(step) in run.phases else []
        for unit in [*own, *(Unit(step, i) for i in range(count or 0))]:
            record = run.units.get(unit, _Unit())
            units.append(
                UnitOutcome(
                    unit=str(unit),
                    step=step,
                    phase=run.phases.get(unit, Phase.PENDING),
                    reason=record.reason,
                    jobs=tuple(record.jobs),
                    submitted=record.submitted,
                    started=record.started,
                    ended=record.ended,
                    queue_delay=record.delay,
                )
            )
    return RunOutcome(
        id=run.id,
        arrival=run.arrival,
        ended=run.ended,
        phase=run.phase,
        units=tuple(units),
    )


def check_replayable(graph: Graph) -> None:
    """Raise ``InvalidInput`` for a step the replay cannot play: a sub-pipeline step
    (``pipeline``) runs another registered document, which a replay of one file lacks."""
    for node in _nodes(graph):
        if node.pipeline is not None:
            raise InvalidInput(
                f"step {node.name} runs the pipeline {node.pipeline.name!r} as a child run, "
                "which a replay of this one document cannot play",
                field=f"steps.{node.name}.pipeline",
                fix=f"replay {node.pipeline.name} on its own, and give this step its "
                "makespan as a command step's duration here",
            )


def pipeline_queues(graph: Graph, given: Sequence[Queue]) -> tuple[Queue, ...]:
    """The queues of a replay: ``given`` (they must hold every step's queue), or one
    queue of default settings per step queue when none are given. Raises
    ``InvalidInput`` naming the step and its queue."""
    if not given:
        names = {n.queue for n in _nodes(graph) if n.pipeline is None}
        return tuple(Queue(name=name) for name in sorted(names))
    names = {queue.name for queue in given}
    for node in _nodes(graph):
        if node.pipeline is None and node.queue not in names:
            raise InvalidInput(
                f"step {node.name} runs in queue {node.queue!r}, which is not among the queues "
                f"given ({', '.join(sorted(names))})",
                field=f"steps.{node.name}.queue",
                fix="add a Queue document of that name, or give no queues (each step queue "
                "then gets one with default settings)",
            )
    return tuple(given)


def _nodes(graph: Graph) -> list[StepNode]:
    return [*graph.steps.values(), *graph.final.values()]
