"""Building blocks shared by every document: the strict base model, names, durations.

Guarantees:

- A ``SpecModel`` accepts only its documented camelCase fields; an unknown field is
  rejected with the list of allowed ones and the closest match.
- Scalars are strict: ``"3"`` is not an integer, ``yes`` is not a count, ``3.0`` is
  not a replica number.
- Every validation failure raised here is a ``phalanx`` error whose message carries
  the fix; ``phalanx.spec.diagnostics`` turns it into a ``DocumentError``.
"""

from __future__ import annotations

import difflib
import math
import re
from collections.abc import Callable
from typing import Annotated, Any, Final, TypeAlias

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, PlainValidator, model_validator
from pydantic.alias_generators import to_camel
from pydantic_core import PydanticCustomError

from phalanx.domain.errors import DocumentError, InvalidInput
from phalanx.spec.limits import (
    MAX_ANNOTATIONS_BYTES,
    MAX_DURATION,
    MAX_LABEL,
    MAX_NAME,
    MAX_PRIORITY,
    MIN_PRIORITY,
    size,
)

#: The apiVersion of phalanx's own documents.
API_VERSION: Final = "phalanx/v1"

#: Error type of every failure raised by phalanx validators (see ``located``).
ERROR_TYPE: Final = "phalanx"

#: Prefix of the tags of tagged unions; error paths leave such tags out.
UNION_TAG: Final = "union:"

Loc: TypeAlias = tuple[str | int, ...]


def located(reason: str, fix: str, *, at: Loc = ()) -> PydanticCustomError:
    """A validation error with its fix; ``at`` extends the location of the validated value."""
    return PydanticCustomError(
        ERROR_TYPE, "{detail}", {"detail": f"{reason}; fix: {fix}", "fix": fix, "at": at}
    )


def from_invalid(error: InvalidInput, *, at: Loc = ()) -> PydanticCustomError:
    """The pydantic form of a domain ``InvalidInput``; the location replaces its ``field``."""
    detail = str(error).removeprefix(f"{error.field}: ") if error.field else str(error)
    return PydanticCustomError(
        ERROR_TYPE, "{detail}", {"detail": detail, "fix": error.fix, "at": at}
    )


class SpecModel(BaseModel):
    """A write schema: strict, frozen, camelCase in documents, snake_case in Python."""

    model_config = ConfigDict(
        extra="forbid",
        strict=True,
        frozen=True,
        alias_generator=to_camel,
        use_attribute_docstrings=True,  # each field's docstring is its description
    )

    @model_validator(mode="before")
    @classmethod
    def _known_fields_only(cls, data: Any) -> Any:
        """Reject an unknown field, naming the allowed ones and the closest match."""
        if not isinstance(data, dict):
            return data
        allowed = [info.alias or name for name, info in cls.model_fields.items()]
        for key in data:
            if key not in allowed:
                raise located("unknown field", suggest(str(key), allowed), at=(str(key),))
        return data


def suggest(word: str, allowed: list[str]) -> str:
    """A fix for a misspelt name: the closest allowed one, then every allowed one."""
    close = difflib.get_close_matches(word, allowed, n=1, cutoff=0.6)
    hint = f"did you mean {close[0]!r}? " if close else ""
    return f"{hint}allowed: {', '.join(allowed)}"


def _pattern(regex: str, max_length: int, what: str, rule: str) -> Callable[[str], str]:
    compiled = re.compile(regex)

    def check(value: str) -> str:
        if len(value) > max_length or not compiled.fullmatch(value):
            raise located(
                f"{value[:60]!r} is not a valid {what}",
                f"use {rule}, at most {max_length} characters",
            )
        return value

    return check


_DNS_LABEL: Final = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?"
_LABEL_VALUE: Final = r"([A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?)?"
_LABEL_NAME_RULE: Final = "letters, digits, '-', '_' and '.', starting and ending alphanumeric"

