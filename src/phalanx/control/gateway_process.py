"""``phalanx gateway``: the gateway in a process of its own, for scale; several may run
behind any load balancer, each reading the store the server writes.

Guarantees of ``GatewayProcess``:
- its routes follow the store (``StoreRoutes``, every ``period``): each service's
  predictors with their traffic shares and concurrency limits, and the replicas the
  serving controller found Ready (their URLs as it wrote them); a service deleted, or a
  replica no longer Ready, leaves its table at the next refresh;
- it admits callers as the in-process gateway does (``ServiceAccess``: a token checked
  against the store, the service's owner, its ``callers`` and admins);
- it reports to the store every ``report_every`` seconds, and at once when a request
  finds no Ready replica (``Reporter``): each predictor's demand and held requests,
  which the server's autoscaler adds to its own (a predictor at ``minReplicas: 0`` is
  woken by a request held here), and its answers counted since it started, which
  rollouts judge with the server's; its reports are removed when it stops;
- ``GET /healthz`` answers 200 while it serves (what a load balancer checks); it never
  writes anything but its reports, and never changes the schema (the server migrates it:
  an older store is refused at start with the fix).
"""

from __future__ import annotations

import logging
import os
import socket
import time
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any, Final

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Mount, Route

from phalanx.control.auth import TokenCache
from phalanx.control.controllers.ticker import Ticker
from phalanx.control.gateway import ServiceAccess
from phalanx.control.store import gateway_reports as stored_reports
from phalanx.control.store import services as stored
from phalanx.control.store.database import Database
from phalanx.control.store.models import ServiceReplicaRow
from phalanx.domain.errors import InvalidInput
from phalanx.gateway.proxy import Gateway
from phalanx.gateway.routes import Predictor, Replica, Routes, Service
from phalanx.gateway.tallies import Tallies
from phalanx.spec.inference import InferenceDocument

log = logging.getLogger(__name__)

#: Seconds between two reads of the routes, and between two reports.
PERIOD: Final = 0.5
REPORT_EVERY: Final = 1.0


@dataclass(frozen=True, slots=True, kw_only=True)
class GatewaySettings:
    """How to run a gateway process: the server's database, and where to listen."""

    db_url: str
    host: str = "127.0.0.1"
    port: int = 8081
    period: float = PERIOD
    report_every: float = REPORT_EVERY


class StoreRoutes:
    """The routes and callers of every service, as the store has them (see the module
    docstring); ``access`` and ``saw_request`` are what ``ServiceAccess`` reads."""

    def __init__(self, db: Database, routes: Routes) -> None:
        self.db = db
        self._routes = routes
        self.access: dict[str, frozenset[str]] = {}

    def saw_request(self, service: str) -> None:
        """Nothing to do here: the reports carry the service's activity."""

    def refresh(self) -> None:
        """Read every service and its replicas (two queries) and replace the table."""
        with self.db.session() as session:
            rows = list(stored.listing(session, None))
            replicas = stored.replicas(session)
        by_service: dict[str, list[ServiceReplicaRow]] = {}
        for replica in replicas:
            by_service.setdefault(replica.service, []).append(replica)
        table: dict[str, Service] = {}
        access: dict[str, frozenset[str]] = {}
        for row in rows:
            document = InferenceDocument.model_validate(row.document)
            mine = by_service.get(row.name, [])
            predictors = []
            waking = False
            for predictor in document.spec.predictors:
                theirs = [r for r in mine if r.predictor == predictor.name]
                ready = tuple(
                    Replica(name=r.job, url=r.url, predictor=predictor.name)
                    for r in theirs
                    if r.ready and r.url
                )
                waking |= len(ready) < len(theirs) or predictor.min_replicas == 0
                predictors.append(
                    Predictor(
                        name=predictor.name,
                        weight=predictor.traffic,
                        replicas=ready,
                        concurrency=predictor.concurrency,
                    )
                )
            table[row.name] = Service(name=row.name, predictors=tuple(predictors), waking=waking)
            access[row.name] = frozenset([row.user, *document.spec.callers])
        self.access = access
        self._routes.replace(table)


