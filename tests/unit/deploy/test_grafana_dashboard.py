"""``deploy/grafana/phalanx-dashboard.json`` asks only for what the server exports.

Every metric that a panel's query or a template variable names is a series of a real
``/metrics`` answer: the server's ``Metrics``, wired as ``Server`` wires them (the
controller observes its sessions and evictions into them, they watch the store and the
controller's view, the gateway and the serving controller's replica gauge register into
them, the app serves them to the metrics token), after a queue with quotas, jobs,
sessions and a preemption, and a request through the gateway that met a replica refusing
connections and was answered by another. Every label a query selects, groups by or names
in its legend is on one of its metrics. Panels have unique ids, read the Prometheus
picked in the dashboard's ``DS_PROMETHEUS`` variable, and do not overlap; the Serving
row shows each service's traffic, errors, latency, load and replicas.

The GPU readings are exported as the Server exports them (``Metrics.watch`` with the
controller's ``GpuPicture``: here one built by hand, two read cards of a node, one busy
with a task of job ``low`` and one cordoned by its health, ``low`` marked idle). The GPUs
row reads every family a real ``GpuCollector`` exports (the DCGM exporter's names and
phalanx's own, read from a scrape of the collector alone, so that a family added to
``gpu_metrics`` without a panel fails here): utilisation, memory, temperature and power
per card by ``Hostname`` and ``gpu``, XID errors, cordoned cards, each job's utilisation
and the jobs with idle GPUs.

The PromQL is read by a small extractor, not a parser: it knows selectors, ranges,
grouping clauses, string literals, function calls and Grafana's ``$variables``, enough
for the dashboard's queries; ``test_the_extractor_*`` pins what it finds.
"""

from __future__ import annotations

import asyncio
import copy
import json
import re
import socket
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from phalanx.control.app import create_app
from phalanx.control.controllers.controller import Controller
from phalanx.control.controllers.serving import ReplicaGauge, Serving
from phalanx.control.controllers.telemetry import GpuPicture
from phalanx.control.gpu_metrics import GpuCollector
from phalanx.control.metrics import Metrics, metrics_token
from phalanx.control.store.cards import CardCordon
from phalanx.control.store.database import Database, sqlite_url
from phalanx.control.store.models import QueueRow
from phalanx.engine import default_config
from phalanx.executors.base import TaskEventKind
from phalanx.gateway.proxy import Access, Gateway
from phalanx.gateway.routes import Predictor, Replica, Routes, Service
from phalanx.spec.loader import build_document
from phalanx.telemetry.readings import CardReading
from phalanx.telemetry.windows import GpuUse
from tests.unit.control.plane import NODES, TIMING, Clock, FakeExecutor, Plane

DASHBOARD_FILE = (
    Path(__file__).resolve().parents[3] / "deploy" / "grafana" / "phalanx-dashboard.json"
)
DATASOURCE = {"type": "prometheus", "uid": "${DS_PROMETHEUS}"}
#: The gateway's and the serving controller's families, each with the series of it that
#: the Serving row reads.
SERVING = {
    "phalanx_serving_requests": "phalanx_serving_requests_total",
    "phalanx_serving_request_seconds": "phalanx_serving_request_seconds_bucket",
    "phalanx_serving_connect_failures": "phalanx_serving_connect_failures_total",
    "phalanx_serving_in_flight": "phalanx_serving_in_flight",
    "phalanx_serving_held": "phalanx_serving_held",
    "phalanx_serving_replicas": "phalanx_serving_replicas",
}

#: Sample names of the exposition, each with the labels its samples carry.
Exported = Mapping[str, frozenset[str]]
#: Each family of the exposition by name, with its samples' names and labels.
Families = dict[str, dict[str, frozenset[str]]]

# --- the extractor -------------------------------------------------------------------

