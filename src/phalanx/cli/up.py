"""``phalanx up``: run the control plane in this process (API, controller, executor).

Guarantees: bad options (an unknown executor, a Cluster or scheduler file that does
not validate, a port in use, a bad database URL, a bad ``--task-uids`` range, a
``--tasks-dir`` tasks of other uids could not reach) end with one ``error:`` line naming
the option and the fix, and no admin is created; all but the database are checked
before the data dir is touched. The server's warnings go to stderr as ``WARNING: ...``
lines: at start, who tasks run as when it is not each user's own uid (single-user mode
without root, or ``--shared-identity``), and how tasks are limited when it is less than
CPU, memory and processes for each task's whole tree. On a fresh data dir it prints the
``export`` lines that point the CLI at the server with the new admin token (also saved
in ``DATA_DIR/admin.token``); later starts say where that file is. Every start says
where the token that reads ``/metrics`` is (``DATA_DIR/metrics.token``). SIGINT (Ctrl-C) and
SIGTERM stop it in order (``Server.serve``); it then says so on stderr and exits 0.
"""

from __future__ import annotations

import logging
import os
import socket
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Final

import typer

from phalanx.cli.remote import fail, reported

if TYPE_CHECKING:
    from phalanx.control.server import Server, ServerSettings
    from phalanx.domain.prices import PriceSheet
    from phalanx.tuning.objective import Prices

#: The executors ``--executor`` accepts.
EXECUTORS: Final = ("local", "ray")
DATA_DIR_ENV: Final = "PHALANX_DATA_DIR"
#: The file in the data dir that holds the first admin's token (``control.auth`` writes it).
ADMIN_TOKEN_FILE: Final = "admin.token"
#: The file in the data dir that holds the token for ``/metrics`` (``control.metrics``).
METRICS_TOKEN_FILE: Final = "metrics.token"


#: The data dir of a server run as root, as a system service's state (the FHS's /var/lib):
#: its tasks dir and workspace then default to /var/lib/phalanx-tasks and -workspace
#: beside it, which tasks running as their users' own uids can reach.
SYSTEM_DATA_DIR: Final = Path("/var/lib/phalanx")


def default_data_dir() -> Path:
    """``$PHALANX_DATA_DIR``; else as root ``/var/lib/phalanx``; else
    ``$XDG_DATA_HOME/phalanx``, else ``~/.local/share/phalanx``."""
    explicit = os.environ.get(DATA_DIR_ENV)
    if explicit:
        return Path(explicit).expanduser()
    if os.geteuid() == 0:
        return SYSTEM_DATA_DIR
    base = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(base) / "phalanx"


#: How far below the watermark the online load must fall before paused tasks resume.
COLOCATION_BAND: Final = 0.1


