"""One lifecycle, two drivers: the simulator and the control plane agree on job phases.

The same small workload (a job whose first run fails, a job on a node that is lost,
a plain job) runs once through ``Simulation`` and once through the real ``Controller``
on a SQLite store, whose executor is the simulator's own ``SimCluster`` and whose
clock the test moves a second at a time. Both must give every job the same sequence
of phases, read from events.jsonl rows and from the store's event rows.
"""

from __future__ import annotations

from pathlib import Path

from sqlalchemy import select

from phalanx.control.controllers.controller import Controller
from phalanx.control.controllers.core import Timing
from phalanx.control.store.models import EventRow, JobRow
from phalanx.control.submit import store_jobs
from phalanx.domain.node import Node
from phalanx.domain.queue import Queue
from phalanx.domain.resources import Resources
from phalanx.engine import default_config
from phalanx.sim.cluster import SimCluster
from phalanx.sim.runner import SimOptions, Simulation
from phalanx.sim.workload import NodeFailure, Workload, WorkloadJob
from phalanx.spec.job import JobDocument
from phalanx.spec.loader import build_document
from tests.unit.control.plane import Plane

PHASES = ("Queued", "Running", "Pending", "Succeeded", "Failed", "Cancelled")
NODES = tuple(
    Node(
        name=name,
        capacity=Resources.of({"cpu": 8000, "memory": 32 * 2**30, "gpu": 4}),
        labels={"host": name},
    )
    for name in ("n0", "n1")
)
LOST_AT = 60.0  # n1 fails this long after the jobs arrive
RETRIED = ["Queued", "Running", "Pending", "Queued", "Running", "Succeeded"]


def _document(name: str, *, gpus: int, replicas: int = 1, **spec: object) -> JobDocument:
    role = {"name": "w", "replicas": replicas, "resources": {"gpu": gpus}, "command": "true"}
    raw = {
        "apiVersion": "phalanx/v1",
        "kind": "Job",
        "metadata": {"name": name},
        "spec": {"queue": "q", "roles": [role], **spec},
    }
    document = build_document(raw)
    assert isinstance(document, JobDocument)
    return document


DOCUMENTS = (
    _document("fails", gpus=1, replicas=2, maxRetry=2),
    _document("lost", gpus=2, nodeSelector={"host": "n1"}),
    _document("plain", gpus=1),
)
DURATION = {"fails": 100.0, "lost": 200.0, "plain": 50.0}


def _workload_jobs(start: float) -> tuple[WorkloadJob, ...]:
    return tuple(
        WorkloadJob(
            job=d.to_domain(creation_time=start),
            duration=DURATION[d.metadata.name],
            fail_after=(30.0,) if d.metadata.name == "fails" else (),
        )
        for d in DOCUMENTS
    )


def _simulated() -> dict[str, list[str]]:
    workload = Workload(
        jobs=_workload_jobs(0.0),
        queues=(Queue(name="q"),),
        node_failures=(NodeFailure(node="n1", at=LOST_AT, repair=600.0),),
    )
    rows: list[dict[str, object]] = []
    options = SimOptions(period=1.0, trigger_delay=1.0, grace=0.0)
    Simulation(NODES, workload, default_config(), options=options, on_event=rows.append).run()
    phases: dict[str, list[str]] = {}
    for row in rows:
        if row["ev"] in PHASES:
            phases.setdefault(str(row["job"]), []).append(str(row["ev"]))
    return phases


def _controlled(plane: Plane, tmp_path: Path) -> dict[str, list[str]]:
    start = plane.clock.now
    cluster = SimCluster({w.name: w for w in _workload_jobs(start)})
    timing = Timing(period=1.0, grace=0.0, backoff=10.0, max_backoff=300.0)
    controller = Controller(
        plane.db, NODES, default_config(), lambda resolve: cluster, timing=timing, clock=plane.clock
    )
    controller.recover()
    with plane.db.write() as session:
        store_jobs(session, list(DOCUMENTS))
    for second in range(1, 1200):
        plane.clock.now = start + second
        if second == LOST_AT:
            cluster.lose_node("n1", now=plane.clock.now)
        controller.tick()
    with plane.db.session() as session:
        rows = session.execute(
            select(JobRow.name, EventRow.kind)
            .join(EventRow, EventRow.job_id == JobRow.id)
            .order_by(EventRow.id)
        ).all()
    phases: dict[str, list[str]] = {}
    for name, kind in rows:
        if kind in PHASES:
            phases.setdefault(name, []).append(kind)
    return phases


def test_the_simulator_and_the_control_plane_give_the_same_job_phases(
    plane: Plane,
    tmp_path: Path,
) -> None:
    simulated = _simulated()
    assert simulated == {"fails": RETRIED, "lost": RETRIED, "plain": [*RETRIED[:2], "Succeeded"]}
    assert _controlled(plane, tmp_path) == simulated
