"""``phalanx demo``: the control plane on this machine, running a real distributed job.

It starts ``phalanx up``'s server in-process (SQLite, local executor) on a declared
cluster of 2 nodes x 4 virtual GPUs, applies two team queues, and submits a mix of jobs
over the HTTP API: a 2-worker PyTorch DDP training (gloo, on CPUs) gang-scheduled with
the injected rendezvous variables, GPU-sharing sweeps, a job that fails once and is
retried, and one that cannot fit, whose pending reason is shown. It follows them live,
prints a summary and the API and metrics addresses, then exits (``--keep`` keeps
serving until Ctrl-C).

Run as root, the demo's server runs tasks as their users' own uids (the admin who
submits them gets one) when this Python, phalanx and its packages are reachable by
other users; when they are not (a Python under /root, say), it says so and runs with a
shared identity (``--shared-identity``) instead, since no task could start otherwise.
"""

from __future__ import annotations

import os
import sys
import sysconfig
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import httpx
import typer
from rich.console import Console
from rich.live import Live
from rich.table import Table

if TYPE_CHECKING:
    from phalanx.control.server import Server

CLUSTER = """\
apiVersion: phalanx/v1
kind: Cluster
metadata: {name: demo}
spec:
  nodeGroups:
  - name: gpu
    count: 2
    resources: {cpu: 8, memory: 32Gi}
    gpus: {count: 4, model: virtual-A100, memory: 40Gi, topology: pcie-4gpu}
"""

TERMINAL = {"Succeeded", "Failed", "Cancelled"}


def _queue(name: str, **spec: Any) -> dict[str, Any]:
    return {"apiVersion": "phalanx/v1", "kind": "Queue", "metadata": {"name": name}, "spec": spec}


def _job(name: str, queue: str, *roles: dict[str, Any], **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "phalanx/v1",
        "kind": "Job",
        "metadata": {"name": name},
        "spec": {"queue": queue, "roles": list(roles), **spec},
    }


def _role(name: str, replicas: int, command: list[str] | str, **resources: Any) -> dict[str, Any]:
    return {"name": name, "replicas": replicas, "resources": resources, "command": command}


def _jobs() -> list[dict[str, Any]]:
    python = sys.executable
    return [
        _job(
            "ddp-train",
            "vision",
            _role(
                "worker",
                2,
                [python, "-m", "phalanx.examples.ddp_train", "--steps", "300"],
                cpu=1,
                memory="2Gi",
                gpu=1,
            ),
            priority=10,
        ),
        *[
            _job(
                f"sweep-{i}",
                "nlp",
                _role(
                    "trial",
                    1,
                    f"echo trial {i} on GPU $CUDA_VISIBLE_DEVICES; sleep 3",
                    cpu=1,
                    gpu=0.5,
                ),
            )
            for i in range(4)
        ],
        _job(
            "flaky-etl",
            "nlp",
            _role(
                "main",
                1,
                # Its directory outlives an attempt: the second one finds the first's line.
                "echo attempt >> attempts; test $(wc -l < attempts) -ge 2 || exit 7; echo done",
                cpu=1,
            ),
            maxRetry=2,
        ),
        _job("too-big", "nlp", _role("main", 1, "true", cpu=1, gpu=8)),
    ]


def demo(
    keep: bool = typer.Option(False, "--keep", help="Keep serving after the demo (Ctrl-C stops)."),
    port: int = typer.Option(8080, help="Port for the API (0: any free port)."),
    data_dir: Path | None = typer.Option(None, help="Data dir (default: a temporary one)."),
) -> None:
    """Start the control plane, run a real 2-worker PyTorch DDP job and friends, summarise."""
    from phalanx.control.server import Server, ServerSettings  # noqa: PLC0415  (heavy)

    console = Console()
    with tempfile.TemporaryDirectory(prefix="phalanx-demo-") as scratch:
        root = Path(scratch)
        root.chmod(0o711)  # the tasks dir beside the data dir must be reachable by task uids
        (root / "cluster.yaml").write_text(CLUSTER)
        shared = _shared_identity(console)
        settings = ServerSettings(
            data_dir=data_dir or root / "data",
            port=port,
            cluster=root / "cluster.yaml",
            shared_identity=shared,
        )
        server = Server(settings)
        try:
            server.start()
        except (RuntimeError, OSError) as error:
            console.print(f"[red]error:[/] cannot serve on port {port}: {error}; fix: --port 0")
            raise typer.Exit(1) from None
        try:
            _run(console, server)
            if keep:
                token = (server.settings.data_dir / "admin.token").read_text().strip()
                console.print("Serving; Ctrl-C stops. In another shell:")
                console.print(f"export PHALANX_SERVER={server.url}\nexport PHALANX_TOKEN={token}")
                while True:
                    time.sleep(3600)
            console.print(
                "The demo's server stops now (its data was temporary); "
                "[bold]phalanx demo --keep[/] keeps it serving for the CLI and the API."
            )
        except KeyboardInterrupt:
            pass
        finally:
            server.stop()


