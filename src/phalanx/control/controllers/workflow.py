"""The workflow controller: the single writer of runs' phases and records.

One more controller of the control plane, on a thread of its own. A tick first starts
the runs that pipelines' cron schedules have due (``schedules``), then reads every
active run (Pending or Running), and for each, in one transaction:

1. observes its units' jobs in the store (the job controller writes their phases):
   a Succeeded job's unit reads its output params (``phalanx.workflow.read_outputs``)
   and Succeeds, or Fails when they are missing or bad; a Failed job's unit is retried
   by its step's ``retry`` (``RetrySpec.delay``: the next attempt's job is submitted
   once the delay has passed) or Fails; a Cancelled job's unit is Cancelled. A job
   that was preempted (evicted: its ``preemptions`` count went up) ends its attempt
   too: it is cancelled, and its unit retried by the step's ``retry`` for the cause
   ``preempted`` or Failed; so a step's retries and backoff, not the job lifecycle's
   free requeue, decide what a preemption costs;
2. due retries submit their next attempt;
3. plans (``phalanx.workflow.plan``) and records each plan's expansions, settles and
   starts before planning again, until a plan asks for nothing more. Each start becomes
   one job (``job_spec``, maxRetry 0) named ``job_name(run, unit, attempt)``, owned by
   the run's user, inserted as the API inserts jobs (``submit.store_jobs``), its
   output directory made in the run's workspace first; a stop cancels the jobs of the
   Running units the plan lists. The datasets a started unit reads are pinned, in the
   same transaction, to their listings now (``workflow.datasets``): those listings go
   into its cache key and onto its job, a unit whose dataset was never listed yet
   waits Pending, and one whose dataset is not there (or never listed well) fails;
4. writes the run's record and phase with the jobs it inserted, in the same commit.

A unit of a sub-pipeline step (``pipeline``) runs no job: its start inserts a child
run of the named pipeline (its document as it is then; the run's user; params rendered
from the step's templates; ``parent`` the run), whose id is the attempt's job name, and
the unit ends as that run ends (a failed child is retried by the step's ``retry`` as a
failed job is); a stop of the run stops its child runs. A pipeline that would run
itself, or nest deeper than ``MAX_NESTING``, fails the step.

Because a unit is recorded Running with its job's name in the transaction that inserts
the job (or its child run), a restarted server finds every job it submitted and never
submits one twice.
After the commit it hands the new jobs to the job controller (``offer`` + ``wake``).
The job controller tells it when jobs end (``poke``), so a step's successor starts
within one tick of the job controller; it also ticks every ``period``.
"""

from __future__ import annotations

import hashlib
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path
from typing import Any

import fsspec

from phalanx.control.auth import Principal, UserRole
from phalanx.control.controllers.caching import (
    artifact_urls,
    key_contents,
    keyed_listings,
    lookup,
    material_of,
    other_data,
    step_listings,
    store,
)
from phalanx.control.controllers.controller import Controller
from phalanx.control.controllers.hashing import Hashes, NotYetHashed
from phalanx.control.controllers.intents import Intent
from phalanx.control.controllers.runs import (
    AttemptEnd,
    RunRecord,
    UnitRecord,
    end_unit,
    new_run,
    retry_or_fail,
    run_summary,
)
from phalanx.control.controllers.schedules import fire_due
from phalanx.control.controllers.ticker import Ticker
from phalanx.control.errors import ApiError
from phalanx.control.store import Session
from phalanx.control.store import jobs as stored_jobs
from phalanx.control.store import runs as stored_runs
from phalanx.control.store.database import Database
from phalanx.control.store.jobs import JobOutcome
from phalanx.control.store.models import PipelineRow, RunRow
from phalanx.control.submit import resolve_queues, store_jobs
from phalanx.domain.errors import InvalidInput, PhalanxError
from phalanx.domain.job import JobPhase
from phalanx.executors.identity import TaskIdentity
from phalanx.spec.common import Metadata
from phalanx.spec.job import JobDocument
from phalanx.spec.pipeline import Graph, PipelineDocument, build_graph, resolve
from phalanx.spec.pipeline.dag import StepNode
from phalanx.spec.pipeline.templates import Context, TemplateError, Value
from phalanx.tenantfs import Place, TenantPathRefused, make_dirs
from phalanx.workflow import (
    OutputError,
    Phase,
    RunPhase,
    RunState,
    Start,
    Unit,
    Workspace,
    check_transition,
    job_name,
    job_spec,
    plan,
    read_outputs,
    unit_context,
)
from phalanx.workflow.contents import Access, written
from phalanx.workflow.datasets import KEYED, keyed
from phalanx.workflow.jobs import attempt_ended
from phalanx.workflow.planner import render_value
from phalanx.workflow.state import items_of

