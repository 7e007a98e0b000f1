"""What the API accepts besides documents. Write schemas: unknown fields are refused."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field

from phalanx.spec.common import UserName


class Body(BaseModel):
    """Base of every write schema."""

    model_config = ConfigDict(extra="forbid")


#: A Unix account name as useradd accepts it (POSIX portable characters, 32 at most).
AccountName = Annotated[str, Field(pattern=r"^[A-Za-z_][A-Za-z0-9._-]{0,31}$")]


class NewUser(Body):
    """``{name, role, account}``: a user to create; the answer carries their first token.

    ``account`` maps the user to an existing Unix account on the server's host, which
    their tasks then run as; without it, a server that runs tasks per user allocates
    them a uid of their own.
    """

    name: UserName
    role: Literal["admin", "user"] = "user"
    account: AccountName | None = None


class TokenRequest(Body):
    """``{label}``: a new token for a user."""

    label: str = ""
