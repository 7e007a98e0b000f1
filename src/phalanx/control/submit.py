"""Turning a submitted document into stored rows, with every check a person can act on.

Guarantees: a job that passes ``parse_job`` and ``resolve_queues`` names an existing leaf
queue its user may submit to (the one it names, else its user's default queue, else the
queue named ``default``), has a command for every role, and is stored with one row per
task in one transaction; anything else is refused with an ``ApiError`` naming the field
and the fix.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final, Literal, assert_never

from phalanx.control.auth import Principal
from phalanx.control.errors import ApiError
from phalanx.control.store import Session
from phalanx.control.store import cluster as stored_cluster
from phalanx.control.store import jobs as stored_jobs
from phalanx.control.store import model_versions as stored_models
from phalanx.control.store import users as stored_users
from phalanx.control.store.model_versions import PENDING
from phalanx.domain.errors import DocumentError
from phalanx.domain.job import Job, JobPhase, TaskPhase
from phalanx.domain.resources import Resources
from phalanx.spec.diagnostics import Warn
from phalanx.spec.job import JobDocument
from phalanx.spec.loader import build_document
from phalanx.spec.model import ModelRef, model_reference
from phalanx.spec.quantity import resources_of
from phalanx.wire.views import JobView, TaskView

#: Tasks a job's own view carries (the submitter's answer included); the rest are read a
#: page at a time from ``/api/v1/jobs/{name}/tasks``.
TASKS_INLINE: Final = 1000


def parse_job(raw: Any, caller: Principal, warn: Warn | None = None) -> JobDocument:
    """The Job document in ``raw`` (phalanx, Volcano, OpenPAI or Kubeflow form), owned by
    ``caller``; ``warn`` gets a line for each field read but not honoured.

    A user's jobs are always their own; an admin may name another user in ``spec.user``.
    """
    try:
        document = build_document(raw, warn=warn)
    except DocumentError as error:
        raise ApiError(422, str(error), field=error.field, fix=error.fix) from None
    if not isinstance(document, JobDocument):
        raise ApiError(
            422,
            f"a {document.kind} document was sent to the jobs endpoint",
            field="kind",
            fix=f"send kind Job here; a {document.kind} goes to its own endpoint",
        )
    for i, role in enumerate(document.spec.roles):
        if not role.command:
            raise ApiError(
                422,
                f"role {role.name} has no command",
                field=f"spec.roles[{i}].command",
                fix='give the command to run, e.g. command: ["python", "train.py"]',
            )
    fields_set = document.spec.model_fields_set
    if not caller.is_admin or "user" not in fields_set:
        spec = document.spec.model_copy(update={"user": caller.name})
        document = document.model_copy(update={"spec": spec})
    return document


def resolve_queues(
    session: Session, submissions: Sequence[tuple[JobDocument, Principal]]
) -> list[JobDocument | ApiError]:
    """For each (job, submitter): the job with ``spec.queue`` set to the queue it goes to,
    or the error to answer.

    That queue is the one the job names (``spec.queue``, or its foreign form's); for a job
    that names none, its user's default queue, and for a user without one, the queue named
    ``default``. The job is refused unless that queue exists, is a leaf and lets the
    submitter in; the refusal says where the queue came from and how to choose another.
    One query for the whole batch, and a second when some job names no queue."""
    unnamed = sorted(
        {d.spec.user for d, _ in submissions if "queue" not in d.spec.model_fields_set}
    )
    defaults = stored_users.default_queues(session, unnamed) if unnamed else {}
    placed = [_placed(document, defaults) for document, _ in submissions]
    found = stored_cluster.queue_documents(session, sorted({d.spec.queue for d, _ in placed}))
    return [
        _queue_error(found.get(document.spec.queue), document, caller, origin) or document
        for (document, origin), (_, caller) in zip(placed, submissions, strict=True)
    ]


def check_models(
    session: Session, resolved: Sequence[JobDocument | ApiError]
) -> list[JobDocument | ApiError]:
    """``resolved`` with each job's model versions pinned (``pin_models``), and each job
    one of whose roles writes another user's model, or reads a version its user may
    not, replaced by its refusal (a model belongs to the user of its first version).
    One query for the owners, one per version read."""
    names = sorted(
        {
            role.model.name
            for d in resolved
            if isinstance(d, JobDocument)
            for role in d.spec.roles
            if role.model
        }
    )
    owners = stored_models.owners(session, names) if names else {}
    return [
        _model_error(d, owners) or pin_models(session, d) if isinstance(d, JobDocument) else d
        for d in resolved
    ]


def _model_error(document: JobDocument, owners: Mapping[str, str]) -> ApiError | None:
    """The refusal of ``document`` when a role of it names a model of another user."""
    for i, role in enumerate(document.spec.roles):
        if role.model is None:
            continue
        owner = owners.get(role.model.name)
        if owner is not None and owner != document.spec.user:
            return ApiError(
                403,
                f"model {role.model.name!r} belongs to user {owner}",
                field=f"spec.roles[{i}].model.name",
                fix="give your model another name",
            )
    return None


def pin_models(session: Session, document: JobDocument) -> JobDocument | ApiError:
    """``document`` with each role's ``modelVersion`` pinned (``pin_model``), or the
    refusal of the first that cannot be."""
    roles = list(document.spec.roles)
    for i, role in enumerate(roles):
        if role.model_version is None:
            continue
        field = f"spec.roles[{i}].modelVersion"
        pinned = pin_model(session, role.model_version, document.spec.user, field=field)
        if isinstance(pinned, ApiError):
            return pinned
        roles[i] = role.model_copy(update={"model_version": pinned})
    if roles == list(document.spec.roles):
        return document
    spec = document.spec.model_copy(update={"roles": roles})
    return document.model_copy(update={"spec": spec})


def pin_model(session: Session, written: str, user: str, *, field: str) -> str | ApiError:
    """The model version ``written`` names, pinned: ``NAME:vN@sha256:...`` (a bare name:
    its newest version); or the refusal naming ``field``: a version that is not there or
    not ``user``'s (the same answer: another user's models are not shown), or a digest
    that is not the version's."""
    wanted = model_reference(written)
    row = stored_models.version(session, wanted.name, wanted.version)
    if row is None or row.user != user:
        which = "no version" if wanted.version is None else f"no version {wanted.version}"
        return ApiError(
            404,
            f"user {user} has {which} of a model {wanted.name!r}",
            field=field,
            fix="name one of the user's model versions (phalanx get models)",
        )
    if wanted.digest is not None and wanted.digest != row.digest:
        return ApiError(
            409,
            f"{wanted.name}:v{row.version} is {row.digest}, not {wanted.digest}",
            field=field,
            fix="give the version's own digest (phalanx describe model), or none",
        )
    return str(ModelRef(row.name, row.version, row.digest))


