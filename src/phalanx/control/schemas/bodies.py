"""What the API accepts besides documents. Write schemas: unknown fields are refused."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict

from phalanx.spec.common import UserName


class Body(BaseModel):
    """Base of every write schema."""

    model_config = ConfigDict(extra="forbid")


class NewUser(Body):
    """``{name, role}``: a user to create; the answer carries their first token."""

    name: UserName
    role: Literal["admin", "user"] = "user"


class TokenRequest(Body):
    """``{label}``: a new token for a user."""

    label: str = ""
