"""The ``Secret`` document: keys a user's tasks (and the server's data movers) read.

As a Kubernetes Secret, its values are given as text (``stringData``) or as base64
(``data``, for bytes that are not text); a job's role names the secret to get every key
as an environment variable or as a file. The server seals the values at rest and never
shows them back: only the key names and the total size are ever read.

Guarantees of a validated ``SecretDocument``: it holds at least one key and at most
``MAX_SECRET_KEYS``; each key matches ``KEY_PATTERN`` (so it is a file name, never
``.`` or ``..``) and is given once, in ``stringData`` or in ``data``; every ``data``
value is base64; the values decode to at most ``MAX_SECRET_BYTES`` in all.

What is never shown: no error raised here, and no ``repr`` of the document, holds a
value. A refusal names the field (``spec.data.TOKEN``) and why, never what was there
(the model hides its input from pydantic's own messages too), so a mistyped secret
cannot reach a terminal, a log or an API answer.
"""

from __future__ import annotations

import base64
import binascii
import re
from typing import Annotated, Any, Final, Literal, Self

from pydantic import ConfigDict, Field, PlainValidator, model_validator

from phalanx.spec.common import API_VERSION, Metadata, SpecModel, UserName, located
from phalanx.spec.limits import size

#: What a key looks like: a file name and (letters, digits, '_') an environment name.
KEY_PATTERN: Final = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,252}")
#: Most bytes the values of one secret decode to, together (a Kubernetes Secret's limit).
MAX_SECRET_BYTES: Final = 2**20
#: Most keys one secret holds.
MAX_SECRET_KEYS: Final = 1_000

_KEY_RULE: Final = (
    "letters, digits, '_', '.' and '-', starting with a letter, digit or '_', "
    "at most 253 characters"
)


def _kind_of(value: Any) -> str:
    """What ``value`` is, by its type alone: never the value itself."""
    if value is None:
        return "nothing"
    if isinstance(value, bool):
        return "true or false"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, dict):
        return "a mapping"
    return f"a {type(value).__name__}"


def _mapping(value: Any, field: str) -> dict[str, Any]:
    """``value`` as a mapping of valid keys; a refusal that shows no value otherwise."""
    if not isinstance(value, dict):
        raise located(
            f"expected a mapping of KEY: value, got {_kind_of(value)}",
            f"write {field}: {{KEY: value}} (the value is not shown here)",
        )
    for key in value:
        if not isinstance(key, str):
            raise located(f"a key is {_kind_of(key)}, not text", "quote the key", at=("[key]",))
        if not KEY_PATTERN.fullmatch(key):
            raise located(f"{key[:60]!r} is not a valid key", f"use {_KEY_RULE}", at=(key,))
    return value


def _string_data(value: Any) -> dict[str, str]:
    """``stringData``: text values."""
    found = _mapping(value, "stringData")
    for key, text in found.items():
        if not isinstance(text, str):
            raise located(
                f"expected text, got {_kind_of(text)} (the value is not shown)",
                "quote the value; give bytes that are not text in data, as base64",
                at=(key,),
            )
    return found


def _data(value: Any) -> dict[str, str]:
    """``data``: base64 values."""
    found = _mapping(value, "data")
    for key, text in found.items():
        if not isinstance(text, str) or _decoded(text) is None:
            got = "is not base64" if isinstance(text, str) else f"is {_kind_of(text)}"
            raise located(
                f"the value {got} (it is not shown)",
                "give base64 of the bytes (base64 -w0 FILE), or the text itself in stringData",
                at=(key,),
            )
    return found


def _decoded(text: str) -> bytes | None:
    """The bytes of standard base64 ``text`` (padded, no spaces), or None."""
    try:
        return base64.b64decode(text.encode("ascii"), validate=True)
    except (binascii.Error, UnicodeEncodeError, ValueError):
        return None


#: Keys to text (``stringData``) and keys to base64 (``data``), checked without echoing.
StringData = Annotated[
    dict[str, str], PlainValidator(_string_data, json_schema_input_type=dict[str, str])
]
Base64Data = Annotated[dict[str, str], PlainValidator(_data, json_schema_input_type=dict[str, str])]


class SecretSpec(SpecModel):
    """``spec`` of a Secret: whose it is and its keys, as text or as base64."""

    model_config = ConfigDict(hide_input_in_errors=True)

    user: UserName = "default"
    """The user it belongs to (the API sets it to the caller; an admin may name another).
    Only that user's jobs can read it."""
    string_data: StringData = Field(default_factory=dict, repr=False)
    """Keys and their values as text (KEY: value), as in a Kubernetes Secret. A key is a
    file name and, to be given as an environment variable, a variable name."""
    data: Base64Data = Field(default_factory=dict, repr=False)
    """Keys and their values as base64, for bytes that are not text (KEY: base64). A key
    may be in stringData or in data, not in both; at least one key in all, at most 1 MiB
    of values."""

    @model_validator(mode="after")
    def _keys(self) -> Self:
        both = sorted(set(self.string_data) & set(self.data))
        if both:
            raise located(
                f"key {both[0]!r} is given in both stringData and data",
                "give each key once",
                at=("data", both[0]),
            )
        count = len(self.string_data) + len(self.data)
        if count == 0:
            raise located(
                "a secret holds at least one key",
                "add stringData: {KEY: value} (or data: {KEY: base64})",
                at=("stringData",),
            )
        if count > MAX_SECRET_KEYS:
            raise located(
                f"{count} keys is more than the limit of {MAX_SECRET_KEYS}",
                "split them into several secrets",
                at=("data" if self.data else "stringData",),
            )
        total = sum(len(value) for value in self.values().values())
        if total > MAX_SECRET_BYTES:
            raise located(
                f"the values come to {total} bytes, over the limit of {size(MAX_SECRET_BYTES)}",
                "keep large data out of secrets (store it where a job reads it; keep the "
                "key to it here)",
                at=(),
            )
        return self

    def values(self) -> dict[str, bytes]:
        """Every key's value as bytes (text as UTF-8), by key."""
        found = {key: text.encode() for key, text in self.string_data.items()}
        for key, text in self.data.items():
            found[key] = base64.b64decode(text, validate=True)
        return found


class SecretDocument(SpecModel):
    """``apiVersion: phalanx/v1, kind: Secret``."""

    model_config = ConfigDict(hide_input_in_errors=True)

    api_version: Literal["phalanx/v1"] = API_VERSION
    """Always phalanx/v1."""
    kind: Literal["Secret"] = "Secret"
    """Always Secret."""
    metadata: Metadata
    """The secret's name (unique among its user's secrets); a job's role names it."""
    spec: SecretSpec
    """Its owner and its keys."""

    @model_validator(mode="before")
    @classmethod
    def _spec_is_a_mapping(cls, data: Any) -> Any:
        """A spec that is not a mapping is refused by its type alone (pydantic would
        show what it holds)."""
        if isinstance(data, dict) and "spec" in data and not isinstance(data["spec"], dict):
            raise located(
                f"expected a mapping, got {_kind_of(data['spec'])} (it is not shown)",
                "write spec: {stringData: {KEY: value}}",
                at=("spec",),
            )
        return data

    def values(self) -> dict[str, bytes]:
        """Every key's value as bytes (``spec.stringData`` as UTF-8, ``spec.data``
        decoded), by key."""
        return self.spec.values()