_GRAFANA_VARIABLE = re.compile(r"\$\{\w+(?::\w+)?\}|\$\w+")
_STRING = re.compile(r""""(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*'|`[^`]*`""")
_GROUPING = re.compile(r"\b(?:by|without|on|ignoring|group_left|group_right)\s*\(([^)]*)\)")
_SELECTOR = re.compile(r"([A-Za-z_:][\w:]*)?\s*\{([^}]*)\}")
_MATCHER = re.compile(r"""([A-Za-z_]\w*)\s*(?:=~|!~|!=|=)\s*(?:""|'')""")
_RANGE = re.compile(r"\[[^\]]*\]")
_IDENTIFIER = re.compile(r"(?<![\w.:])([A-Za-z_:][\w:]*)(\s*\()?")
_LABEL_VALUES = re.compile(
    r"^\s*label_values\(\s*(?:(?P<series>.+),)?\s*(?P<label>[A-Za-z_]\w*)\s*\)\s*$"
)
_LEGEND_LABEL = re.compile(r"\{\{\s*([A-Za-z_]\w*)\s*\}\}")
#: PromQL words that are not series names (functions are known by the ``(`` after them).
_KEYWORDS = frozenset(
    {"by", "without", "on", "ignoring", "group_left", "group_right", "bool", "and", "or"}
    | {"unless", "offset", "inf", "nan", "atan2"}
)


@dataclass(frozen=True, slots=True)
class Query:
    """What one PromQL expression asks for: the series it reads, the labels each selector
    matches on (by series name), and the labels it groups by."""

    metrics: frozenset[str]
    selected: Mapping[str, frozenset[str]]
    grouped: frozenset[str]


def read_promql(expr: str) -> Query:
    """The series names and labels in ``expr``. Grafana variables become ``0`` (they stand
    for durations and label values, never for names) and strings become empty first."""
    text = _STRING.sub('""', _GRAFANA_VARIABLE.sub("0", expr))
    grouped = frozenset(
        label.strip()
        for clause in _GROUPING.findall(text)
        for label in clause.split(",")
        if label.strip()
    )
    text = _GROUPING.sub(" ", text)
    selected: dict[str, frozenset[str]] = {}
    for name, body in _SELECTOR.findall(text):
        labels = frozenset(_MATCHER.findall(body))
        selected[name] = selected.get(name, frozenset()) | labels
    text = _RANGE.sub(" ", _SELECTOR.sub(r"\1 ", text))
    metrics = frozenset(
        name for name, call in _IDENTIFIER.findall(text) if not call and name not in _KEYWORDS
    )
    return Query(metrics=metrics, selected=selected, grouped=grouped)


# --- the dashboard -------------------------------------------------------------------


def load_dashboard() -> dict[str, Any]:
    with DASHBOARD_FILE.open() as stream:
        loaded: dict[str, Any] = json.load(stream)
    return loaded


def all_panels(dashboard: Mapping[str, Any]) -> Iterator[dict[str, Any]]:
    """Every panel, rows and the panels of collapsed rows included."""
    for panel in dashboard["panels"]:
        yield panel
        yield from panel.get("panels", [])


def row_panels(dashboard: Mapping[str, Any], title: str) -> list[dict[str, Any]]:
    """The panels of the row titled ``title``: an open row's are those after it up to the
    next row, a collapsed row's are its own."""
    panels = dashboard["panels"]
    (at,) = [
        i for i, panel in enumerate(panels) if panel["type"] == "row" and panel["title"] == title
    ]
    if panels[at]["collapsed"]:
        found: list[dict[str, Any]] = panels[at]["panels"]
        return found
    following = [*panels[at + 1 :], {"type": "row"}]
    return following[: next(i for i, p in enumerate(following) if p["type"] == "row")]


@dataclass(frozen=True, slots=True)
class Asked:
    """One query of the dashboard: a panel target's (with its legend) or a variable's."""

    where: str
    expr: str
    legend: str = ""
    variable: bool = False


def queries(dashboard: Mapping[str, Any]) -> Iterator[Asked]:
    """Every panel target and query variable of ``dashboard``."""
    for panel in all_panels(dashboard):
        for target in panel.get("targets", []):
            where = f"panel {panel['id']} {panel['title']!r} {target['refId']}"
            yield Asked(where, target["expr"], target.get("legendFormat", ""))
    for variable in dashboard["templating"]["list"]:
        if variable["type"] == "query":
            query = variable["query"]
            expr = query["query"] if isinstance(query, dict) else query
            yield Asked(f"variable {variable['name']}", expr, variable=True)


