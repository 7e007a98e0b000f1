"""The secrets a job's roles name, checked at submit: ``check_secrets``.

A role's ``secrets`` name secrets of the job's user; at submit each must exist (the
same 404 as for a secret of another user: theirs are not shown), and one given
``as: env`` must give only keys that are variable names, none set by the role's own
``env``, none of phalanx's (``PHALANX_...``), and no key given by two of the role's
secrets, nor more bytes than one variable may hold. Only the keys and sizes are read (they are stored in clear); values stay sealed. The
check is what a submitter sees at once; the launch checks again (a secret deleted since
fails the task's start with the reason).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

from phalanx.control.errors import ApiError
from phalanx.control.store import Session
from phalanx.control.store import secrets as stored
from phalanx.spec.common import ENV_NAME
from phalanx.spec.job import JobDocument
from phalanx.spec.limits import MAX_ENV_ENTRY

#: The variables phalanx sets.
_RESERVED: Final = "PHALANX_"


def check_secrets(
    session: Session, resolved: Sequence[JobDocument | ApiError]
) -> list[JobDocument | ApiError]:
    """``resolved`` with each job whose secrets do not pass (see the module docstring)
    replaced by its refusal, naming ``spec.roles[i].secrets[j]``."""
    return [(_refusal(session, d) or d) if isinstance(d, JobDocument) else d for d in resolved]


def _refusal(session: Session, document: JobDocument) -> ApiError | None:
    user = document.spec.user
    for i, role in enumerate(document.spec.roles):
        given: dict[str, str] = {}
        for j, use in enumerate(role.secrets):
            at = f"spec.roles[{i}].secrets[{j}]"
            row = stored.get(session, user, use.name)
            if row is None:
                return ApiError(
                    404,
                    f"user {user} has no secret {use.name!r}",
                    field=f"{at}.name",
                    fix=f"create it first: phalanx secret create {use.name} --from-literal KEY=VALUE",
                )
            if use.as_ != "env":
                continue
            if row.size > MAX_ENV_ENTRY:
                return ApiError(
                    422,
                    f"secret {use.name!r} holds {row.size} bytes, more than one environment "
                    f"variable may ({MAX_ENV_ENTRY})",
                    field=f"{at}.as",
                    fix="give it as files (as: files)",
                )
            for key in row.keys:
                why = _not_a_variable(key, role.env, given)
                if why is not None:
                    return ApiError(
                        422,
                        f"secret {use.name!r} gives key {key!r} as a variable, but {why}",
                        field=f"{at}.as",
                        fix="give it as files (as: files), or rename the key in the secret",
                    )
                given[key] = use.name
    return None


def _not_a_variable(key: str, env: dict[str, str], given: dict[str, str]) -> str | None:
    """Why ``key`` cannot be a task's variable, or None."""
    if not ENV_NAME.fullmatch(key):
        return "it is not a variable name"
    if key.startswith(_RESERVED):
        return "phalanx sets the variables named PHALANX_..."
    if key in env:
        return "the role's env sets it too"
    if key in given:
        return f"secret {given[key]!r} gives it too"
    return None
