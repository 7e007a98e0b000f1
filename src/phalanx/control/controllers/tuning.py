"""The tuner: runs every tuning's trials (issue 40, KubeDL-Morphling's profiling).

Guarantees:
- each trial is a real replica job of the tuned predictor with exactly the candidate
  spec (its resources and variables; ``tuned.with_params``), submitted as the tuning's
  user through the service's queue and placed by the engine like any job, with its
  limits enforced by the executor; it is labelled ``phalanx.dev/tuning``, and no
  serving controller routes to it;
- trials of one tuning never share a node: a trial is submitted only once every trial
  under way has its node, kept off those nodes (``phalanx.io/node NotIn``); at most
  ``parallel`` run at once, ``trials`` in all (fewer when a grid is exhausted);
- a trial whose replica runs is measured on a thread of its own, never on the tick:
  readiness (``readinessPath`` answering 200), a warm-up at the first rate for
  ``load.warmup``, then an open-loop load at each rate for ``load.duration``
  (``phalanx.tuning.load``: no coordinated omission), climbing ``rates`` while the
  SLO holds; its replica is then cancelled;
- a trial that cannot be measured ends once, never retried: Failed (its replica
  failed, never answered, or the load could not reach it), or Unplaceable (not placed
  within ``placementTimeout``: the engine's reason is kept), and is told to the search
  as a failure (``Search.tell``), whose samplers then never propose that point again;
- the search is the tuning's own (``phalanx.tuning.search``), rebuilt from the stored
  trials when this process meets the tuning first; a trial under way when the server
  stopped is Failed at the next start, saying so (its replica is cancelled);
- a training tuning's trial is the job with the candidate set on its role, run for
  ``trialDuration`` from its first progress report (``phalanx.client.progress``: what
  it does before, starting and loading data, is not measured); the samples/s it last
  reported, per GPU it held (per core without GPUs), is its value; one that reported
  nothing within ``REPORT_GRACE`` seconds of running, or failed, is Failed;
- once every trial ended the tuning is Succeeded with its best trial (``tuned``), or
  Failed when none met the objective; a Stopped or deleted tuning's measurements end
  at their next step and write nothing.
"""

from __future__ import annotations

import json
import logging
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, Final

import httpx

from phalanx.control.auth import Principal, UserRole
from phalanx.control.controllers.ticker import Ticker
from phalanx.control.errors import ApiError
from phalanx.control.store import jobs as stored_jobs
from phalanx.control.store import services as stored_services
from phalanx.control.store import tunings as stored
from phalanx.control.store import users as stored_users
from phalanx.control.store.database import Database
from phalanx.control.store.models import TrialRow, TuningRow
from phalanx.control.submit import check_models, resolve_queues, store_jobs
from phalanx.control.tuned import best_trial, tuned_predictor, with_params
from phalanx.domain.errors import InvalidInput, PhalanxError
from phalanx.domain.job import JobPhase
from phalanx.domain.node import NODE_NAME_LABEL
from phalanx.spec.inference import InferenceDocument, PredictorSpec
from phalanx.spec.job import JobDocument, RoleSpec
from phalanx.spec.model import model_reference
from phalanx.spec.tuning import MAX_PARALLEL, TuningDocument, TuningSpec
from phalanx.tuning.load import LoadResult, drive_sync, warmup_sync
from phalanx.tuning.objective import (
    CheapestWithinSlo,
    Limits,
    MostSamplesPerGpu,
    MostThroughputPerCost,
    Objective,
    Prices,
    ceiling_for,
)
from phalanx.tuning.search import Direction, Search, TrialRecord
from phalanx.tuning.space import Parameter, Space

log = logging.getLogger(__name__)