log = logging.getLogger(__name__)

#: The label of every step job: the run it belongs to.
RUN_LABEL = "phalanx.run"
#: The mode of a local workspace and its ``runs/`` where tasks run as their users' own
#: uids: each enters their runs, and lists no one's.
PASSAGE_MODE = 0o711
#: The mode of every other directory the controller makes.
PRIVATE_MODE = 0o700
#: Run phases the controller still works on.
#: Sub-pipelines nest at most this deep (a run, its child, the child's child ...).
MAX_NESTING = 5
#: Plans made in one tick for one run, at most (each records something, so a run needs
#: about one per step it settles at once; the next tick goes on).
_PLANS_PER_TICK = 1_000


class _Begin(Enum):
    """What became of a unit the plan started, as far as the cache goes."""

    JOB = "job"  # it runs a job (not cached, or a miss)
    DONE = "done"  # no job: served from the cache, or failed for what its key reads
    HASHING = "hashing"  # its key's contents are being hashed: it stays Pending
    LISTING = "listing"  # a dataset it reads was never listed yet: it stays Pending


@dataclass(slots=True)
class _Pass:
    """One run's pass in a tick, in one transaction: what it reads (the run's row, its
    graph and record, whether it is stopping, the tick's time) and what it produced
    (jobs to insert, jobs to cancel). The record is changed in place; ``row.state`` is
    written from it at the end of the pass."""

    session: Session
    row: RunRow
    graph: Graph
    record: RunRecord
    now: float
    jobs: list[JobDocument] = field(default_factory=list)
    cancel: list[str] = field(default_factory=list)

    @property
    def stopping(self) -> bool:
        return self.row.stop_requested

    def state(self, *, stopping: bool = False) -> RunState:
        """The run's state as the planner reads it."""
        return self.record.state(run_id=self.row.id, params=self.row.params, stopping=stopping)