#: Where a job's queue came from: named by the job, its user's default queue, or the queue
#: named ``default`` (no queue named, no default queue).
Origin = Literal["named", "users-default", "fallback"]

#: The queue of a job that names none, when its user has no default queue.
FALLBACK_QUEUE: Final = "default"

#: Where a job names its queue, in each form.
_NAMING: Final = (
    "spec.queue; runPolicy.schedulingPolicy.queue in a Kubeflow job, "
    "defaults.virtualCluster in an OpenPAI one"
)


def _placed(document: JobDocument, defaults: Mapping[str, str]) -> tuple[JobDocument, Origin]:
    """``document`` in the queue it goes to, and where that queue came from."""
    if "queue" in document.spec.model_fields_set:
        return document, "named"
    default = defaults.get(document.spec.user)
    origin: Origin = "fallback" if default is None else "users-default"
    spec = document.spec.model_copy(update={"queue": default or FALLBACK_QUEUE})
    return document.model_copy(update={"spec": spec}), origin


#: Why a queue takes no job of a user: there is no such queue, it has child queues (jobs
#: go to leaf queues), or its ``submitters`` leave the user out.
Closed = Literal["missing", "not-a-leaf", "not-a-submitter"]


def why_closed(
    found: tuple[dict[str, Any], bool] | None, user: str, *, admin: bool
) -> Closed | None:
    """Why the queue ``found`` (a value of ``store.cluster.queue_documents``; None: no such
    queue) takes no job of ``user``, or None when it takes them. ``admin``: the jobs are
    sent by an admin, whom every queue's ``submitters`` admit."""
    if found is None:
        return "missing"
    document, has_children = found
    if has_children:
        return "not-a-leaf"
    # The stored document is the validated, canonical form: read the ACL straight from it.
    allowed = document["spec"].get("submitters")
    if allowed is not None and not admin and user not in allowed:
        return "not-a-submitter"
    return None


def _queue_error(
    found: tuple[dict[str, Any], bool] | None,
    document: JobDocument,
    caller: Principal,
    origin: Origin,
) -> ApiError | None:
    name, user = document.spec.queue, document.spec.user
    whose, has = ("your", "you have") if user == caller.name else (f"{user}'s", f"{user} has")
    whence = {
        "named": "",
        "users-default": f" ({whose} default queue)",
        "fallback": f" (where a job that names no queue goes: {has} no default queue)",
    }[origin]
    again = "" if origin == "named" else _set_default(caller, whose, user)
    closed = why_closed(found, user, admin=caller.is_admin)
    match closed:
        case None:
            return None
        case "missing":
            return _missing(name, caller, origin, whose, has, user)
        case "not-a-leaf":
            return ApiError(
                422,
                f"queue {name!r}{whence} has child queues; jobs go to leaf queues",
                field="spec.queue",
                fix=f"submit to one of its children{again}",
            )
        case "not-a-submitter":
            return ApiError(
                403,
                f"user {user} may not submit to queue {name}{whence}",
                field="spec.queue",
                fix=f"use a queue you may submit to, or ask an admin to add you to {name}'s "
                f"submitters{again}",
            )
        case _:
            assert_never(closed)