def problems(dashboard: Mapping[str, Any], exported: Exported) -> list[str]:
    """What the dashboard asks for that ``exported`` lacks, one line each."""
    found = []
    for asked in queries(dashboard):
        where, expr = asked.where, asked.expr
        if asked.variable:
            match = _LABEL_VALUES.match(expr)
            if match is None:
                found.append(f"{where}: {expr!r} is not label_values(series, label)")
                continue
            query = read_promql(match["series"] or "")
            wanted = query.grouped | {match["label"]}
        else:
            query = read_promql(expr)
            wanted = query.grouped | set(_LEGEND_LABEL.findall(asked.legend))
        if not query.metrics:
            found.append(f"{where}: {expr!r} names no metric")
        for metric in sorted(query.metrics - exported.keys()):
            found.append(f"{where}: {metric} is not exported")
        for metric, labels in query.selected.items():
            for label in sorted(labels - exported.get(metric, labels)):
                found.append(f"{where}: {metric} has no label {label}")
        known = set().union(*(exported.get(m, frozenset()) for m in query.metrics))
        for label in sorted(wanted - known):
            found.append(f"{where}: no metric of {expr!r} has the label {label}")
    return found


# --- the server ----------------------------------------------------------------------

_GIB = 1 << 30


def gpu_picture(now: float) -> GpuPicture:
    """Node ``n0``'s two H100s as one reading left them: card 0 busy with task ``low-w-0``
    of job ``low`` (marked idle a minute ago: the families of the idle watch have a
    series), card 1 free and cordoned by its health after an XID 79."""
    model = "NVIDIA H100 80GB HBM3"
    cards = (
        CardReading(
            index=0,
            uuid="GPU-0",
            model=model,
            utilisation=97.0,
            memory_used=60 * _GIB,
            memory_total=80 * _GIB,
            temperature=71.0,
            power=640.0,
            pcie_replays=3,
            remapped_correctable=1,
        ),
        CardReading(
            index=1,
            uuid="GPU-1",
            model=model,
            memory_total=80 * _GIB,
            temperature=35.0,
            power=70.0,
            xid=79,
            xids=(79,),
        ),
    )
    use = GpuUse(
        start=now - 30,
        end=now,
        samples=6,
        cards=1,
        utilisation=96.0,
        utilisation_peak=99.0,
        memory=60.0 * _GIB,
        memory_peak=61.0 * _GIB,
    )
    cordon = CardCordon(
        node="n0", gpu=1, uuid="GPU-1", reason="XID 79", source="health", since=now - 5
    )
    return GpuPicture(
        cards={"n0": cards},
        read_at={"n0": now},
        holders={("n0", 0): (("low", "low-w-0"),)},
        owners={"low": ("admin", "q")},
        idle_since={"low": now - 60},
        current={"low": use},
        cordoned={("n0", 1): cordon},
    )


_QUEUE = """
{apiVersion: phalanx/v1, kind: Queue, metadata: {name: q},
 spec: {guarantee: {gpu: 2}, capability: {gpu: 8}}}
"""


def _gang(replicas: int) -> list[dict[str, Any]]:
    return [{"name": "w", "replicas": replicas, "resources": {"gpu": 4}, "command": "true"}]


async def _allowed(token: str | None, service: str) -> Access:
    return Access.ALLOWED