#: The label of a trial's replica job: the tuning it belongs to.
TUNING_LABEL: Final = "phalanx.dev/tuning"
#: How long a trial's replica may take from running to answering its readiness path.
READY_TIMEOUT: Final = 180.0
#: Seconds a training trial may run before its first report (starting, loading data).
REPORT_GRACE: Final = 120.0
#: Requests sent one after another before a trial is loaded (the replica answers).
FIRST_REQUESTS: Final = 3
_ENDED_JOBS: Final = frozenset(
    {JobPhase.SUCCEEDED.value, JobPhase.FAILED.value, JobPhase.CANCELLED.value}
)


@dataclass(frozen=True, slots=True)
class Measured:
    """What one trial's measurement found: the load at each rate, or why it failed."""

    results: tuple[LoadResult, ...] = ()
    problem: str = ""


class Tuner:
    """See the module docstring. ``on_stored`` takes the jobs this submits (the
    controller's intake); ``prices`` are the admin's; ``start``/``stop`` its thread,
    ``poke`` when a tuning was created, stopped or deleted."""

    def __init__(
        self,
        db: Database,
        *,
        on_stored: Callable[[Sequence[tuple[int, Any]]], None],
        prices: Prices | None = None,
        period: float = 1.0,
        python: str = sys.executable,
    ) -> None:
        self.db = db
        self._on_stored = on_stored
        self.prices = prices or Prices()
        self._period = period
        self._python = python
        self._searches: dict[str, Search] = {}
        self._measuring: dict[tuple[str, int], Future[Measured]] = {}
        #: when each training trial's first report was seen (its trial runs from then)
        self._reporting: dict[tuple[str, int], float] = {}
        self._pool = ThreadPoolExecutor(2 * MAX_PARALLEL, thread_name_prefix="phalanx-tune")
        self._ticker = Ticker("phalanx-tuner", self.tick)

    def start(self) -> None:
        """Run trials on a thread of its own."""
        self._ticker.start()

    def stop(self, timeout: float = 10.0) -> bool:
        """Stop after the pass under way (measurements in flight are abandoned: their
        trials are Failed at the next start); False when it ran on past ``timeout``."""
        stopped = self._ticker.stop(timeout)
        self._pool.shutdown(wait=False, cancel_futures=True)
        return stopped

    def poke(self) -> None:
        """Look at the tunings soon."""
        self._ticker.poke()

    def tick(self) -> float:
        """One pass over the running tunings; seconds until the next."""
        try:
            with self.db.session() as session:
                tunings = [
                    (row, list(stored.trials(session, row.name))) for row in stored.running(session)
                ]
                session.expunge_all()
            running = {row.name for row, _ in tunings}
            for name in list(self._searches):
                if name not in running:
                    del self._searches[name]
            for key in [k for k in self._measuring if k[0] not in running]:
                self._measuring.pop(key).cancel()
            for row, trials in tunings:
                if self._ticker.stopping:
                    break
                try:
                    self._advance(row, trials)
                except PhalanxError as error:  # the tuning cannot go on: say why, once
                    self._end(row.name, stored.FAILED, str(error))
        except Exception:  # a database outage: try again next pass
            log.exception("tuning pass failed; trying again")
        return self._period

    # -- one tuning ------------------------------------------------------------------------

    def _advance(self, row: TuningRow, trials: list[TrialRow]) -> None:
        document = TuningDocument.model_validate(row.document)
        spec = document.spec
        search = self._search(row.name, spec, trials)
        live = [t for t in trials if t.state not in stored.TRIAL_ENDED]
        for trial in live:
            self._follow(row, spec, search, trial)
        with self.db.session() as session:
            trials = list(stored.trials(session, row.name))
            session.expunge_all()
        live = [t for t in trials if t.state not in stored.TRIAL_ENDED]
        while (
            len(live) < spec.parallel
            and len(trials) < spec.trials
            and not search.exhausted
            and all(t.node for t in live)
        ):
            made = self._start_trial(row, spec, search, [t.node for t in live if t.node])
            trials.append(made)
            if made.state not in stored.TRIAL_ENDED:
                live.append(made)
        if not live and (len(trials) >= spec.trials or search.exhausted):
            best = best_trial(document, trials)
            if best is None:
                self._end(
                    row.name,
                    stored.FAILED,
                    "no trial met the objective; widen the space or relax the SLO",
                )
            else:
                params = " ".join(f"{k}={v}" for k, v in best.params.items())
                self._end(
                    row.name,
                    stored.SUCCEEDED,
                    f"best: trial {best.number} ({params}), value {best.value:.6g}",
                )

    def _search(self, name: str, spec: TuningSpec, trials: list[TrialRow]) -> Search:
        """The tuning's search: made and restored from its ended trials when this
        process meets it first (trials under way then are Failed: see the docstring)."""
        search = self._searches.get(name)
        if search is not None:
            return search
        cost, feasible = None, None
        if spec.objective.goal == "cheapest":  # a spec's value is its cost, known ahead
            base = self._predictor_resources(spec)
            objective = objective_of(spec, self.prices, base)
            assert isinstance(objective, CheapestWithinSlo)
            ceiling = objective.ceiling

            def cost(params: Mapping[str, Any]) -> float:
                return self.prices.cost(with_params_resources(spec, dict(params), base))

            def feasible(value: float) -> bool:
                return value < ceiling

        search = Search(
            space_of(spec),
            direction=direction_of(spec),
            sampler=spec.sampler,
            seed=spec.seed or 0,
            cost=cost,
            feasible=feasible,
        )
        now = time.time()
        records = []
        for trial in trials:
            if trial.state not in stored.TRIAL_ENDED:
                self._finish(
                    name, trial, stored.TRIAL_FAILED, "the server restarted while it ran", now=now
                )
                trial.state = stored.TRIAL_FAILED
            complete = trial.state == stored.COMPLETE and trial.value is not None
            records.append(
                TrialRecord(
                    number=trial.number,
                    params=trial.params,
                    state="complete" if complete else "failed",
                    value=trial.value if complete else None,
                    reason=trial.message or None,
                )
            )
        search.restore(records)
        self._searches[name] = search
        return search

    def _start_trial(
        self, row: TuningRow, spec: TuningSpec, search: Search, busy: list[str]
    ) -> TrialRow:
        """Ask the search for a point and start its replica (or record a repeat)."""
        proposal = search.ask()
        now = time.time()
        params = dict(proposal.params)
        with self.db.write() as session:
            trial = stored.add_trial(session, row.name, proposal.number, params, now=now)
            if not proposal.measure:
                earlier = next(
                    (t for t in stored.trials(session, row.name) if t.number == proposal.repeat_of),
                    None,
                )
                trial.state = stored.COMPLETE if proposal.value is not None else stored.TRIAL_FAILED
                trial.value, trial.ended_at = proposal.value, now
                trial.message = f"the same spec as trial {proposal.repeat_of}: not measured again"
                if earlier is not None:
                    trial.cost, trial.feasible, trial.metrics = (
                        earlier.cost,
                        earlier.feasible,
                        earlier.metrics,
                    )
            session.flush()
            session.expunge(trial)
        if not proposal.measure:
            return trial
        try:
            job = self._submit(row, spec, trial, busy)
        except (ApiError, PhalanxError) as error:
            message = error.detail if isinstance(error, ApiError) else str(error)
            search.tell(trial.number, None, reason=str(message))
            self._finish(
                row.name,
                trial,
                stored.TRIAL_FAILED,
                f"its replica was refused: {message}",
                now=time.time(),
            )
            trial.state = stored.TRIAL_FAILED
            return trial
        trial.job = job
        return trial

    def _submit(self, row: TuningRow, spec: TuningSpec, trial: TrialRow, busy: list[str]) -> str:
        """Submit trial ``trial``'s job (a replica, or the training job), off the nodes
        ``busy``; its name."""
        name = f"{row.name}-trial-{trial.number}"
        with self.db.write() as session:
            if spec.job is not None:
                job = training_trial_job(spec, trial.params, name, row.name, row.user, busy)
            else:
                service = stored_services.get(session, spec.inference or "")
                if service is None or service.user != row.user:
                    raise InvalidInput(
                        f"inference {spec.inference!r} is gone",
                        field="spec.inference",
                        fix="tune a service that exists",
                    )
                inference = InferenceDocument.model_validate(service.document)
                predictor = with_params(tuned_predictor(inference, spec), spec, trial.params)
                job = trial_job(inference, predictor, name, row.name, busy, python=self._python)
            user = stored_users.user(session, row.user)
            role = UserRole(user.role) if user is not None else UserRole.USER
            caller = Principal(name=row.user, role=role)
            (checked,) = check_models(session, resolve_queues(session, [(job, caller)]))
            if isinstance(checked, ApiError):
                raise checked
            (stored_row,) = store_jobs(session, [checked])
            stored.update_trial(session, row.name, trial.number, job=name)
        self._on_stored([(stored_row.id, stored_row.job)])
        return name

    def _follow(self, row: TuningRow, spec: TuningSpec, search: Search, trial: TrialRow) -> None:
        """Move trial ``trial`` on: its replica placed, measured, ended."""
        key = (row.name, trial.number)
        future = self._measuring.get(key)
        if future is not None:
            if future.done():
                del self._measuring[key]
                self._measured(row, spec, search, trial, future.result())
            return
        if trial.job is None:
            return
        replica = self._replica(trial.job)
        now = time.time()
        if replica is not None and replica.phase in _ENDED_JOBS and spec.job is not None:
            self._follow_training(row, spec, search, trial, replica, now)
        elif replica is None or replica.phase in _ENDED_JOBS:
            why = (
                "its replica is gone"
                if replica is None
                else f"its replica ended {replica.phase}: {replica.message}"
            )
            self._fail(row, search, trial, stored.TRIAL_FAILED, why)
        elif spec.job is not None:
            self._follow_training(row, spec, search, trial, replica, now)
        elif replica.endpoint is not None and replica.node is not None:
            with self.db.write() as session:
                stored.update_trial(
                    session, row.name, trial.number, state=stored.MEASURING, node=replica.node
                )
            predictor = self._predictor(spec)
            readiness = "/healthz" if predictor is None else predictor.readiness_path
            self._measuring[key] = self._pool.submit(
                self._measure, spec, replica.endpoint, readiness, load_path(spec, predictor)
            )
        elif replica.node is not None and trial.node is None:
            with self.db.write() as session:
                stored.update_trial(session, row.name, trial.number, node=replica.node)
        elif replica.node is None and now - trial.created_at > spec.placement_timeout:
            why = f"not placed within {spec.placement_timeout:g} s" + (
                f": {replica.message}" if replica.message else ""
            )
            self._fail(row, search, trial, stored.UNPLACEABLE, why)

    def _follow_training(
        self,
        row: TuningRow,
        spec: TuningSpec,
        search: Search,
        trial: TrialRow,
        replica: stored.TrialReplica,
        now: float,
    ) -> None:
        """Move a training trial on: placed, run for ``trialDuration``, its last report
        taken (or, when it ended first, the report it left), its job stopped."""
        if replica.node is not None and trial.node is None:
            with self.db.write() as session:
                stored.update_trial(
                    session, row.name, trial.number, state=stored.MEASURING, node=replica.node
                )
        ended = replica.phase in _ENDED_JOBS
        key = (row.name, trial.number)
        if replica.progress is not None:
            self._reporting.setdefault(key, now)
        ran = now - self._reporting.get(key, now) >= spec.trial_duration
        silent = (
            replica.started_at is not None
            and key not in self._reporting
            and now - replica.started_at >= spec.trial_duration + REPORT_GRACE
        )
        if replica.started_at is None and not ended:
            if now - trial.created_at > spec.placement_timeout:
                why = f"not placed within {spec.placement_timeout:g} s" + (
                    f": {replica.message}" if replica.message else ""
                )
                self._fail(row, search, trial, stored.UNPLACEABLE, why)
            return
        if not (ran or ended or silent):
            return
        self._reporting.pop(key, None)
        rate = (replica.progress or {}).get("samplesPerSecond")
        if not isinstance(rate, int | float) or (ended and replica.phase != "Succeeded"):
            why = (
                f"its job ended {replica.phase}: {replica.message}"
                if ended and replica.phase != "Succeeded"
                else f"it reported no samples/s (phalanx.client.progress) in "
                f"{spec.trial_duration + REPORT_GRACE:g} s of running"
            )
            self._fail(row, search, trial, stored.TRIAL_FAILED, why)
            return
        role = tuned_role(spec)
        resources = with_params_resources(spec, trial.params, dict(role.resources))
        replicas = int(trial.params.get("replicas", role.replicas))
        scored = MostSamplesPerGpu(prices=self.prices).score_samples(
            resources, replicas, float(rate)
        )
        search.tell(trial.number, scored.value)
        with self.db.write() as session:
            stored.update_trial(
                session,
                row.name,
                trial.number,
                state=stored.COMPLETE,
                metrics=[{**(replica.progress or {}), "throughput": float(rate)}],
                cost=scored.cost,
                value=scored.value,
                feasible=True,
                message="",
                ended_at=now,
            )
            if trial.job:
                stored_jobs.request_cancel(session, [trial.job], delete=True)

    def _measured(
        self, row: TuningRow, spec: TuningSpec, search: Search, trial: TrialRow, measured: Measured
    ) -> None:
        """Record what trial ``trial``'s measurement found, tell the search, and stop its
        replica."""
        if measured.problem:
            self._fail(row, search, trial, stored.TRIAL_FAILED, measured.problem)
            return
        base = self._predictor_resources(spec)
        resources = with_params_resources(spec, trial.params, base)
        scored = objective_of(spec, self.prices, base).score(resources, measured.results)
        search.tell(trial.number, scored.value)
        now = time.time()
        with self.db.write() as session:
            if stored.get(session, row.name) is None:
                return  # deleted meanwhile
            stored.update_trial(
                session,
                row.name,
                trial.number,
                state=stored.COMPLETE,
                message="" if scored.feasible else scored.reason,
                metrics=[metrics_of(r) for r in measured.results],
                cost=scored.cost,
                value=scored.value,
                feasible=scored.feasible,
                ended_at=now,
            )
            if trial.job:
                stored_jobs.request_cancel(session, [trial.job], delete=True)

    def _fail(self, row: TuningRow, search: Search, trial: TrialRow, state: str, why: str) -> None:
        """End trial ``trial`` as ``state`` (it was not measured), told as a failure."""
        search.tell(trial.number, None, reason=why)
        self._finish(row.name, trial, state, why, now=time.time())

    def _finish(self, name: str, trial: TrialRow, state: str, why: str, *, now: float) -> None:
        with self.db.write() as session:
            stored.update_trial(
                session, name, trial.number, state=state, message=why[:2000], ended_at=now
            )
            if trial.job:
                stored_jobs.request_cancel(session, [trial.job], delete=True)

    def _end(self, name: str, phase: str, message: str) -> None:
        with self.db.write() as session:
            stored.end(session, name, phase, message, now=time.time())
        self._searches.pop(name, None)

    # -- reading ----------------------------------------------------------------------------

    def _replica(self, job: str) -> stored.TrialReplica | None:
        with self.db.session() as session:
            return stored.replica(session, job)

    def _predictor(self, spec: TuningSpec) -> PredictorSpec | None:
        """The predictor ``spec`` tunes, as its service holds it now (None: gone)."""
        with self.db.session() as session:
            service = stored_services.get(session, spec.inference or "")
            document = None if service is None else service.document
        if document is None:
            return None
        return tuned_predictor(InferenceDocument.model_validate(document), spec)

    def _predictor_resources(self, spec: TuningSpec) -> dict[str, Any]:
        """The resources the parameters leave as they are: the tuned role's or
        predictor's."""
        if spec.job is not None:
            return dict(tuned_role(spec).resources)
        predictor = self._predictor(spec)
        return {} if predictor is None else dict(predictor.resources)

    # -- measuring (on the pool's threads) ---------------------------------------------------

    def _measure(self, spec: TuningSpec, endpoint: str, readiness: str, path: str) -> Measured:
        """Measure the replica at ``endpoint`` once ``readiness`` answers 200, loading
        ``path`` (see the module docstring)."""
        base = f"http://{endpoint}"
        problem = _ready(base + readiness)
        if problem:
            return Measured(problem=problem)
        url, body = base + path, json.dumps(spec.load.body).encode()
        headers = {"Content-Type": "application/json"}
        first = warmup_sync(url, count=FIRST_REQUESTS, body=body, headers=headers)
        if first.unreachable is not None:
            return Measured(
                problem=f"its replica could not be reached at {url}: {first.unreachable}"
            )
        objective = spec.objective
        rates = (
            [objective.rate]
            if objective.rate is not None and objective.goal == "cheapest"
            else objective.rates
        )
        if spec.load.warmup > 0:
            drive_sync(url, rate=rates[0], duration=spec.load.warmup, body=body, headers=headers)
        results: list[LoadResult] = []
        for rate in rates:
            if self._ticker.stopping:
                return Measured(problem="the server stopped during its measurement")
            result = drive_sync(
                url, rate=rate, duration=spec.load.duration, body=body, headers=headers
            )
            results.append(result)
            if limits_of(spec).violation(result) > 0:
                break  # the SLO broke: higher rates break it too
        return Measured(results=tuple(results))