def _missing(
    name: str, caller: Principal, origin: Origin, whose: str, has: str, user: str
) -> ApiError:
    """The refusal of a job whose queue ``name`` does not exist."""
    if origin == "named":
        return ApiError(
            422,
            f"queue {name!r} does not exist",
            field="spec.queue",
            fix="name an existing queue (phalanx get queues)",
        )
    if origin == "users-default":
        detail = f"the job names no queue, and {whose} default queue {name!r} does not exist"
    else:
        detail = f"the job names no queue, {has} no default queue, and no queue {name!r} exists"
    return ApiError(
        422,
        detail,
        field="spec.queue",
        fix=f"name an existing queue in the job ({_NAMING}; phalanx get queues lists them)"
        + _set_default(caller, whose, user),
    )


def _set_default(caller: Principal, whose: str, user: str) -> str:
    """The end of a fix: how the job's user gets a default queue that takes the job."""
    command = f"phalanx users set {user} --default-queue QUEUE"
    if caller.is_admin:
        return f", or set {whose} default queue ({command})"
    return f", or ask an admin to set your default queue ({command})"


@dataclass(frozen=True, slots=True)
class Stored:
    """A job just inserted: its row id, its domain form and the answer to its submitter."""

    id: int
    job: Job
    view: JobView


def store_jobs(session: Session, documents: Sequence[JobDocument]) -> list[Stored]:
    """Insert the jobs and their tasks (phase Pending) with two statements; what was
    stored, in order. Raises ``IntegrityError`` when a name is taken (the caller rolls
    back)."""
    if not documents:
        return []
    now = time.time()
    jobs = [document.to_domain(creation_time=now) for document in documents]
    rows: list[dict[str, Any]] = [
        {
            "name": job.name,
            "queue": job.queue,
            "user": job.user,
            "document": document.model_dump(mode="json", by_alias=True, exclude_none=True),
            "phase": JobPhase.PENDING.value,
            "reason": "Submitted",
            "message": "",
            "phase_time": now,
            "created_at": now,
            "attempts": 0,
            "preemptions": 0,
            "cancel_requested": False,
            "ingested": False,
            "model_intake": (PENDING if any(role.model for role in document.spec.roles) else None),
            # its inputs (model versions, datasets) are made ready before it is taken in
            "model_fetch": (
                PENDING
                if any(role.model_version or role.datasets for role in document.spec.roles)
                else None
            ),
        }
        for job, document in zip(jobs, documents, strict=True)
    ]
    ids = stored_jobs.insert_jobs(session, rows)
    tasks: list[dict[str, Any]] = [
        {
            "job_id": job_id,
            "name": task.name(job.name),
            "role": task.role,
            "index": task.index,
            "phase": TaskPhase.PENDING.value,
            "gpus": [],
        }
        for job, job_id in zip(jobs, ids, strict=True)
        for task in job.all_tasks()
    ]
    stored_jobs.insert_tasks(session, tasks)
    by_job: dict[int, list[TaskView]] = {}
    counts: dict[int, int] = {}
    for task in tasks:
        counts[task["job_id"]] = counts.get(task["job_id"], 0) + 1
        shown = by_job.setdefault(task["job_id"], [])
        if len(shown) < TASKS_INLINE:
            shown.append(
                TaskView(
                    name=task["name"], role=task["role"], index=task["index"], phase=task["phase"]
                )
            )
    return [
        Stored(
            job_id,
            job,
            JobView(
                name=job.name,
                queue=job.queue,
                user=job.user,
                phase=JobPhase.PENDING.value,
                reason="Submitted",
                created_at=now,
                requests=requested(row["document"]),
                task_counts={TaskPhase.PENDING.value: counts[job_id]},
                tasks=by_job[job_id],
                tasks_omitted=counts[job_id] - len(by_job[job_id]),
            ),
        )
        for job, job_id, row in zip(jobs, ids, rows, strict=True)
    ]


def requested(document: dict[str, Any]) -> dict[str, float]:
    """What a stored Job document's replicas ask for together, in canonical units (the
    stored document is the validated canonical form: its roles are read directly)."""
    total = Resources()
    for role in document["spec"]["roles"]:
        total = total + resources_of(role["resources"]).scaled(role["replicas"])
    return dict(total.items())


def name_taken(name: str, caller: Principal, owner: str | None) -> ApiError:
    """The answer to a job whose name is already used.

    Job names are unique across every user of the server (the scheduler, the executor's
    directories and the API all know a job by its name alone). So a name taken by
    another user's job cannot be given out, but the answer does not say whose it is, nor
    that it names a job: only that the name is not available. The caller's own job is
    named as such, with what to do (``owner``: the user whose job has the name, None
    when unknown).
    """
    if owner == caller.name:
        return ApiError(
            409,
            f"you already have a job named {name!r}",
            field="metadata.name",
            fix="choose another name, or delete the old job first (phalanx delete job NAME)",
        )
    return ApiError(
        409,
        f"the job name {name!r} is not available",
        field="metadata.name",
        fix="choose another name: job names are unique across all users of this server "
        f"(starting yours with your user name, {caller.name}-..., avoids clashes)",
    )
