"""What the API accepts besides documents. Write schemas: unknown fields are refused."""

from __future__ import annotations

from typing import Annotated, Final, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from phalanx.spec.common import Duration, Name, UserName, located
from phalanx.spec.limits import MAX_REPLICAS
from phalanx.spec.pipeline.templates import Value

#: The longest a token may be made to last (ten years); without an expiry it lasts until
#: it is revoked.
MAX_TOKEN_LIFETIME: Final = 3650 * 86400.0


class Body(BaseModel):
    """Base of every write schema."""

    model_config = ConfigDict(extra="forbid")


#: A Unix account name as useradd accepts it (POSIX portable characters, 32 at most).
AccountName = Annotated[str, Field(pattern=r"^[A-Za-z_][A-Za-z0-9._-]{0,31}$")]


class NewUser(Body):
    """``{name, role, account, default_queue}``: a user to create; the answer carries
    their first token.

    ``account`` maps the user to an existing Unix account on the server's host, which
    their tasks then run as; without it, a server that runs tasks per user allocates
    them a uid of their own. ``default_queue`` is where their jobs that name no queue go
    (an existing leaf queue they may submit to); without it, the queue named ``default``.
    """

    name: UserName
    role: Literal["admin", "user"] = "user"
    account: AccountName | None = None
    default_queue: Name | None = Field(
        None, description="where the user's jobs that name no queue go: an existing leaf queue"
    )


class UserUpdate(Body):
    """``{default_queue}``: what changes of a user; a field left out stays as it is.

    ``default_queue``: where the user's jobs that name no queue go from now on (an
    existing leaf queue they may submit to); ``null``: the queue named ``default`` again.
    Jobs already submitted stay in their queues.
    """

    default_queue: Name | None = Field(
        None,
        description="an existing leaf queue; null: none (jobs that name no queue go to "
        "the queue named default)",
    )


class ScaleRequest(Body):
    """``{replicas}``: the size a job's owner now asks of its elastic role."""

    replicas: int = Field(
        ge=1, le=MAX_REPLICAS, description="within the role's minReplicas..maxReplicas"
    )


class TokenRequest(Body):
    """``{label, expires}``: a new token for a user, valid for ``expires`` from now
    (omitted: until it is revoked)."""

    label: str = Field("", description="a note kept with the token (its first 63 characters)")
    expires: Duration | None = Field(
        None,
        description="how long the token stays valid: seconds, or 30d, 12h, 1h30m; "
        "at most 3650d; omitted: until revoked",
    )

    @field_validator("expires")
    @classmethod
    def _not_forever(cls, value: float | None) -> float | None:
        if value is not None and value > MAX_TOKEN_LIFETIME:
            raise located(
                f"{value:g} seconds is longer than a token may last",
                "give at most 3650d, or leave expires out for a token that lasts until revoked",
            )
        return value


class NewRun(Body):
    """``{params}``: a run of a pipeline to start."""

    params: dict[str, str | int | float | bool | list[str | int | float | bool]] = Field(
        default_factory=dict
    )
    """Values of the pipeline's params by name (text is read by the param's type, as
    ``-p name=value`` is); omitted ones take their defaults."""
    cache: Literal["use", "refresh", "off"] = Field(
        "use",
        description="the step cache: use (read and write entries), refresh (do not read, "
        "write anew), off (neither)",
    )

    def given(self) -> dict[str, Value]:
        """The params as ``phalanx.workflow.resolve`` takes them."""
        return {
            name: list(value) if isinstance(value, list) else value
            for name, value in self.params.items()
        }


class ResumeRun(Body):
    """``{from, params}``: a new run that reuses what an ended run did."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    from_step: str | None = Field(
        None,
        alias="from",
        max_length=253,
        description="rerun this step and every step downstream of it (omitted: rerun the "
        "steps that did not succeed and what depends on them)",
    )
    params: dict[str, str | int | float | bool | list[str | int | float | bool]] = Field(
        default_factory=dict
    )
    """Params that change (text read by the param's type); the others keep the old run's
    values. A step that reads a changed param runs again, and so does its downstream."""

    def given(self) -> dict[str, Value]:
        """The params as ``phalanx.workflow.resolve`` takes them."""
        return {
            name: list(value) if isinstance(value, list) else value
            for name, value in self.params.items()
        }


class WarmRequest(Body):
    """Warm a dataset: copy its current listing into the caches of ``nodes`` now (empty:
    every node), ahead of the jobs that read it."""

    nodes: list[str] = Field(default_factory=list, max_length=1024)