def _shared_identity(console: Console) -> bool:
    """True when the demo must run every task as the server: it runs as root, and what
    its tasks run (this Python, phalanx, the packages) is out of other users' reach."""
    from phalanx.executors.identity import unreachable_by_others  # noqa: PLC0415

    if os.geteuid() != 0:
        return False
    import phalanx  # noqa: PLC0415

    needed = (
        Path(sys.executable),
        Path(phalanx.__file__).parent,
        Path(sysconfig.get_paths()["purelib"]),
    )
    why = next((w for w in map(unreachable_by_others, needed) if w), None)
    if why is None:
        return False
    console.print(
        f"[yellow]note:[/] tasks would run as their users' own uids, but {why}: the demo "
        "runs them as the server instead (--shared-identity)"
    )
    return True


def _run(console: Console, server: Server) -> None:
    token = (server.settings.data_dir / "admin.token").read_text().strip()
    console.rule(f"[bold]phalanx demo: control plane at {server.url}")
    with httpx.Client(base_url=server.url, headers={"Authorization": f"Bearer {token}"}) as api:
        for queue in (
            _queue("vision", guarantee={"gpu": 4}, deserved={"gpu": 4}),
            _queue("nlp", guarantee={"gpu": 2}, deserved={"gpu": 4}),
        ):
            _check(api.post("/api/v1/queues", json=queue))
            console.print(f"applied queue [bold]{queue['metadata']['name']}[/]")
        for document in _jobs():
            _check(api.post("/api/v1/jobs", json=document))
            console.print(f"submitted [bold]{document['metadata']['name']}[/]")
        jobs = _follow(console, api)
        console.print()  # the live table's border ends here, before the summary
        _summary(console, api, jobs)
        _placements(console, api)
    console.print(
        f"API: {server.url}/docs   metrics: {server.url}/metrics "
        f"(token: {server.settings.data_dir / 'metrics.token'})"
    )


def _follow(console: Console, api: httpx.Client) -> list[dict[str, Any]]:
    deadline = time.monotonic() + 300
    jobs: list[dict[str, Any]] = []
    with Live(console=console, refresh_per_second=4) as live:
        while time.monotonic() < deadline:
            jobs = _check(api.get("/api/v1/jobs", params={"limit": 100}))["items"]
            live.update(_table(jobs))
            if all(j["phase"] in TERMINAL or j["name"] == "too-big" for j in jobs):
                break
            time.sleep(0.25)
    return jobs


def _table(jobs: list[dict[str, Any]]) -> Table:
    """The jobs at a glance, within 80 columns: a long reason wraps between words."""
    table = Table(title="jobs", width=80, caption="tasks: counts by phase @ the nodes they hold")
    for column in ("job", "queue", "phase", "tasks", "retries"):
        table.add_column(column, no_wrap=column != "tasks")
    table.add_column("why", ratio=1, overflow="fold")
    for job in jobs:
        counts = ", ".join(f"{n} {phase}" for phase, n in sorted(job["task_counts"].items()))
        tasks = counts + (f" @ {', '.join(job['nodes'])}" if job["nodes"] else "")
        why = job["message"] if job["phase"] in ("Pending", "Queued") else ""
        table.add_row(job["name"], job["queue"], job["phase"], tasks, str(job["attempts"]), why)
    return table


def _placements(console: Console, api: httpx.Client) -> None:
    """Point out what the scheduler just did: the gang placed whole, the shared cards."""
    gang = _check(api.get("/api/v1/jobs/ddp-train"))["tasks"]
    where = "; ".join(
        f"{t['name']} on {t['node']} GPU {','.join(map(str, t['gpus']))}" for t in gang
    )
    console.print(f"[bold]gang:[/] ddp-train's {len(gang)} workers were placed together: {where}")
    cards: dict[tuple[str, int], list[str]] = {}
    for i in range(4):
        for task in _check(api.get(f"/api/v1/jobs/sweep-{i}"))["tasks"]:
            for card in task["gpus"]:
                cards.setdefault((task["node"], card), []).append(f"sweep-{i}")
    shared = [
        f"GPU {card} of {node}: {' and '.join(jobs)}"
        for (node, card), jobs in cards.items()
        if len(jobs) > 1
    ]
    if shared:
        console.print(f"[bold]sharing:[/] gpu: 0.5 trials share a card: {'; '.join(shared)}")


def _summary(console: Console, api: httpx.Client, jobs: list[dict[str, Any]]) -> None:
    console.rule("[bold]summary")
    for job in jobs:
        took = ""
        if job["started_at"] and job["finished_at"]:
            took = f" in {job['finished_at'] - job['started_at']:.1f} s"
        console.print(f"{job['name']:<10} {job['phase']}{took}  {job['reason']}: {job['message']}")
    log = api.get("/api/v1/jobs/ddp-train/logs", params={"task": "ddp-train-worker-0"}).text
    console.print("[bold]ddp-train rank 0 output:[/]")
    console.print(log.strip() or "(no output)")
    why = _check(api.get("/api/v1/jobs/too-big/why"))
    console.print(f"[bold]why is too-big pending?[/] {why['reason']}: {why['message']}")


def _check(response: httpx.Response) -> Any:
    if response.status_code >= 400:
        raise RuntimeError(f"{response.request.method} {response.request.url}: {response.text}")
    return response.json()