def load_path(spec: TuningSpec, predictor: PredictorSpec | None) -> str:
    """Where a trial's load goes: ``load.path``, else the torchscript runtime's predict
    path of the predictor's model."""
    if spec.load.path is not None:
        return spec.load.path
    if predictor is None:
        return "/"
    return f"/v1/models/{model_reference(predictor.model_version).name}:predict"


def space_of(spec: TuningSpec) -> Space:
    """The search space of ``spec``'s parameters."""
    return Space(
        tuple(
            Parameter.parse(
                name=p.name,
                category=p.category,
                kind=p.type,
                low=p.low,
                high=p.high,
                step=p.step,
                log=p.log,
                values=tuple(p.values),
            )
            for p in spec.parameters
        )
    )


def limits_of(spec: TuningSpec) -> Limits:
    """The SLO ``spec``'s objective holds each run to."""
    objective = spec.objective
    return Limits(p99=objective.latency_p99, error_rate=objective.max_error_rate)


def objective_of(spec: TuningSpec, prices: Prices, base: dict[str, Any]) -> Objective:
    """``spec``'s objective priced by ``prices``; ``base`` is the predictor's resources
    (what the parameters leave as they are)."""
    if spec.objective.goal == "cheapest":
        ceiling = ceiling_for(space_of(spec), prices, base)
        return CheapestWithinSlo(limits=limits_of(spec), ceiling=ceiling, prices=prices)
    return MostThroughputPerCost(limits=limits_of(spec), prices=prices)