#: A DNS-1123 subdomain: job, queue and cluster names.
Name = Annotated[
    str,
    AfterValidator(
        _pattern(
            rf"{_DNS_LABEL}(\.{_DNS_LABEL})*",
            MAX_NAME,
            "name (DNS-1123)",
            "lowercase letters, digits, '-' and '.', starting and ending with a letter or digit",
        )
    ),
]

#: A DNS-1123 label: role, node group and network tier names.
DnsLabel = Annotated[
    str,
    AfterValidator(
        _pattern(
            _DNS_LABEL,
            MAX_LABEL,
            "name (DNS-1123 label)",
            "lowercase letters, digits and '-', starting and ending with a letter or digit",
        )
    ),
]

#: A user name: a DNS-like name that may also hold '_', '@', '+' and capitals.
UserName = Annotated[
    str,
    AfterValidator(
        _pattern(
            r"[A-Za-z0-9]([-A-Za-z0-9_.@+]*[A-Za-z0-9])?",
            MAX_NAME,
            "user name",
            "letters, digits, '-', '_', '.', '@' and '+', starting and ending alphanumeric",
        )
    ),
]

#: An environment variable's name, as POSIX shells accept it (``ENV_NAME`` matches one).
ENV_NAME_PATTERN: Final = r"[A-Za-z_][A-Za-z0-9_]*"
ENV_NAME: Final = re.compile(ENV_NAME_PATTERN)
EnvName = Annotated[
    str,
    AfterValidator(
        _pattern(
            ENV_NAME_PATTERN,
            255,
            "environment variable name",
            "letters, digits and '_', not starting with a digit",
        )
    ),
]

#: An OCI image reference as podman and docker take it: ``[registry[:port]/]path[:tag][@digest]``.
ImageRef = Annotated[
    str,
    AfterValidator(
        _pattern(
            r"[a-z0-9]+([._-][a-z0-9]+)*(:[0-9]+)?(/[a-z0-9]+([._-]+[a-z0-9]+)*)*"
            r"(:[A-Za-z0-9_][A-Za-z0-9_.-]{0,127})?(@[a-z0-9]+([+._-][a-z0-9]+)*:[a-f0-9]{32,})?",
            255,
            "image reference",
            "lowercase path parts separated by '/', an optional :tag and @sha256:digest "
            "(for example localhost/train:1.0)",
        )
    ),
]

check_label_key = _pattern(
    rf"({_DNS_LABEL}(\.{_DNS_LABEL})*/)?[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?",
    253,
    "label key",
    f"an optional DNS prefix and '/', then {_LABEL_NAME_RULE}",
)

#: A Kubernetes label key: an optional DNS subdomain prefix and '/', then a name.
LabelKey = Annotated[str, AfterValidator(check_label_key)]

#: A Kubernetes label value (may be empty).
LabelValue = Annotated[
    str, AfterValidator(_pattern(_LABEL_VALUE, 63, "label value", _LABEL_NAME_RULE))
]

#: A plugin, action or extension point name.
PluginName = Annotated[
    str,
    AfterValidator(
        _pattern(
            r"[A-Za-z][A-Za-z0-9_.-]*",
            63,
            "plugin name",
            "letters, digits, '_', '.' and '-', starting with a letter",
        )
    ),
]


def _annotations_size(annotations: dict[str, str]) -> dict[str, str]:
    total = sum(len(k.encode()) + len(v.encode()) for k, v in annotations.items())
    if total > MAX_ANNOTATIONS_BYTES:
        raise located(
            f"{total} bytes of annotations is more than the limit of {size(MAX_ANNOTATIONS_BYTES)}",
            "keep large data out of annotations (store it in a file the job reads)",
        )
    return annotations


#: A job's or queue's priority: a 32-bit signed integer, as a Kubernetes PriorityClass value.
Priority = Annotated[int, Field(ge=MIN_PRIORITY, le=MAX_PRIORITY)]


