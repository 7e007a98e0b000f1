"""``phalanx gateway``: the inference gateway in a process of its own, for scale.

It reads the store ``phalanx up`` writes (the same ``--data-dir``, or ``--db`` for
PostgreSQL): the services, their Ready replicas and the tokens; it reports its load and
answers back there, so the server's autoscaler and rollouts see its traffic. Run several
behind any load balancer; each serves ``/serve/NAME/...`` as ``phalanx up`` does, and
``/healthz`` for the balancer's checks.
"""

from __future__ import annotations

from pathlib import Path

import typer

from phalanx.cli.remote import fail, reported
from phalanx.cli.up import check_port, default_data_dir, log_to_stderr


def gateway(
    data_dir: Path | None = typer.Option(
        None, "--data-dir", help="The server's data dir, whose database it reads (as up)."
    ),
    db: str | None = typer.Option(
        None, "--db", help="The server's database URL instead (e.g. PostgreSQL's)."
    ),
    host: str = typer.Option("127.0.0.1", "--host", help="Address to listen on."),
    port: int = typer.Option(8081, "--port", min=1, max=65535, help="Port to listen on."),
) -> None:
    """Serve /serve/NAME/ from a process of its own, reading the server's store."""
    # The server's stack loads for this command alone, so other commands start fast.
    from phalanx.control.gateway_process import (  # noqa: PLC0415
        GatewayProcess,
        GatewaySettings,
        open_store,
    )
    from phalanx.control.store.database import sqlite_url  # noqa: PLC0415

    directory = (data_dir or default_data_dir()).absolute()
    given = db is not None
    if db is None:
        if not (directory / "phalanx.db").is_file():
            fail(
                f"--data-dir: {directory} holds no phalanx database; fix: give the data dir "
                "phalanx up uses, or --db with its database URL"
            )
        db = sqlite_url(directory)
    elif data_dir is not None:
        fail("--db and --data-dir: give one of them")
    with reported():
        check_port(host, port)
        store = open_store(db)
        process = GatewayProcess(GatewaySettings(db_url=db, host=host, port=port), store)
    log_to_stderr()
    where = "the database given with --db" if given else f"the store of {directory}"
    typer.echo(f"phalanx gateway at http://{host}:{port}/serve/, reading {where}", err=True)
    try:
        process.serve()
    finally:
        store.close()