def direction_of(spec: TuningSpec) -> Direction:
    """Whether ``spec``'s objective is minimised (the cheapest) or maximised."""
    return "minimize" if spec.objective.goal == "cheapest" else "maximize"


def with_params_resources(
    spec: TuningSpec, params: dict[str, Any], base: dict[str, Any]
) -> dict[str, Any]:
    """The trial's resources: ``base`` (the predictor's) with the resources params set."""
    resources = dict(base)
    for parameter in spec.parameters:
        if parameter.category == "resources" and parameter.name in params:
            resources[parameter.name] = params[parameter.name]
    return resources


def trial_job(
    inference: InferenceDocument,
    predictor: PredictorSpec,
    name: str,
    tuning: str,
    busy: Sequence[str],
    *,
    python: str,
) -> JobDocument:
    """A trial's replica job: the predictor's replica with ``tuning``'s label instead of
    the service's, off the nodes ``busy``."""
    job = inference.replica_job(predictor, name, python=python)
    raw = job.model_dump(mode="json", by_alias=True, exclude_none=True)
    raw["metadata"]["labels"] = {TUNING_LABEL: tuning}
    _keep_off(raw["spec"], busy)
    return JobDocument.model_validate(raw)


def tuned_role(spec: TuningSpec) -> RoleSpec:
    """The role of ``spec.job`` the parameters set (its first when unnamed)."""
    assert spec.job is not None
    return next(r for r in spec.job.roles if spec.role in (None, r.name))