class Metadata(SpecModel):
    """``metadata``: the document's name, labels and annotations (at most
    ``MAX_ANNOTATIONS_BYTES`` of annotation keys and values)."""

    name: Name
    """The document's name (DNS-1123: lowercase letters, digits, '-' and '.'); unique per
    kind."""
    labels: dict[LabelKey, LabelValue] = Field(default_factory=dict)
    """Key/value labels, as Kubernetes writes them; phalanx keeps them with the document."""
    annotations: Annotated[dict[LabelKey, str], AfterValidator(_annotations_size)] = Field(
        default_factory=dict
    )
    """Free-form key/value notes (at most 256 KiB in all); importers record what they mapped
    here."""


_DURATION: Final = re.compile(
    r"(?:(?P<d>[0-9]+(?:\.[0-9]+)?)d)?(?:(?P<h>[0-9]+(?:\.[0-9]+)?)h)?"
    r"(?:(?P<m>[0-9]+(?:\.[0-9]+)?)m)?(?:(?P<s>[0-9]+(?:\.[0-9]+)?)s)?"
    r"(?:(?P<ms>[0-9]+(?:\.[0-9]+)?)ms)?"
)
_UNIT_SECONDS: Final = {"d": 86400.0, "h": 3600.0, "m": 60.0, "s": 1.0, "ms": 0.001}
_DURATION_FIX: Final = (
    "write seconds (90) or units in d, h, m, s, ms order, e.g. 8h, 30m, 1h30m, 2d, 250ms"
)


def parse_duration(value: object) -> float:
    """Seconds in ``value``: a number of seconds, or ``"2d"``, ``"8h"``, ``"1h30m"``, ``"45s"``,
    ``"250ms"``.

    The result is finite and > 0. Raises ``DocumentError`` (without a field; the
    caller knows where the value came from).
    """
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        raise DocumentError(f"expected a duration, got {type(value).__name__}", fix=_DURATION_FIX)
    if isinstance(value, str):
        text = value.strip()
        match = _DURATION.fullmatch(text)
        if re.fullmatch(r"[0-9]+(\.[0-9]+)?", text):
            seconds = float(text)
        elif text and match:
            seconds = sum(float(match[u] or 0) * _UNIT_SECONDS[u] for u in _UNIT_SECONDS)
        else:
            raise DocumentError(f"{value!r:.40} is not a duration", fix=_DURATION_FIX)
    else:
        seconds = float(value)
    if not math.isfinite(seconds) or seconds <= 0:
        raise DocumentError(f"{value!r:.40} is not a positive duration", fix=_DURATION_FIX)
    return seconds


def _duration(value: object) -> float:
    try:
        return parse_duration(value)
    except InvalidInput as error:
        raise from_invalid(error) from None


#: A duration field: validated and stored as seconds.
Duration = Annotated[float, PlainValidator(_duration, json_schema_input_type=str | float)]


def _within_max_duration(seconds: float) -> float:
    if seconds > MAX_DURATION:
        limit = f"{MAX_DURATION / 86400:g}d"
        raise located(
            f"{seconds:.4g} seconds is more than the limit of {limit} ({MAX_DURATION:.0f} s)",
            f"give at most {limit}",
        )
    return seconds


#: A duration a job or queue asks for (walltime, estimates, thresholds): at most
#: ``MAX_DURATION``.
JobDuration = Annotated[Duration, AfterValidator(_within_max_duration)]


def _duration_or_zero(value: object) -> float:
    if not isinstance(value, bool) and value in (0, "0", "0s"):
        return 0.0
    return _duration(value)


#: A job's duration that may also be none at all (``0``: a rescale that costs nothing).
JobDurationOrZero = Annotated[
    float,
    PlainValidator(_duration_or_zero, json_schema_input_type=str | float),
    AfterValidator(_within_max_duration),
]