class Workflows:
    """Runs ticks on a thread of its own; ``poke`` asks for one soon."""

    def __init__(
        self,
        db: Database,
        controller: Controller,
        workspace: Workspace,
        *,
        period: float = 1.0,
        identity_of: Callable[[str], TaskIdentity] | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.db = db
        self.controller = controller
        self.workspace = workspace
        self.period = period
        self.clock = clock
        self._identity_of = identity_of
        self._graphs: dict[str, Graph] = {}
        #: Key material of cached units under way (shown by ``cache show``), by run and unit.
        self._materials: dict[tuple[str, Unit], dict[str, Any]] = {}
        self._schedules_minute = -1.0  # the minute (time // 60) schedules were looked at
        self._ticker = Ticker("phalanx-workflows", self._round)
        #: The contents of cache keys and entries, hashed off this thread.
        self._hashes = Hashes(self.poke)

    def start(self) -> None:
        """Tick on a daemon thread until ``shutdown``."""
        self._ticker.start()

    def poke(self) -> None:
        """Ask for a tick soon (thread-safe): a run or a job changed."""
        self._ticker.poke()

    def shutdown(self, timeout: float = 10.0) -> bool:
        """Stop once the tick under way is done; False if it was still running."""
        stopped = self._ticker.stop(timeout)
        self._hashes.close()
        return stopped

    def _round(self) -> float:
        try:
            self.tick()
        except Exception:  # a bug must not stop the service: the next tick retries
            log.exception("workflow tick failed")
        return self.period

    # -- one tick ------------------------------------------------------------------------

    def tick(self) -> None:
        """Start the runs pipelines' schedules have due (``schedules.fire_due``), then
        advance every active run, each in its own transaction."""
        now = self.clock()
        if now // 60 != self._schedules_minute:  # cron fires on minutes: once a minute
            with self.db.write() as session:
                fire_due(session, now)
            self._schedules_minute = now // 60
        with self.db.session() as session:
            ids = stored_runs.active_ids(session)
        for run_id in ids:
            try:
                self._advance(run_id)
            except Exception as error:  # one broken run must not hold the others
                log.exception("advancing run %s failed; failing the run", run_id)
                self._fail(run_id, f"the workflow controller met an error: {error!r}"[:2000])
        live = set(ids)
        for gone in [run for run in self._graphs if run not in live]:
            del self._graphs[gone]
        for key in [key for key in self._materials if key[0] not in live]:
            del self._materials[key]

    def _advance(self, run_id: str) -> None:
        now = self.clock()
        with self.db.write() as session:
            row = session.get(RunRow, run_id)
            if row is None or row.phase not in stored_runs.ACTIVE:
                return
            graph = self._graph(row)
            work = _Pass(session, row, graph, RunRecord.from_json(row.state), now)
            phase = self._plan_run(work)
            stored = store_jobs(session, work.jobs) if work.jobs else []
            if work.cancel:
                stored_jobs.request_cancel(session, work.cancel)
                stored_runs.request_stop(session, work.cancel)  # sub-pipeline units' runs
            if phase is not RunPhase.RUNNING:
                row.finished_at = now
                row.message = run_summary(RunRecord.from_json(row.state), phase)
                self._graphs.pop(run_id, None)
            row.phase = phase.value
        if stored:
            self.controller.offer([(s.id, s.job) for s in stored])
            self.controller.wake(Intent.JOBS)
        if work.cancel:
            self.controller.wake(Intent.CANCELS)

    def _fail(self, run_id: str, message: str) -> None:
        with self.db.write() as session:
            row = session.get(RunRow, run_id)
            if row is not None and row.phase in stored_runs.ACTIVE:
                row.phase, row.message, row.finished_at = (
                    RunPhase.FAILED.value,
                    message,
                    self.clock(),
                )
        self._graphs.pop(run_id, None)

    def _graph(self, row: RunRow) -> Graph:
        graph = self._graphs.get(row.id)
        if graph is None:
            graph = build_graph(PipelineDocument.model_validate(row.document).spec)
            self._graphs[row.id] = graph
        return graph

    def _plan_run(self, work: _Pass) -> RunPhase:
        """Observe, retry, plan; the run's record updated in ``work.row``; its phase now."""
        record, now = work.record, work.now
        self._observe(work)
        for unit, unit_record in sorted(record.units.items()):
            if unit_record.phase is not Phase.RUNNING or unit_record.retry_at is None:
                continue
            if work.stopping:
                end_unit(unit, unit_record, Phase.CANCELLED, "the run was stopped", now)
            elif unit_record.retry_at <= now:
                unit_record.retry_at = None
                unit_record.attempt += 1
                self._submit(work, unit)
        phase = RunPhase.RUNNING
        for _ in range(_PLANS_PER_TICK):
            decided = plan(work.graph, work.state(stopping=work.stopping))
            phase = decided.phase
            work.cancel.extend(record.unit(unit).job for unit in decided.stop)
            for step, count in decided.expand:
                record.expanded[step] = count
            for settle in decided.settle:
                end_unit(settle.unit, record.unit(settle.unit), settle.phase, settle.reason, now)
            held = set()  # started, not begun: hashing its key, or its datasets not listed
            for start in decided.start:
                unit_record = record.unit(start.unit)
                check_transition(start.unit, unit_record.phase, Phase.RUNNING)
                pinned = self._datasets(work, start.unit)
                if isinstance(pinned, _Begin):
                    begun, pinned = pinned, {}
                else:
                    begun = self._cached(work, start, pinned)
                if begun in (_Begin.HASHING, _Begin.LISTING):
                    held.add(start.unit)  # begun on a later tick
                if begun is not _Begin.JOB:
                    continue
                unit_record.phase, unit_record.attempt, unit_record.reason = Phase.RUNNING, 1, ""
                self._submit(work, start.unit, start=start, pinned=pinned)
            started = [start for start in decided.start if start.unit not in held]
            if not (decided.expand or decided.settle or started):
                break
        work.row.state = record.to_json()
        return phase

    def _observe(self, work: _Pass) -> None:
        """Feed the ended (or preempted) jobs of Running units to their units; a preempted
        job still queued or running again is added to ``work.cancel``."""
        now, graph = work.now, work.graph
        waiting = {
            unit: r
            for unit, r in work.record.units.items()
            if r.phase is Phase.RUNNING and r.job and r.retry_at is None
        }
        children = {
            unit: r for unit, r in waiting.items() if graph.node(unit.step).pipeline is not None
        }
        for unit in children:
            del waiting[unit]
        if children:
            self._observe_children(work, children)
        if not waiting:
            return
        jobs = stored_jobs.outcomes(work.session, [r.job for r in waiting.values()])
        for unit, unit_record in sorted(waiting.items()):
            job = jobs.get(unit_record.job)
            if job is None:
                end_unit(unit, unit_record, Phase.FAILED, f"its job {unit_record.job} is gone", now)
                continue
            unit_record.started_at = job.started_at
            if job.phase == JobPhase.SUCCEEDED.value:
                self._succeeded(work, unit, job)
            elif job.phase == JobPhase.CANCELLED.value:
                end_unit(unit, unit_record, Phase.CANCELLED, "its job was cancelled", now)
            elif job.phase == JobPhase.FAILED.value or job.preemptions:
                failed = job.phase == JobPhase.FAILED.value
                cause, why = attempt_ended(
                    unit_record.job, failed=failed, reason=job.reason, message=job.message
                )
                if not failed:  # preempted: this attempt is over
                    work.cancel.append(unit_record.job)
                ended = AttemptEnd(
                    cause=cause,
                    why=why,
                    at=job.finished_at,
                    shown_by=f"phalanx logs {unit_record.job} --stderr",
                )
                retry = graph.node(unit.step).retry
                retry_or_fail(retry, unit, unit_record, ended, stopping=work.stopping, now=now)

    def _succeeded(self, work: _Pass, unit: Unit, job: JobOutcome) -> None:
        """A unit whose job Succeeded: Succeeded with its outputs read, or Failed when
        they cannot be; a cached step's entry is written first (the unit waits Running
        while its artifacts are hashed), unless its job read other listings of its
        datasets than its key names (then its reason says so)."""
        row, unit_record, node = work.row, work.record.unit(unit), work.graph.node(unit.step)
        ended = job.finished_at or work.now
        try:
            unit_record.outputs = self._outputs(row, unit, node)
        except OutputError as error:
            end_unit(unit, unit_record, Phase.FAILED, str(error), ended)
            return
        except OSError as error:  # the workspace cannot be read: this step fails
            why = f"step {unit}: its outputs cannot be read: {error}"[:2000]
            end_unit(unit, unit_record, Phase.FAILED, why, ended)
            return
        cached = unit_record.cache_key and row.cache_mode != "off"
        note = other_data(work.session, node, unit_record.job) if cached else ""
        if note:  # its job read other data than its key names: no entry
            log.info("run %s, unit %s: %s", row.id, unit, note)
            self._materials.pop((row.id, unit), None)
        elif cached and not self._remember(work, unit):
            unit_record.outputs = {}  # observed again once its artifacts are hashed
            return
        end_unit(unit, unit_record, Phase.SUCCEEDED, note, ended)

    def _observe_children(self, work: _Pass, waiting: dict[Unit, UnitRecord]) -> None:
        """Feed the ended child runs of Running sub-pipeline units to their units."""
        now = work.now
        runs = stored_runs.children(work.session, [r.job for r in waiting.values()])
        for unit, unit_record in sorted(waiting.items()):
            child = runs.get(unit_record.job)
            if child is None:
                end_unit(unit, unit_record, Phase.FAILED, f"its run {unit_record.job} is gone", now)
                continue
            unit_record.started_at = child.created_at
            if child.phase == RunPhase.SUCCEEDED.value:
                end_unit(unit, unit_record, Phase.SUCCEEDED, "", child.finished_at or now)
            elif child.phase == RunPhase.CANCELLED.value:
                end_unit(unit, unit_record, Phase.CANCELLED, "its run was stopped", now)
            elif child.phase == RunPhase.FAILED.value:
                why = f"run {unit_record.job} failed: {child.message}"[:2000]
                ended = AttemptEnd(
                    cause="failed",
                    why=why,
                    at=child.finished_at,
                    shown_by=f"phalanx describe run {unit_record.job}",
                )
                retry = work.graph.node(unit.step).retry
                retry_or_fail(retry, unit, unit_record, ended, stopping=work.stopping, now=now)

    def _datasets(self, work: _Pass, unit: Unit) -> dict[str, str] | _Begin:
        """The listing each dataset ``unit``'s step reads is pinned to for its key and
        its job (``workflow.datasets.pins``, the run's user's datasets as the store holds
        them now); LISTING while one was never listed yet (the unit stays Pending, its
        reason saying which); DONE when one is not there or its only listing failed (the
        unit Failed, naming the field, the dataset and the fix)."""
        node, unit_record = work.graph.node(unit.step), work.record.unit(unit)
        try:
            pinned, waiting = step_listings(work.session, work.row.user, node)
        except InvalidInput as error:
            end_unit(unit, unit_record, Phase.FAILED, str(error)[:2000], work.now)
            return _Begin.DONE
        if waiting is not None:
            unit_record.reason = waiting.reason
            return _Begin.LISTING
        return pinned

    def _cached(self, work: _Pass, start: Start, pinned: dict[str, str]) -> _Begin:
        """For a started unit whose step is cached (and the run uses the cache): record
        its key (the datasets it reads at the listings ``pinned``), and when a servable
        entry has it, the unit Cached with the entry's outputs (DONE). A key that cannot
        be made (a file or artifact gone, a reference that does not resolve) means no
        caching: the unit runs as usual (JOB); one whose file or artifact the server
        refuses to hash (a link, a FIFO, a file the run's user could not read:
        ``tenantfs``) fails the unit with why (DONE). While the
        contents of its key are hashed (``Hashes``), HASHING: it stays Pending."""
        row, graph, now = work.row, work.graph, work.now
        node = graph.node(start.unit.step)
        if not node.cache.enabled or row.cache_mode == "off":
            return _Begin.JOB
        unit_record = work.record.unit(start.unit)
        access = self._access(row.user)
        try:
            outputs = self.workspace.outputs(row.id, start.unit, node)
            context = unit_context(graph, work.state(), start, outputs=outputs)
            contents = key_contents(graph, node, context)
            hashes = self._hashes.batch(f"{row.id}/{start.unit}/key", contents, access)
            material = material_of(
                graph,
                node,
                context,
                user=row.user,
                hash_of=hashes.__getitem__,
                datasets=pinned,
            )
        except NotYetHashed:
            return _Begin.HASHING
        except TenantPathRefused as error:  # a link, a FIFO, a file its user cannot read
            why = (
                f"step {start.unit}, cache: {error.path}: {error.why}; fix: have the key hash "
                f"only files and directories {row.user} can read, with no link, FIFO or "
                "device on their path"
            )[:2000]
            end_unit(start.unit, unit_record, Phase.FAILED, why, now)
            return _Begin.DONE
        except (PhalanxError, TemplateError, OSError, ValueError) as error:
            log.info("run %s, unit %s: not cached: %s", row.id, start.unit, error)
            return _Begin.JOB
        unit_record.cache_key = material.key()
        self._materials[(row.id, start.unit)] = material.document()
        if row.cache_mode != "use":
            return _Begin.JOB
        entry = lookup(
            work.session,
            unit_record.cache_key,
            user=row.user,
            ttl=node.cache.ttl,
            now=now,
            access=access,
        )
        if entry is None:
            return _Begin.JOB
        unit_record.outputs = dict(entry.outputs)
        why = f"cache hit {entry.key[:12]}: from run {entry.run_id} step {entry.unit}"
        end_unit(start.unit, unit_record, Phase.CACHED, why, now)
        return _Begin.DONE

    def _remember(self, work: _Pass, unit: Unit) -> bool:
        """Write the cache entry of a unit that succeeded (a failure to is logged, never
        fails the unit); False while its artifacts are being hashed."""
        row, unit_record, node = work.row, work.record.unit(unit), work.graph.node(unit.step)
        urls = artifact_urls(node, unit_record.outputs)
        asker = f"{row.id}/{unit}/{unit_record.attempt}/entry"
        try:
            hashes = self._hashes.batch(asker, urls, self._access(row.user))
        except NotYetHashed:
            return False
        except (PhalanxError, OSError, ValueError) as error:
            self._materials.pop((row.id, unit), {})
            log.warning("run %s, unit %s: no cache entry written: %s", row.id, unit, error)
            return True
        store(
            work.session,
            key=unit_record.cache_key,
            material=self._materials.pop((row.id, unit), {}),
            pipeline=row.pipeline,
            node=node,
            unit=str(unit),
            run_id=row.id,
            user=row.user,
            outputs=unit_record.outputs,
            now=work.now,
            hash_of=hashes.__getitem__,
        )
        return True

    def _access(self, user: str) -> Access:
        """How the server reads what ``user``'s steps wrote: as their task identity."""
        identity = None if self._identity_of is None else self._identity_of(user)
        return self.workspace.access(None if identity is None else identity.reader())

    def _outputs(self, row: RunRow, unit: Unit, node: StepNode) -> dict[str, Value]:
        """What downstream steps see of a unit that succeeded: each output artifact's URL
        and each output param's value; ``OutputError`` when one was not written, or
        something else than a file or directory the run's user can read was."""
        urls = self.workspace.outputs(row.id, unit, node)
        access = self._access(row.user)
        for name in node.outputs.artifacts:
            try:
                found = written(urls[name], access)
            except TenantPathRefused as error:
                raise OutputError(
                    f"step {unit}, outputs.artifacts.{name}: {error.path}: {error.why}; "
                    f"fix: write a file or directory at {{{{outputs.{name}}}}}, no link"
                ) from None
            if not found:
                raise OutputError(
                    f"step {unit}, outputs.artifacts: the step did not write {name} at "
                    f"{urls[name]}; fix: write it at {{{{outputs.{name}}}}}"
                )
        values: dict[str, Value] = {name: urls[name] for name in node.outputs.artifacts}
        values.update(read_outputs(node, urls, access))
        return values

    def _submit(
        self,
        work: _Pass,
        unit: Unit,
        *,
        start: Start | None = None,
        pinned: dict[str, str] | None = None,
    ) -> None:
        """Make the job of ``unit``'s current attempt (``work.jobs``), or fail the unit
        with the reason it cannot have one (a reference that does not resolve, a dataset
        gone ...). Its datasets are pinned to ``pinned``, the listings its key was made
        with. A retry's (``start`` None) are pinned to their listings now (one never
        listed is left unpinned: the fetcher waits for it, as for any job), its job
        carrying over the listings the key was made with (``KEYED``) from the attempt
        before (whose job its record still names)."""
        session, row, graph, now = work.session, work.row, work.graph, work.now
        unit_record = work.record.unit(unit)
        node = graph.node(unit.step)
        try:
            key_listings = keyed(pinned or {}) if unit_record.cache_key else None
            if start is None:  # a retry: the unit's item again, its datasets as listed now
                start = _start_of(work, unit)
                pinned, _ = step_listings(session, row.user, node)
                cached = unit_record.cache_key and node.datasets
                key_listings = keyed_listings(session, unit_record.job) if cached else None
        except InvalidInput as error:
            end_unit(unit, unit_record, Phase.FAILED, str(error)[:2000], now)
            return
        name = job_name(row.id, unit, unit_record.attempt)
        unit_record.job, unit_record.started_at, unit_record.finished_at = name, None, None
        try:
            outputs = self.workspace.outputs(row.id, unit, node)
            context = unit_context(graph, work.state(), start, outputs=outputs)
            if node.pipeline is not None:
                unit_record.job = _child_id(name)
                self._start_child(work, node, unit_record.job, context)
                return
            self._make_dirs(row, unit)
            spec = job_spec(
                node, context, unit=str(unit), mounts=self.workspace.mounts(), datasets=pinned
            )
        except (PhalanxError, TemplateError, OSError, ValueError) as error:
            end_unit(unit, unit_record, Phase.FAILED, str(error)[:2000], now)
            return
        annotations = {KEYED: key_listings} if key_listings else {}
        document = JobDocument(
            metadata=Metadata(
                name=name, labels={RUN_LABEL: _label(row.id)}, annotations=annotations
            ),
            spec=spec.model_copy(update={"user": row.user}),
        )
        caller = Principal(name=row.user, role=UserRole.USER)
        resolved = resolve_queues(session, [(document, caller)])[0]
        if isinstance(resolved, ApiError):
            detail: dict[str, Any] = resolved.detail  # type: ignore[assignment]
            end_unit(
                unit, unit_record, Phase.FAILED, f"{detail['detail']}; fix: {detail['fix']}", now
            )
            return
        document = resolved
        held = stored_jobs.owner_and_document(session, name)
        if held is None:
            work.jobs.append(document)
        elif held[0] != row.user or _run_of(held[1]) != _label(row.id):
            end_unit(
                unit,
                unit_record,
                Phase.FAILED,
                f"the job name {name} is taken by a job "
                "of no step of this run; fix: delete that job, or start another run",
                now,
            )
        # else: this very job was submitted before (a restart): it is observed, not sent again

    def _start_child(self, work: _Pass, node: StepNode, child_id: str, context: Context) -> None:
        """Insert the child run ``child_id`` of a sub-pipeline unit (unless a restart finds
        it made): the named pipeline's document as it is now, the run's user, its params
        rendered in ``context``. Raises ``InvalidInput`` for a pipeline that is missing or
        would run itself, or params it refuses."""
        assert node.pipeline is not None
        session, row = work.session, work.row
        if session.get(RunRow, child_id) is not None:
            return
        name = node.pipeline.name
        chain = _ancestry(session, row)
        if name in chain or len(chain) >= MAX_NESTING:
            path = " -> ".join([*reversed(chain), name])
            raise InvalidInput(
                f"step {node.name}: pipeline {name} would run {'itself' if name in chain else 'too deep'}"
                f" ({path})",
                field="pipeline.name",
                fix=f"sub-pipelines nest at most {MAX_NESTING} deep and never include themselves",
            )
        pipeline = session.get(PipelineRow, name)
        if pipeline is None:
            raise InvalidInput(
                f"step {node.name}: no pipeline named {name!r}",
                field="pipeline.name",
                fix="register it (phalanx apply -f FILE), or fix the name",
            )
        document = PipelineDocument.model_validate(pipeline.document)
        given = {
            key: render_value(text, context, field=f"pipeline.params.{key}")
            for key, text in node.pipeline.params.items()
        }
        params = resolve(document.spec.declared_params(), given)
        session.add(
            new_run(
                child_id,
                pipeline=name,
                document=pipeline.document,
                user=row.user,
                params=params,
                created_at=work.now,
                cache=row.cache_mode,
                parent=row.id,
            )
        )
        self._ticker.poke()  # the next tick plans it

    def _make_dirs(self, row: RunRow, unit: Unit) -> None:
        """The unit's output directory. In a local workspace, made through descriptors
        (``tenantfs.make_dirs``: never through a link a step left): the run's directory
        and those below it 0700; where tasks run as their users' own uids, those are the
        run's user's and the workspace and its ``runs/`` the server's, 0711 (entered,
        not listed); else every one of them is 0700."""
        url = self.workspace.unit_url(row.id, unit)
        local = self.workspace.mounts()
        if not local:
            fs, path = fsspec.core.url_to_fs(url)
            fs.makedirs(path, exist_ok=True)
            return
        identity = None if self._identity_of is None else self._identity_of(row.user)
        shared = PASSAGE_MODE if identity is not None else PRIVATE_MODE
        root = Path(local[0])
        root.mkdir(mode=shared, parents=True, exist_ok=True)
        make_dirs(Place(root, "runs"), owner=None, mode=shared)
        runs = root / "runs"
        owner = None if identity is None else (identity.uid, identity.gid)
        make_dirs(Place(runs, str(Path(url).relative_to(runs))), owner=owner)


def _run_of(document: dict[str, Any]) -> str | None:
    """The run a stored job document is labelled with, if any."""
    labels = document.get("metadata", {}).get("labels", {})
    found = labels.get(RUN_LABEL)
    return found if isinstance(found, str) else None


def _label(run_id: str) -> str:
    """The run id as a label value (at most 63 characters)."""
    return run_id[:63].strip("-._") or "run"


def _start_of(work: _Pass, unit: Unit) -> Start:
    """The ``Start`` of ``unit`` again (for a retry): its foreach item, read as the
    planner read it."""
    if unit.index is None:
        return Start(unit=unit)
    items = items_of(work.graph, work.state(), unit.step)
    if isinstance(items, str):
        raise ValueError(f"step {unit.step}: its items cannot be read again: {items}")
    return Start(unit=unit, item=items[unit.index], has_item=True)


def _ancestry(session: Session, row: RunRow) -> list[str]:
    """The pipelines of ``row`` and of its parent runs, nearest first."""
    chain = [row.pipeline]
    parent = row.parent
    while parent is not None and len(chain) <= MAX_NESTING:
        found = stored_runs.lineage(session, parent)
        if found is None:
            break
        chain.append(found[0])
        parent = found[1]
    return chain


def _child_id(job: str) -> str:
    """The id of a sub-pipeline unit's child run: its attempt's job name, shortened with a
    hash of it when longer than a run id may be."""
    if len(job) <= 128:
        return job
    return f"{job[:100].rstrip('-')}-{hashlib.sha256(job.encode()).hexdigest()[:16]}"