def up(
    data_dir: Path | None = typer.Option(
        None,
        "--data-dir",
        help=f"Database, admin token, task logs. Default: ${DATA_DIR_ENV}, else {SYSTEM_DATA_DIR} "
        "as root, else ~/.local/share/phalanx.",
    ),
    db: str | None = typer.Option(
        None, "--db", help="A database URL (default: SQLite in the data dir)."
    ),
    host: str = typer.Option("127.0.0.1", "--host", help="Address to listen on."),
    port: int = typer.Option(8080, "--port", min=1, max=65535, help="Port to listen on."),
    cluster: Path | None = typer.Option(
        None, "--cluster", help="A Cluster document of (virtual) nodes; default: this host."
    ),
    executor: str = typer.Option(
        "local",
        "--executor",
        help=f"One of: {', '.join(EXECUTORS)} (local: tasks run on this host; ray: on the "
        "nodes of the Ray cluster at --ray-address).",
    ),
    ray_address: str | None = typer.Option(
        None,
        "--ray-address",
        help="With --executor ray: the Ray head's host:port (as `ray start --head` printed it).",
    ),
    scheduler: str = typer.Option(
        "phalanx-default", "--scheduler", help="A shipped policy or a SchedulerConfig file."
    ),
    tasks_dir: Path | None = typer.Option(
        None,
        "--tasks-dir",
        help="Where tasks run and keep their logs. Default: DATA_DIR/tasks, or DATA_DIR-tasks "
        "beside it when the server runs as root (tasks then run as their users' own uids and "
        "must not enter the data dir).",
    ),
    task_uids: str = typer.Option(
        "70000-79999",
        "--task-uids",
        help="FIRST-LAST: the uids (and equal gids) allocated to users without an account, "
        "when the server runs as root.",
    ),
    workspace: str | None = typer.Option(
        None,
        "--workspace",
        help="Where pipeline runs keep their artifacts: a directory or an fsspec URL "
        "(s3://bucket/phalanx with s3fs installed, ...). Default: DATA_DIR/workspace, or "
        "DATA_DIR-workspace beside it when tasks run as their users' own uids.",
    ),
    models: str | None = typer.Option(
        None,
        "--models",
        help="Where model versions are kept: a directory or an fsspec URL (s3://bucket/models "
        "with s3fs installed, ...). Default: DATA_DIR/models.",
    ),
    data_cache: str = typer.Option(
        "64Gi",
        "--data-cache",
        help="The most this host's dataset cache holds (TASKS_DIR-data), as a quantity "
        "(500Gi, 2Ti): past 95% of it, the least recently used datasets no task reads are "
        "evicted down to 80%.",
    ),
    prices: str = typer.Option(
        "cpu=1,memory=0.125,gpu=10",
        "--prices",
        help="What an hour of a core, a GiB of memory and a GPU costs, as name=price pairs, "
        "or a Prices file (YAML) that also prices node classes by label and reclaimable "
        "nodes apart (docs/tasks/usage.md). Usage reports (phalanx usage) charge these; "
        "right-sizing (phalanx tune) charges the default prices.",
    ),
    reports: Path | None = typer.Option(
        None,
        "--reports",
        help="A folder of simulator reports (phalanx sim compare --out DIR/NAME) to list and "
        "serve to signed-in users at /api/v1/reports and in the console at /ui/reports.",
    ),
    colocation: float = typer.Option(
        0.7,
        "--colocation-watermark",
        min=0.0,
        max=1.0,
        help="Pause offline tasks on a host while its online tasks (inference replicas, "
        "serviceClass: online) use more than this share of its CPU or of their GPUs; they "
        "resume once it falls 0.1 below. 0: never pause them.",
    ),
    gpu_interval: float = typer.Option(
        5.0,
        "--gpu-interval",
        min=0.0,
        help="Seconds between readings of the GPUs through NVML (utilisation, memory, "
        "temperature, power, XID errors, health counters): of this host when it is the "
        "server's one node, or of each Ray node by its agent (as the agent starts). 0: never.",
    ),
    shared_identity: bool = typer.Option(
        False,
        "--shared-identity",
        help="Run every user's tasks as the server's own uid, accepting that users are not "
        "isolated from each other or from the data dir (without root, this is what allows "
        "more than one user).",
    ),
) -> None:
    """Run the control plane here until Ctrl-C: the API, the scheduler and the executor."""
    # The server's stack (FastAPI, uvicorn, SQLAlchemy) loads only for this command, so
    # every other command starts quickly.
    from phalanx.control.server import ServerSettings, cluster_nodes  # noqa: PLC0415
    from phalanx.control.tenancy import UidRange  # noqa: PLC0415
    from phalanx.control.tenancy.modes import IdentityMode, decide  # noqa: PLC0415
    from phalanx.control.tenancy.places import (  # noqa: PLC0415
        check_tasks_dir,
        default_tasks_dir,
    )
    from phalanx.domain.resources import parse_quantity  # noqa: PLC0415
    from phalanx.executors.ray.cluster import check_address  # noqa: PLC0415
    from phalanx.policies import load_policy  # noqa: PLC0415
    from phalanx.workflow.artifacts import check_workspace  # noqa: PLC0415

    directory = (data_dir or default_data_dir()).absolute()
    with reported():
        if executor not in EXECUTORS:
            fail(
                f"--executor: {executor!r} is not available; "
                f"fix: use one of: {', '.join(EXECUTORS)}"
            )
        if executor == "ray" and not ray_address:
            fail("--ray-address: the ray executor needs it; fix: give the Ray head's host:port")
        if executor != "ray" and ray_address:
            fail("--ray-address: only the ray executor takes it; fix: add --executor ray")
        if ray_address:
            check_address(ray_address)
        cluster_nodes(cluster)  # checked before anything is written
        if workspace is not None:
            workspace = check_workspace(workspace)
        load_policy(scheduler)
        if reports is not None and not reports.is_dir():
            fail(
                f"--reports: {reports} is not a directory; fix: give the folder holding the reports"
            )
        check_port(host, port)
        quota = int(parse_quantity(data_cache, field="--data-cache"))
        if quota <= 0:
            fail(f"--data-cache: {data_cache} holds nothing; fix: give a size such as 64Gi")
        if 0 < colocation <= COLOCATION_BAND:
            fail(
                f"--colocation-watermark: {colocation} is within the {COLOCATION_BAND} band "
                "tasks resume below; fix: give more than 0.1, or 0 to never pause them"
            )
        uids = UidRange.parse(task_uids)
        sheet = parse_prices(prices)
        per_user = decide(root=os.geteuid() == 0, shared=shared_identity)
        tasks = (
            tasks_dir or default_tasks_dir(directory, per_user=per_user is IdentityMode.PER_USER)
        ).absolute()
        if per_user is IdentityMode.PER_USER:
            check_tasks_dir(tasks, directory)
            _check_local_workspace(workspace, directory)
        settings = ServerSettings(
            data_dir=directory,
            db_url=db,
            host=host,
            port=port,
            cluster=cluster,
            scheduler=scheduler,
            tasks_dir=tasks,
            task_uids=uids,
            shared_identity=shared_identity,
            executor=executor,
            ray_address=ray_address,
            workspace=workspace,
            models=models if models is None or "://" in models else str(Path(models).absolute()),
            reports=None if reports is None else reports.absolute(),
            colocation=colocation or None,
            gpu_interval=gpu_interval or None,
            data_cache_quota=quota,
            prices=tuning_prices(sheet),
            price_sheet=sheet,
        )
        log_to_stderr()
        server = _server(settings)
    announce(server, directory)
    stopped = server.serve()
    # A stop by SIGINT or SIGTERM is the ordinary end of a service: exit code 0.
    typer.echo(stopped.describe(), err=True)