async def _answer_ok(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    """A replica: answers any request 200."""
    await reader.readuntil(b"\r\n\r\n")
    writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok")
    await writer.drain()
    writer.close()
    await writer.wait_closed()


def _serve_once(app: Any, gateway: Gateway) -> httpx.Response:
    """One request to service ``svc`` through the app's gateway: its first replica
    (by name) refuses connections (a port bound, not listened on), its second answers."""

    async def call() -> httpx.Response:
        replica = await asyncio.start_server(_answer_ok, "127.0.0.1", 0)
        with socket.socket() as refusing:
            refusing.bind(("127.0.0.1", 0))
            urls = [f"http://127.0.0.1:{s.getsockname()[1]}" for s in (refusing, *replica.sockets)]
            replicas = tuple(Replica(f"svc-main-{i}", url, "main") for i, url in enumerate(urls))
            gateway.routes.replace({"svc": Service("svc", (Predictor("main", 100, replicas),))})
            transport = httpx.ASGITransport(app=app)
            async with (
                replica,
                httpx.AsyncClient(transport=transport, base_url="http://phalanx") as client,
            ):
                answer = await client.get("/serve/svc/x", headers={"Authorization": "Bearer t"})
            await gateway.aclose()
        return answer

    return asyncio.run(call())


def _scrape(app: Any, token: str) -> httpx.Response:
    async def call() -> httpx.Response:
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://phalanx") as client:
            return await client.get("/metrics", headers={"Authorization": f"Bearer {token}"})

    return asyncio.run(call())


@pytest.fixture(scope="module")
def exposition(tmp_path_factory: pytest.TempPathFactory) -> str:
    """``/metrics`` of a server whose queue ``q`` (guarantee and capability of GPUs) ran a
    gang of two 4-GPU tasks, then had it preempted by a higher-priority gang; whose
    gateway answered a request of service ``svc`` after a connection refused, and holds
    another; and whose serving pass left predictor ``svc/main`` one Ready of two."""
    data = tmp_path_factory.mktemp("server")
    db = Database.open(sqlite_url(data))
    queue = build_document(yaml.safe_load(_QUEUE))
    with db.write() as session:
        now = time.time()
        document = queue.model_dump(mode="json", by_alias=True, exclude_none=True)
        session.add(
            QueueRow(name="q", parent="", document=document, created_at=now, updated_at=now)
        )
    metrics, executor, clock = Metrics(), FakeExecutor(), Clock()
    controller = Controller(
        db, NODES, default_config(), lambda _: executor, timing=TIMING, clock=clock, metrics=metrics
    )
    controller.recover()
    picture = gpu_picture(time.time())
    metrics.watch(db, lambda: controller.view, gpus=lambda: picture)  # as Server does
    routes = Routes()
    serving = Serving(db, publish=routes.replace, on_stored=controller.offer)
    gateway = Gateway(  # as Server wires them
        routes, authorize=_allowed, on_demand=serving.demand, registry=metrics.registry
    )
    metrics.registry.register(ReplicaGauge(serving))
    token = metrics_token(data)
    app = create_app(db, controller, metrics, metrics_token=token, serving=serving, gateway=gateway)
    plane = Plane(db, controller, executor, clock)
    plane.submit("low", roles=_gang(2))
    plane.tick()
    for task in ("low-w-0", "low-w-1"):
        plane.report(TaskEventKind.STARTED, task)
    plane.tick()
    plane.submit("high", priority=10, roles=_gang(2))
    plane.tick()
    assert [e.action for e in executor.stopped] == ["preempt", "preempt"]
    served = _serve_once(app, gateway)
    assert (served.status_code, served.text) == (200, "ok")
    routes.holding("svc", +1)  # a request waiting for a free replica
    serving.replica_counts = {("svc", "main"): (2, 1)}  # as a pass leaves them
    scraped = _scrape(app, token)
    serving.stop()
    app.state.submissions.close()
    db.close()
    assert scraped.status_code == 200, scraped.text
    return scraped.text


@pytest.fixture(scope="module")
def families(exposition: str) -> Families:
    """Each family of the exposition: its sample names, each with its labels."""
    found: Families = {}
    for family in text_string_to_metric_families(exposition):
        samples = found.setdefault(family.name, {})
        for sample in family.samples:
            samples[sample.name] = samples.get(sample.name, frozenset()) | set(sample.labels)
    return found


@pytest.fixture(scope="module")
def exported(families: Families) -> Exported:
    return {name: labels for samples in families.values() for name, labels in samples.items()}


@pytest.fixture(scope="module")
def gpu_families() -> Families:
    """Each family a ``GpuCollector`` alone exports for ``gpu_picture``, with its samples'
    names and labels."""
    registry = CollectorRegistry()
    picture = gpu_picture(time.time())
    registry.register(GpuCollector(lambda: picture))
    found: Families = {}
    for family in text_string_to_metric_families(generate_latest(registry).decode()):
        samples = found.setdefault(family.name, {})
        for sample in family.samples:
            samples[sample.name] = samples.get(sample.name, frozenset()) | set(sample.labels)
    return found


# --- the tests -----------------------------------------------------------------------


def test_every_family_the_server_exports_has_samples_here(families: Families) -> None:
    """The activity is enough: a family without samples would hide its labels."""
    assert {name for name, samples in families.items() if not samples} == set()
    assert {"phalanx_preemptions", "phalanx_scheduling_session_seconds"} <= families.keys()
    assert set(SERVING) <= families.keys()


def test_the_server_exports_every_gpu_family_with_its_labels(
    families: Families, gpu_families: Families
) -> None:
    """What the collector exports alone, the server's ``/metrics`` exports too, every
    family with samples: the DCGM exporter's names and labels and phalanx's own."""
    assert gpu_families and {n for n, s in gpu_families.items() if not s} == set()
    assert {name: families.get(name) for name in gpu_families} == gpu_families
    card = gpu_families["DCGM_FI_DEV_GPU_UTIL"]["DCGM_FI_DEV_GPU_UTIL"]
    assert {"gpu", "UUID", "device", "modelName", "Hostname"} <= card
    assert {"job", "task", "user", "queue"} <= card


def test_every_query_names_exported_metrics_and_labels(exported: Exported) -> None:
    assert problems(load_dashboard(), exported) == []


def test_every_exported_family_has_a_panel(families: Families) -> None:
    """The ``_created`` timestamps aside, nothing the server exports is left off."""
    used = {m for asked in queries(load_dashboard()) for m in read_promql(asked.expr).metrics}
    unused = {
        name
        for name, samples in families.items()
        if not name.endswith("_created") and not used & samples.keys()
    }
    assert unused == set()


def test_a_wrong_metric_or_label_is_reported(exported: Exported) -> None:
    dashboard = load_dashboard()
    broken = copy.deepcopy(dashboard)
    targets = broken["panels"][1]["targets"]
    targets[0]["expr"] = 'sum by (node) (rate(phalanx_evictions_total{queue=~"$queue"}[5m]))'
    targets.append({"refId": "Z", "expr": 'phalanx_jobs{gpu="0"}', "legendFormat": "{{job}}"})
    assert problems(dashboard, exported) == []
    where = f"panel {broken['panels'][1]['id']} {broken['panels'][1]['title']!r}"
    assert problems(broken, exported) == [
        f"{where} A: phalanx_evictions_total is not exported",
        f"{where} A: no metric of {targets[0]['expr']!r} has the label node",
        f"{where} Z: phalanx_jobs has no label gpu",
        f"{where} Z: no metric of 'phalanx_jobs{{gpu=\"0\"}}' has the label job",
    ]


def test_a_variable_must_be_label_values_of_an_exported_series(exported: Exported) -> None:
    broken = load_dashboard()
    (queue,) = [v for v in broken["templating"]["list"] if v["name"] == "queue"]
    queue["query"]["query"] = "label_values(phalanx_queues, queue)"
    assert problems(broken, exported) == [
        "variable queue: phalanx_queues is not exported",
        "variable queue: no metric of 'label_values(phalanx_queues, queue)' has the label queue",
    ]


def test_the_extractor_finds_series_selectors_and_groupings() -> None:
    latency = read_promql(
        "histogram_quantile(0.99, sum by (le) "
        "(rate(phalanx_scheduling_session_seconds_bucket[$__rate_interval])))"
    )
    assert latency == Query(
        metrics=frozenset({"phalanx_scheduling_session_seconds_bucket"}),
        selected={},
        grouped=frozenset({"le"}),
    )
    ratio = read_promql(
        'phalanx_queue_allocated{queue=~"$queue", resource="gpu"} '
        "/ on (queue, resource) (phalanx_queue_deserved{resource='a,b}'} > 0) or vector(0)"
    )
    assert ratio.metrics == {"phalanx_queue_allocated", "phalanx_queue_deserved"}
    assert ratio.selected == {
        "phalanx_queue_allocated": {"queue", "resource"},
        "phalanx_queue_deserved": {"resource"},
    }
    assert ratio.grouped == {"queue", "resource"}
    assert read_promql("sum without (phase) (phalanx_jobs) offset 1h").metrics == {"phalanx_jobs"}


def test_panels_have_unique_ids_and_read_the_chosen_prometheus() -> None:
    dashboard = load_dashboard()
    assert dashboard["schemaVersion"] >= 36 and dashboard["uid"] and dashboard["title"]
    ids = [panel["id"] for panel in all_panels(dashboard)]
    assert len(ids) == len(set(ids))
    (source,) = [v for v in dashboard["templating"]["list"] if v["type"] == "datasource"]
    assert (source["name"], source["query"]) == ("DS_PROMETHEUS", "prometheus")
    shown = [p for p in all_panels(dashboard) if p["type"] != "row"]
    assert shown and all(
        p["targets"] and {"x", "y", "w", "h"} <= p["gridPos"].keys() for p in shown
    )
    assert all(p["datasource"] == DATASOURCE for p in shown)
    assert all(t["datasource"] == DATASOURCE for p in shown for t in p["targets"])
    variables = [v for v in dashboard["templating"]["list"] if v["type"] == "query"]
    assert variables and all(v["datasource"] == DATASOURCE for v in variables)


def test_panels_do_not_overlap_and_fit_the_grid() -> None:
    """Rows and the panels of open rows, as Grafana lays them out (a collapsed row's own
    panels are placed when it opens), each within the 24 columns."""
    taken: dict[tuple[int, int], int] = {}
    for panel in load_dashboard()["panels"]:
        grid = panel["gridPos"]
        assert grid["x"] >= 0 and grid["x"] + grid["w"] <= 24, panel["id"]
        for y in range(grid["y"], grid["y"] + grid["h"]):
            for x in range(grid["x"], grid["x"] + grid["w"]):
                assert (x, y) not in taken, f"panel {panel['id']} overlaps {taken[x, y]}"
                taken[x, y] = panel["id"]


def test_the_serving_row_shows_traffic_errors_latency_load_and_replicas() -> None:
    shown = row_panels(load_dashboard(), "Serving")
    asked = [read_promql(t["expr"]) for p in shown for t in p["targets"]]
    exprs = [t["expr"] for p in shown for t in p["targets"]]
    assert set().union(*(query.metrics for query in asked)) == set(SERVING.values())

    def reading(metric: str) -> list[tuple[str, Query]]:
        return [(e, q) for e, q in zip(exprs, asked, strict=True) if metric in q.metrics]

    # requests per second by service and code
    assert any(
        q.grouped == {"service", "code"} and "rate(" in e
        for e, q in reading("phalanx_serving_requests_total")
    )
    # the error ratio of each predictor: its 5xx over all its answers
    (ratio,) = [(e, q) for e, q in reading("phalanx_serving_requests_total") if "5.." in e]
    assert ratio[1].grouped == {"service", "predictor"} and ") / sum by" in ratio[0]
    # p50 and p99 latency of each predictor
    latency = reading("phalanx_serving_request_seconds_bucket")
    quantiles = sorted(
        re.findall(r"histogram_quantile\((0\.\d+),", " ".join(e for e, _ in latency))
    )
    assert quantiles == ["0.5", "0.99"]
    assert all(q.grouped == {"service", "predictor", "le"} for _, q in latency)
    # replicas desired against Ready, per predictor
    states = {
        m for e, _ in reading("phalanx_serving_replicas") for m in re.findall(r'state="(\w+)"', e)
    }
    assert states == {"desired", "ready"}
    # every panel of the row follows the service variable
    assert all('service=~"$service"' in e for e in exprs)


def test_the_gpus_row_reads_every_gpu_family_by_card_and_by_job(gpu_families: Families) -> None:
    shown = row_panels(load_dashboard(), "GPUs")
    exprs = [t["expr"] for p in shown for t in p["targets"]]
    asked = [read_promql(e) for e in exprs]
    read = set().union(*(query.metrics for query in asked))
    assert read == {name for samples in gpu_families.values() for name in samples}

    def reading(metric: str) -> list[tuple[str, Query]]:
        return [(e, q) for e, q in zip(exprs, asked, strict=True) if metric in q.metrics]

    # a card's figures once per card (a shared card has a series per task), by node and card
    for metric in (
        "DCGM_FI_DEV_GPU_UTIL",
        "DCGM_FI_DEV_FB_USED",
        "DCGM_FI_DEV_GPU_TEMP",
        "DCGM_FI_DEV_POWER_USAGE",
        "DCGM_FI_DEV_XID_ERRORS",
    ):
        found = reading(metric)
        assert found and all(q.grouped == {"Hostname", "gpu"} for _, q in found), metric
        assert all('Hostname=~"$hostname"' in e for e, _ in found), metric
    # utilisation per card drawn over time, legend by node and card
    per_card = [
        (p, t)
        for p in shown
        for t in p["targets"]
        if p["type"] == "timeseries" and "DCGM_FI_DEV_GPU_UTIL" in t["expr"]
    ]
    assert per_card and all(t["legendFormat"] == "{{Hostname}} GPU {{gpu}}" for _, t in per_card)
    # cordoned cards, each job's utilisation and the idle jobs, the last two by queue
    assert reading("phalanx_gpu_cordoned")
    for metric in ("phalanx_job_gpu_utilisation", "phalanx_job_gpus_idle_seconds"):
        found = reading(metric)
        assert found and all('queue=~"$queue"' in e for e, _ in found), metric
    dashboard = load_dashboard()
    (hostname,) = [v for v in dashboard["templating"]["list"] if v["name"] == "hostname"]
    assert hostname["query"]["query"] == "label_values(DCGM_FI_DEV_GPU_UTIL, Hostname)"
