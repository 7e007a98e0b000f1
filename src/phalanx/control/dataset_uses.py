"""The datasets a job's roles read, checked at submit: ``check_datasets``.

A role's ``datasets`` name datasets of the job's user; at submit each must exist (the
same 404 as for a dataset of another user: theirs are not shown), and one given pinned
(``NAME@sha256:...``) must be pinned to its current listing, the only one the nodes can
copy. Whether a dataset was listed is not checked here: the job waits for its listing
(``controllers.model_fetch``), as it waits for its node's copy.
"""

from __future__ import annotations

from collections.abc import Sequence

from phalanx.control.errors import ApiError
from phalanx.control.store import Session
from phalanx.control.store import datasets as stored
from phalanx.spec.job import JobDocument


def check_datasets(
    session: Session, resolved: Sequence[JobDocument | ApiError]
) -> list[JobDocument | ApiError]:
    """``resolved`` with each job whose datasets do not pass (see the module docstring)
    replaced by its refusal, naming ``spec.roles[i].datasets[j]``."""
    return [(_refusal(session, d) or d) if isinstance(d, JobDocument) else d for d in resolved]


def _refusal(session: Session, document: JobDocument) -> ApiError | None:
    user = document.spec.user
    for i, role in enumerate(document.spec.roles):
        for j, reference in enumerate(role.datasets):
            name, _, digest = reference.partition("@")
            row = stored.get(session, user, name)
            if row is None:
                return ApiError(
                    404,
                    f"user {user} has no dataset {name!r}",
                    field=f"spec.roles[{i}].datasets[{j}]",
                    fix="create it first (phalanx apply -f DATASET.yaml); list them: "
                    "phalanx get datasets",
                )
            if digest and digest != row.digest:
                return ApiError(
                    409,
                    f"dataset {name!r} is pinned to {digest}, which is not its current "
                    f"listing ({row.digest or 'none yet'})",
                    field=f"spec.roles[{i}].datasets[{j}]",
                    fix=f"name it as {name} (the server pins it to its listing)",
                )
    return None
