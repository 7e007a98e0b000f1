"""The serving controller: each inference service's replicas, their readiness, and the
gateway's routes.

Guarantees of each pass (``Serving.tick``, on its own thread, never the scheduler's):
- every predictor of every service has as many replica jobs not ended as it wants
  (``wanted``): what its load asks (``load``: requests in flight and held, through
  ``autoscale.Autoscaler``), within its ``minReplicas`` and ``maxReplicas``; a predictor
  that scales to zero has none once the gateway saw no request for the service within
  ``idle_grace`` seconds, and at least one while requests come. Missing replicas are submitted as jobs of the service's user
  through the usual checks (queue, model versions), each named
  ``<service>-<predictor>-<n>`` with ``n`` never given twice; extra ones (newest first)
  and those of predictors no longer in the document are cancelled and deleted;
- a replica whose job ended is forgotten (and replaced, by the rule above); one of a
  service deleted meanwhile (a pass that read the service before) is cancelled;
- a replica is reached where its executor started it (``host:port``: its node's address
  and the port reserved for it there, its ``PORT``, from its task's record), on this
  host or a Ray node alike; it is Ready once its job runs and its readiness path
  answers 200 there; only Ready
  replicas are routed to, and readiness is written to the store for other gateways;
- the routes handed to ``publish`` hold, for each service, its predictors with their
  traffic shares, concurrency limits and Ready replicas, and whether replicas are on
  their way (``waking``: the gateway then holds requests instead of refusing them).
Passes come every ``period``, and every ``STARTING_PERIOD`` while a replica made in the
last ``STARTING_WINDOW`` seconds is not Ready (so it gets traffic soon after it
answers); a request held for a predictor with no replica starts a pass at once, once
per period. Each pass first reads what gateways in their own processes report
(``gateways.GatewayReports``: their demand joins the in-process gateway's, a request
they held or answered counts as the service's activity), then advances the rollouts under way (``rollouts.RolloutDriver``), so that it
reads their changes of documents and replicas whole. A submission the store refuses (a queue gone, a version deleted) is logged and tried
again next pass; one service's trouble never stops another's.
"""

from __future__ import annotations

import logging
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Final

import httpx
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from phalanx.control.auth import Principal, UserRole
from phalanx.control.controllers.autoscale import Autoscaler
from phalanx.control.controllers.gateways import GatewayReports
from phalanx.control.controllers.rollouts import RolloutDriver
from phalanx.control.controllers.ticker import Ticker
from phalanx.control.errors import ApiError
from phalanx.control.store import IntegrityError
from phalanx.control.store import jobs as stored_jobs
from phalanx.control.store import services as stored
from phalanx.control.store import users as stored_users
from phalanx.control.store.database import Database
from phalanx.control.store.models import ServiceReplicaRow, ServiceRow
from phalanx.control.submit import check_models, resolve_queues, store_jobs
from phalanx.domain.job import Job, JobPhase
from phalanx.engine.lifecycle import TERMINAL
from phalanx.gateway.routes import Predictor, Replica, Service
from phalanx.spec.inference import InferenceDocument, PredictorSpec
from phalanx.spec.job import JobDocument

log = logging.getLogger(__name__)

#: How long a predictor that scales to zero keeps a replica after the last demand.
IDLE_GRACE: Final = 30.0
#: Seconds between passes while a replica made in the last STARTING_WINDOW seconds is
#: not Ready yet: it gets traffic within this much of answering its readiness path.
STARTING_PERIOD: Final = 0.1
STARTING_WINDOW: Final = 30.0
#: How long a readiness probe may take, and how many run at once.
PROBE_TIMEOUT: Final = 1.0
PROBES: Final = 16
#: The phases of a replica job whose task may be serving.
_RUNNING: Final = JobPhase.RUNNING.value

Publish = Callable[[dict[str, Service]], None]
OnStored = Callable[[Sequence[tuple[int, Job]]], None]


@dataclass(frozen=True, slots=True)
class _Replica:
    """What a pass knows of one replica."""

    row: ServiceReplicaRow
    phase: str | None  # its job's phase (None: the job is gone)
    endpoint: str | None = None  # host:port of its running task (None: not running)


