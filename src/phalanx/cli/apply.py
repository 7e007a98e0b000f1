"""``phalanx apply -f FILE``: create or update queues and submit jobs.

Guarantees: every file is read and every document validated before the first is sent,
so a bad document changes nothing; the error names the file, the document, its line
and field, and the fix. Queues are sent before jobs. Each document sent prints one
line ``queue/NAME created|configured|unchanged`` or ``job/NAME created|unchanged``
(``unchanged``: the server holds this very document already; never for a secret, whose
values are never read back: ``secret/NAME created|configured``). A job cannot be changed in
place: applying another document under a job's name is refused with the fields that
differ and what to do (delete it and apply again, or choose another name). A field of a
foreign document (Kubeflow, ...) that phalanx reads but does not honour prints one
``warning: FILE document N (KIND NAME): FIELD: ...`` line on stderr, and the document is
sent all the same.
"""

from __future__ import annotations

import sys
from pathlib import Path

import typer

from phalanx.cli.remote import connect, reported
from phalanx.client import PreparedDocument, prepare_documents, queues_first


def apply(
    ctx: typer.Context,
    files: list[str] = typer.Option(
        ...,
        "--filename",
        "-f",
        help="A YAML/JSON file of Queue, Job (phalanx, Volcano, Kubeflow, OpenPAI), Pipeline, "
        "Inference, Secret, Dataset and Tuning documents, or a Python file building a "
        "pipeline ('-' reads stdin). Repeatable.",
    ),
) -> None:
    """Create or update the queues, secrets, datasets, pipelines and inference services,
    submit the jobs and start the tunings of the given files."""
    documents: list[PreparedDocument] = []
    with reported():
        for name in files:
            if name == "-":
                documents += prepare_documents(sys.stdin.read(), source="<stdin>", warn=_warn)
            else:
                documents += prepare_documents(Path(name), warn=_warn)
    with connect(ctx) as client:
        for applied in client.apply_prepared(queues_first(documents)):
            typer.echo(f"{applied.kind.lower()}/{applied.name} {applied.action}")


def _warn(line: str) -> None:
    typer.echo(f"warning: {line}", err=True)