def training_trial_job(
    spec: TuningSpec,
    params: dict[str, Any],
    name: str,
    tuning: str,
    user: str,
    busy: Sequence[str],
) -> JobDocument:
    """A training trial: ``spec.job`` as ``user``'s job ``name`` with ``params`` set on
    the tuned role (resources, env, replicas), labelled with ``tuning``, off the nodes
    ``busy``. The role is elastic at exactly its size (min = max), so that its progress
    reports are read (the controller reads elastic jobs'), and never resized."""
    assert spec.job is not None
    raw = spec.job.model_dump(mode="json", by_alias=True, exclude_none=True)
    tuned = tuned_role(spec).name
    for role in raw["roles"]:
        if role["name"] != tuned:
            continue
        for parameter in spec.parameters:
            if parameter.name not in params:
                continue
            value = params[parameter.name]
            if parameter.category == "resources":
                role.setdefault("resources", {})[parameter.name] = value
            elif parameter.category == "env":
                role.setdefault("env", {})[parameter.name] = str(value)
            else:
                role["replicas"] = int(value)
        role["elastic"] = {
            "minReplicas": role["replicas"],
            "maxReplicas": role["replicas"],
            "mode": "restart",
        }
    raw["user"] = user
    _keep_off(raw, busy)
    return JobDocument.model_validate(
        {
            "apiVersion": "phalanx/v1",
            "kind": "Job",
            "metadata": {"name": name, "labels": {TUNING_LABEL: tuning}},
            "spec": raw,
        }
    )