class Reporter:
    """Writes this gateway's reports (see the module docstring) under ``name``."""

    def __init__(self, db: Database, routes: Routes, tallies: Tallies, name: str) -> None:
        self.db = db
        self.name = name
        self._routes = routes
        self._tallies = tallies

    def report(self) -> None:
        """Rewrite this gateway's rows: one per predictor it routes to or has answered."""
        counted = {(s, p): t for s, p, t in self._tallies.rows()}
        held = self._routes.held()
        keys = set(counted)
        for service, predictor, _, _ in self._routes.in_flight_rows():
            keys.add((service, predictor))
        for service in held:
            found = self._routes.service(service)
            if found is not None:
                keys |= {(service, p.name) for p in found.predictors}
        rows: list[dict[str, Any]] = []
        for service, predictor in sorted(keys):
            tally = counted.get((service, predictor))
            rows.append(
                {
                    "service": service,
                    "predictor": predictor,
                    "demand": self._routes.demand(service, predictor),
                    "held": held.get(service, 0),
                    "requests": 0 if tally is None else tally.requests,
                    "errors": 0 if tally is None else tally.errors,
                    "buckets": [] if tally is None else list(tally.buckets),
                }
            )
        with self.db.write() as session:
            stored_reports.replace(session, self.name, rows, now=time.time())

    def forget(self) -> None:
        """Remove this gateway's reports (it stops)."""
        with self.db.write() as session:
            stored_reports.forget(session, self.name)


class GatewayProcess:
    """The gateway's app and its two loops (see the module docstring)."""

    def __init__(self, settings: GatewaySettings, db: Database) -> None:
        self.settings = settings
        self.db = db
        self.routes = Routes()
        self.tallies = Tallies()
        self.name = (
            f"{socket.gethostname()[:40]}:{settings.port}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
        )
        self.follower = StoreRoutes(db, self.routes)
        self.reporter = Reporter(db, self.routes, self.tallies, self.name)
        self._following = Ticker("phalanx-gateway-routes", self._follow)
        self._reporting = Ticker("phalanx-gateway-reports", self._report)
        self.gateway = Gateway(
            self.routes,
            authorize=ServiceAccess(TokenCache(db), self.follower),
            on_demand=lambda _: self._reporting.poke(),
            tallies=self.tallies,
        )
        self.app = Starlette(
            routes=[Route("/healthz", _healthy), Mount("/serve", app=self.gateway)],
            lifespan=self._lifespan,
        )

    def _follow(self) -> float:
        try:
            self.follower.refresh()
        except Exception:  # a database outage: the last routes stand
            log.exception("reading the routes failed; trying again")
        return self.settings.period

    def _report(self) -> float:
        try:
            self.reporter.report()
        except Exception:
            log.exception("writing this gateway's report failed; trying again")
        return self.settings.report_every

    @asynccontextmanager
    async def _lifespan(self, _: Starlette) -> AsyncIterator[None]:
        self.follower.refresh()  # the first requests find the routes
        self._following.start()
        self._reporting.start()
        try:
            yield
        finally:
            self._following.stop(5.0)
            self._reporting.stop(5.0)
            await self.gateway.aclose()
            try:
                self.reporter.forget()
            except Exception:
                log.exception("removing this gateway's reports failed")

    def serve(self) -> None:
        """Serve until SIGINT or SIGTERM."""
        uvicorn.run(
            self.app,
            host=self.settings.host,
            port=self.settings.port,
            log_level="warning",
            access_log=False,
            timeout_graceful_shutdown=2,
        )


def open_store(url: str) -> Database:
    """The server's database, whose schema this process must not change; ``InvalidInput``
    when it is not the newest (the server has not been started on it since an upgrade)."""
    db = Database.open(url, migrate=False)
    if not db.up_to_date():
        db.close()
        raise InvalidInput(
            "the database's schema is older than this phalanx's",
            field="--db",
            fix="start (or restart) phalanx up of this version on it first: the server "
            "upgrades the schema; gateways only read it",
        )
    return db


async def _healthy(_: Request) -> JSONResponse:
    return JSONResponse({"status": "ok"})