def _check_local_workspace(workspace: str | None, data_dir: Path) -> None:
    """With per-user identities, refuse a workspace on this host (the default beside the
    data dir, or a path) that steps could not reach: they write their outputs there."""
    from phalanx.control.server import default_workspace_path  # noqa: PLC0415
    from phalanx.control.tenancy.places import check_workspace_dir  # noqa: PLC0415

    if workspace is None:
        check_workspace_dir(default_workspace_path(data_dir, per_user=True), data_dir)
    elif os.path.isabs(workspace):  # check_workspace made a local one absolute; a URL is not
        check_workspace_dir(Path(workspace), data_dir)


def _server(settings: ServerSettings) -> Server:
    from phalanx.control.server import Server  # noqa: PLC0415
    from phalanx.control.store import SQLAlchemyError  # noqa: PLC0415
    from phalanx.domain.errors import InvalidInput  # noqa: PLC0415

    try:
        return Server(settings)
    except InvalidInput as error:  # a setting of the host's, e.g. PHALANX_CONTAINER_*
        fail(str(error))
    except SQLAlchemyError as error:
        fail(f"--db: cannot use the database: {str(error).splitlines()[0]}; fix: check the URL")
    except OSError as error:
        fail(
            f"--data-dir: cannot use {settings.data_dir}: {error.strerror or error}; "
            "fix: choose a directory you can write"
        )


#: Where ``up`` sends the server's warnings: one handler, pointed at the current stderr.
_STDERR = logging.StreamHandler()
_STDERR.setFormatter(logging.Formatter("%(levelname)s: %(message)s"))
_STDERR.setLevel(logging.WARNING)


def log_to_stderr() -> None:
    """The server's warnings (and worse) as ``WARNING: ...`` lines on stderr."""
    _STDERR.stream = sys.stderr  # not setStream: that flushes the previous one, maybe closed
    logging.getLogger("phalanx").addHandler(_STDERR)  # once: a handler is added only once


def check_port(host: str, port: int) -> None:
    """End the command with an ``error:`` line when ``host`` is not an address of this
    machine or ``port`` is taken there."""
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except socket.gaierror:
        fail(f"--host: {host!r} is not an address of this machine; fix: use e.g. 127.0.0.1")
    family, kind, proto, _, address = infos[0]
    with socket.socket(family, kind, proto) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind(address)
        except OSError as error:
            fail(
                f"--port: cannot listen on {host}:{port}: {error.strerror or error}; "
                "fix: choose another --port, or stop the server already there"
            )


def announce(server: Server, data_dir: Path) -> None:
    """Tell the user where the server is and how to reach it."""
    url = _client_url(server.settings.host, server.settings.port)
    token_file = data_dir / ADMIN_TOKEN_FILE
    typer.echo(f"phalanx serving on {url} (data in {data_dir}); Ctrl-C stops it")
    typer.echo(f"export PHALANX_SERVER={url}")
    if server.admin_token is not None:
        typer.echo(f"export PHALANX_TOKEN={server.admin_token}")
        typer.echo(f"# first start: user 'admin' created; its token is saved in {token_file}")
    elif token_file.exists():
        typer.echo(f'export PHALANX_TOKEN="$(cat {token_file})"')
        typer.echo(f"# the admin token is in {token_file}")
    else:
        typer.echo(f"# {token_file} is gone; ask an admin for a token (phalanx token create)")
    typer.echo(
        f"# /metrics takes the token in {data_dir / METRICS_TOKEN_FILE} "
        "(Prometheus: authorization.credentials_file) or an admin's token"
    )


def _client_url(host: str, port: int) -> str:
    if host in ("0.0.0.0", "", "::"):
        host = "127.0.0.1"  # listening everywhere: this machine reaches it on loopback
    if ":" in host:
        host = f"[{host}]"
    return f"http://{host}:{port}"


def parse_prices(text: str) -> PriceSheet:
    """``--prices``: ``cpu=1,memory=0.125,gpu=10`` (a name left out keeps its default)
    or the path of a Prices file; a person's mistake fails naming ``--prices`` and the fix."""
    from phalanx.domain.errors import InvalidInput  # noqa: PLC0415
    from phalanx.spec.prices import parse_short, read_prices  # noqa: PLC0415

    try:
        if "=" in text or not text.strip():
            return parse_short(text, field="--prices")
        return read_prices(text)
    except InvalidInput as error:
        fail(error)


def tuning_prices(sheet: PriceSheet) -> Prices:
    """What right-sizing charges: the sheet's default prices of cpu, memory and gpu."""
    from phalanx.tuning.objective import Prices  # noqa: PLC0415

    rates = sheet.default
    return Prices(cpu=rates.get("cpu"), memory=rates.get("memory"), gpu=rates.get("gpu"))