def _keep_off(spec: dict[str, Any], busy: Sequence[str]) -> None:
    """Make a job's (raw) ``spec`` a trial's: kept off the nodes ``busy``
    (``phalanx.io/node NotIn``), and never retried (a trial that fails is a result,
    measured once: its point is not tried again)."""
    spec["maxRetry"] = 0
    if busy:
        term = {"key": NODE_NAME_LABEL, "operator": "NotIn", "values": sorted(set(busy))}
        spec["affinity"] = [*spec.get("affinity", []), term]


def metrics_of(result: LoadResult) -> dict[str, Any]:
    """What a trial keeps of one rate's load: all of it (``LoadResult.to_dict``: rate,
    sent, ok, errors by kind, throughput, p50, p90, p99, max, error rate ...)."""
    return result.to_dict()


def _ready(url: str) -> str:
    """Wait until ``url`` answers 200; why it did not within ``READY_TIMEOUT``."""
    deadline = time.monotonic() + READY_TIMEOUT
    last = ""
    with httpx.Client(timeout=5.0) as client:
        while time.monotonic() < deadline:
            try:
                if client.get(url).status_code == 200:
                    return ""
                last = "it answered other than 200"
            except httpx.HTTPError as error:
                last = str(error) or type(error).__name__
            time.sleep(0.5)
    return f"its replica did not answer {url} within {READY_TIMEOUT:g} s ({last})"