class Serving:
    """See the module docstring. ``demand(service)`` is the gateway's call when a request
    for a service found no Ready replica (thread-safe)."""

    def __init__(
        self,
        db: Database,
        *,
        publish: Publish,
        on_stored: OnStored,
        load: Callable[[str, str], float] | None = None,
        rollouts: RolloutDriver | None = None,
        reports: GatewayReports | None = None,
        period: float = 1.0,
        idle_grace: float = IDLE_GRACE,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.db = db
        self._publish = publish
        self._on_stored = on_stored
        self._period = period
        self._idle_grace = idle_grace
        self._clock = clock
        self._lock = threading.Lock()
        self._demand: dict[str, float] = {}  # service -> when the gateway last saw demand
        self._woken: dict[str, float] = {}  # service -> when its demand last started a pass
        self._load = load
        self._rollouts = rollouts
        self._reports = reports
        self._starting = False  # the last pass saw a replica starting
        self._scalers: dict[tuple[str, str], Autoscaler] = {}
        self._gone: set[str] = set()  # deleted since the last pass read the store
        self._routes: dict[str, Service] = {}  # as last published
        #: Each predictor's replicas as the last pass left them: (service, predictor) ->
        #: (desired, ready); what ``phalanx_serving_replicas`` shows.
        self.replica_counts: dict[tuple[str, str], tuple[int, int]] = {}
        self._desired: dict[tuple[str, str], int] = {}  # filled by the pass under way
        #: Who may call each service besides admins: its owner and its ``callers``.
        self.access: dict[str, frozenset[str]] = {}
        self._http = httpx.Client(
            timeout=PROBE_TIMEOUT,
            trust_env=False,
            limits=httpx.Limits(max_connections=PROBES, max_keepalive_connections=PROBES),
        )
        self._probes = ThreadPoolExecutor(PROBES, thread_name_prefix="phalanx-probe")
        self._ticker = Ticker("phalanx-serving", self.tick)

    def start(self) -> None:
        """Start on a thread of its own."""
        self._ticker.start()

    def stop(self, timeout: float = 10.0) -> bool:
        """Stop after the pass under way; False when it still ran after ``timeout``."""
        stopped = self._ticker.stop(timeout)
        if stopped:  # not under a pass still probing
            self._probes.shutdown(wait=False)
            self._http.close()
        return stopped

    def poke(self) -> None:
        """Reconcile soon (a service was applied or deleted, jobs ended)."""
        self._ticker.poke()

    def demand(self, service: str) -> None:
        """The gateway has a request for ``service`` and no Ready replica: wake it (a pass
        at once for new demand; demand already seen within a period waits for the passes
        that follow, which come every ``STARTING_PERIOD`` while a replica starts)."""
        now = self._clock()
        with self._lock:
            self._demand[service] = now
            last = self._woken.get(service)
            if last is None or now - last >= self._period:
                self._woken[service] = now
                last = None
        if last is None:
            self._ticker.poke()

    def saw_request(self, service: str) -> None:
        """The gateway served a request of ``service``: it is not idle."""
        with self._lock:
            self._demand[service] = self._clock()

    def tick(self) -> float:
        """One pass (see the module docstring); seconds until the next."""
        try:
            self._pass()
        except Exception:  # a database outage: try again next pass
            log.exception("serving pass failed; trying again")
        return STARTING_PERIOD if self._starting else self._period

    def _pass(self) -> None:
        self._starting = False
        self._before()
        with self.db.session() as session:
            services = {row.name: _held(row) for row in stored.listing(session, None)}
            rows = stored.replicas(session)
            phases = {
                name: outcome.phase
                for name, outcome in stored_jobs.outcomes(session, [r.job for r in rows]).items()
            }
            endpoints = stored.endpoints(session, [r.job for r in rows if phases.get(r.job)])
        by_service: dict[str, list[_Replica]] = {}
        ended: list[str] = []
        orphans: list[str] = []  # live replicas of a service deleted meanwhile
        for row in rows:
            phase = phases.get(row.job)
            if phase is None or JobPhase(phase) in TERMINAL:
                ended.append(row.job)
            elif row.service not in services:
                orphans.append(row.job)
            else:
                replica = _Replica(row, phase, endpoints.get(row.job))
                by_service.setdefault(row.service, []).append(replica)
        if ended or orphans:
            with self.db.write() as session:
                stored_jobs.request_cancel(session, orphans, delete=True)
                stored.remove_replicas(session, ended + orphans)
        with self._lock:  # deleted since the read: not published again
            self._gone &= set(services)
            for name in self._gone:
                services.pop(name)
        self.access = {
            name: frozenset([held.user, *held.document.spec.callers])
            for name, held in services.items()
        }
        routes: dict[str, Service] = {}
        readiness = self._probe_all(services, by_service)
        self._desired = {}
        for name, held in services.items():
            live = by_service.get(name, [])
            try:
                self._reconcile(held, live)
            except Exception:
                log.exception("reconciling service %s failed; trying again", name)
            routes[name] = self._route(held, live, readiness)
        changed = {
            replica.row.job: readiness[replica.row.job]
            for replicas in by_service.values()
            for replica in replicas
            if readiness.get(replica.row.job, replica.row.url) != replica.row.url
        }
        if changed:
            with self.db.write() as session:
                stored.set_readiness(session, changed)
        self.replica_counts = {
            (name, p.name): (self._desired.get((name, p.name), 0), len(p.replicas))
            for name, service in routes.items()
            for p in service.predictors
        }
        with self._lock:
            for name in self._gone:
                routes.pop(name, None)
            self._routes = routes
            self._publish(routes)

    def _before(self) -> None:
        """What a pass does before it reads the services: the gateways' reports read, the
        rollouts advanced (each failure logged: the services are served as they stand)."""
        if self._reports is not None:
            try:
                self._reports.refresh()
            except Exception:  # the last reports stand
                log.exception("reading the gateways' reports failed; trying again")
            now = self._clock()
            with self._lock:
                for service in self._reports.busy:
                    self._demand[service] = now
        if self._rollouts is not None:
            try:
                self._rollouts.advance()
            except Exception:
                log.exception("advancing rollouts failed; trying again")

    def deleted(self, name: str) -> None:
        """Service ``name`` was deleted (its row is gone): stop routing to it at once,
        and in any pass that read it before."""
        with self._lock:
            self._gone.add(name)
            self._woken.pop(name, None)
            self.access = {k: v for k, v in self.access.items() if k != name}
            self._routes = {k: v for k, v in self._routes.items() if k != name}
            self._publish(self._routes)
        self._ticker.poke()

    def applied(self, name: str) -> None:
        """Service ``name`` was created or changed: reconcile it soon."""
        with self._lock:
            self._gone.discard(name)
        self._ticker.poke()

    def wanted(self, service: str, predictor: PredictorSpec, current: int = 0) -> int:
        """How many replicas ``predictor`` of ``service`` wants now, with ``current``:
        what its load asks (``autoscale.Autoscaler``) within ``minReplicas`` and
        ``maxReplicas``; at ``minReplicas: 0``, none once no request came for the idle
        grace, and at least one while they come."""
        now = self._clock()
        scaler = self._scalers.get((service, predictor.name))
        if scaler is None or scaler.target != predictor.target:
            scaler = self._scalers[(service, predictor.name)] = Autoscaler(predictor.target)
        if self._load is not None or self._reports is not None:
            load = 0.0 if self._load is None else self._load(service, predictor.name)
            if self._reports is not None:
                load += self._reports.load(service, predictor.name)
            scaler.observe(now, load)
        low = predictor.min_replicas
        if low == 0:
            with self._lock:
                last = self._demand.get(service)
            if last is None or now - last >= self._idle_grace:
                return 0
            low = 1
        return scaler.desired(now, current, low, predictor.most_replicas)

    def _reconcile(self, held: _Held, live: list[_Replica]) -> None:
        """Submit the replicas ``held`` misses; cancel those it has too many of."""
        document = held.document
        extra: list[str] = []
        missing: list[PredictorSpec] = []
        predictors = {p.name: p for p in document.spec.predictors}
        for replica in live:
            if replica.row.predictor not in predictors:
                extra.append(replica.row.job)
        for predictor in document.spec.predictors:
            mine = [r for r in live if r.row.predictor == predictor.name]
            want = self.wanted(held.name, predictor, len(mine))
            self._desired[(held.name, predictor.name)] = want
            if len(mine) > want:
                # newest first; a replica not yet Ready before one that serves
                surplus = sorted(mine, key=lambda r: (r.row.ready, -r.row.id))
                extra += [r.row.job for r in surplus[: len(mine) - want]]
            missing += [predictor] * (want - len(mine))
        if extra:
            with self.db.write() as session:
                stored_jobs.request_cancel(session, extra, delete=True)
                stored.remove_replicas(session, extra)
        if missing:
            self._starting = True
            try:
                self._submit(held, missing)
            except IntegrityError:  # a job of that name exists: the next pass takes the next
                with self.db.write() as session:
                    stored.next_replica_number(session, held.name)
                raise

    def _submit(self, held: _Held, predictors: list[PredictorSpec]) -> None:
        """Submit one replica job of each of ``predictors`` (a predictor named twice gets
        two), as the service's user."""
        now = time.time()
        with self.db.write() as session:
            user = stored_users.user(session, held.user)
            role = UserRole(user.role) if user is not None else UserRole.USER
            caller = Principal(name=held.user, role=role)
            made: list[tuple[JobDocument, str]] = []
            for predictor in predictors:
                number = stored.next_replica_number(session, held.name)
                name = f"{held.name}-{predictor.name}-{number}"
                job = held.document.replica_job(predictor, name, python=sys.executable)
                made.append((job, predictor.name))
            checked = check_models(
                session, resolve_queues(session, [(job, caller) for job, _ in made])
            )
            refused = [c for c in checked if isinstance(c, ApiError)]
            if refused:  # tried again next pass (the queue or the version may come back)
                log.warning("service %s: a replica was refused: %s", held.name, refused[0].detail)
                return
            jobs = [c for c in checked if isinstance(c, JobDocument)]
            stored_rows = store_jobs(session, jobs)
            for job, predictor_name in made:
                stored.add_replica(session, held.name, predictor_name, job.metadata.name, now=now)
        self._on_stored([(row.id, row.job) for row in stored_rows])

    def _route(
        self, held: _Held, live: list[_Replica], readiness: dict[str, str | None]
    ) -> Service:
        """``held``'s routes: its predictors, each with the replicas ``readiness`` (by
        job: its URL when Ready) found Ready."""
        predictors = []
        waking = False
        for predictor in held.document.spec.predictors:
            mine = [r for r in live if r.row.predictor == predictor.name]
            ready = [
                Replica(name=r.row.job, url=url, predictor=predictor.name)
                for r in mine
                if (url := readiness.get(r.row.job)) is not None
            ]
            waking |= len(ready) < len(mine) or predictor.min_replicas == 0
            now = time.time()
            self._starting |= any(
                readiness.get(r.row.job) is None
                for r in mine
                if now - r.row.created_at < STARTING_WINDOW
            )
            predictors.append(
                Predictor(
                    name=predictor.name,
                    weight=predictor.traffic,
                    replicas=tuple(ready),
                    concurrency=predictor.concurrency,
                )
            )
        return Service(name=held.name, predictors=tuple(predictors), waking=waking)

    def _probe_all(
        self, services: dict[str, _Held], by_service: dict[str, list[_Replica]]
    ) -> dict[str, str | None]:
        """Every replica's readiness, by job: its URL when its job runs and its readiness
        path answers 200, else None. The probes run at once (``PROBES`` at a time), so
        a replica that hangs costs a pass one ``PROBE_TIMEOUT``, not one each."""
        paths = {
            name: {p.name: p.readiness_path for p in held.document.spec.predictors}
            for name, held in services.items()
        }
        readiness: dict[str, str | None] = {}
        asked: list[tuple[_Replica, str]] = []
        for name, replicas in by_service.items():
            for replica in replicas:
                path = paths.get(name, {}).get(replica.row.predictor)
                readiness[replica.row.job] = None
                if path is not None and replica.phase == _RUNNING and replica.endpoint:
                    asked.append((replica, path))
        if len(asked) == 1:
            readiness[asked[0][0].row.job] = self._probe(*asked[0])
        elif asked:
            for (replica, _), url in zip(
                asked, self._probes.map(lambda a: self._probe(*a), asked), strict=True
            ):
                readiness[replica.row.job] = url
        return readiness

    def _probe(self, replica: _Replica, path: str) -> str | None:
        """The replica's URL when ``path`` answers 200 there, else None."""
        url = f"http://{replica.endpoint}"
        try:
            answer = self._http.get(url + path)
        except httpx.HTTPError:
            return None
        return url if answer.status_code == 200 else None


@dataclass(frozen=True, slots=True)
class _Held:
    """A service as one pass reads it."""

    name: str
    user: str
    document: InferenceDocument


def _held(row: ServiceRow) -> _Held:
    return _Held(row.name, row.user, InferenceDocument.model_validate(row.document))


class ReplicaGauge(Collector):
    """``phalanx_serving_replicas``: each predictor's replicas desired and Ready, as the
    serving controller's last pass left them (read at each scrape)."""

    def __init__(self, serving: Serving) -> None:
        self._serving = serving

    def describe(self) -> Iterator[Metric]:
        return iter([self._family()])

    def collect(self) -> Iterator[Metric]:
        family = self._family()
        for (service, predictor), counts in sorted(self._serving.replica_counts.items()):
            for state, count in zip(("desired", "ready"), counts, strict=True):
                family.add_metric([service, predictor, state], count)
        return iter([family])

    @staticmethod
    def _family() -> GaugeMetricFamily:
        return GaugeMetricFamily(
            "phalanx_serving_replicas",
            "Replicas of each predictor: desired (what its load and bounds ask) and ready",
            labels=["service", "predictor", "state"],
        )
