"""OpenPAI command lines: ``<% $parameters.x %>`` references resolved, lines joined.

Guarantees: ``render`` returns the line with every ``<% ... %>`` reference replaced
by its value, or raises a phalanx validation error (see ``phalanx.spec.common.located``)
located at ``at`` that says which reference failed and how to fix it. A reference is
never executed: only ``$scope`` followed by ``.key`` and ``[index]`` steps is read.

Differences from OpenPAI's renderer, each a refusal where OpenPAI would silently
render an empty string or leak a secret:

- a reference to something not defined (an unknown parameter, a prerequisite field
  that is not there, ``$script`` in a task role without ``script``) is refused;
- a reference to a mapping or a list (rather than to one of its values) is refused;
- ``$secrets`` is refused: phalanx stores commands in plain text;
- mustache sections, comments and partials (``<%# %>``, ``<%! %>`` ...) are refused.

Values render as OpenPAI's JavaScript renderer writes them: ``null`` as nothing,
booleans as ``true``/``false``, a whole float without ``.0``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, Final

from phalanx.spec.common import Loc, located

#: What OpenPAI puts between each command line of a task role (its rest-server does the same).
SEPARATOR: Final = " && "

#: The scopes a reference may name; ``secrets`` is known only to be refused.
SCOPES: Final = ("parameters", "script", "data", "output", "secrets")

_TOKEN: Final = re.compile(r"<%(.*?)%>", re.DOTALL)
_REFERENCE: Final = re.compile(r"\$([a-z]+)((?:\.[A-Za-z0-9_-]+|\[[0-9]+\])*)")
_STEP: Final = re.compile(r"\.([A-Za-z0-9_-]+)|\[([0-9]+)\]")
_FORM: Final = "write <% $parameters.name %>, or $script, $data or $output followed by a field"


def render(line: str, scopes: Mapping[str, Any], *, at: Loc, role: str) -> str:
    """``line`` with its references replaced from ``scopes`` (scope name -> value, or
    ``None`` when task role ``role`` does not select that prerequisite)."""
    parts: list[str] = []
    end = 0
    for token in _TOKEN.finditer(line):
        parts.append(_text(line[end : token.start()], at))
        parts.append(_value(token[1].strip(), scopes, at, role))
        end = token.end()
    parts.append(_text(line[end:], at))
    return "".join(parts)


def join(lines: list[str]) -> str:
    """One shell string: the lines, trimmed, joined with ``SEPARATOR`` as OpenPAI does."""
    return SEPARATOR.join(line.strip() for line in lines)


def _text(text: str, at: Loc) -> str:
    if "<%" in text:
        raise located("'<%' is not closed by '%>'", "close the reference with %>", at=at)
    return text


def _value(expression: str, scopes: Mapping[str, Any], at: Loc, role: str) -> str:
    shown = f"<% {expression[:60]} %>"
    match = _REFERENCE.fullmatch(expression)
    if match is None or match[1] not in SCOPES:
        raise located(f"{shown} is not a reference phalanx can resolve", _FORM, at=at)
    scope, path = match[1], match[2]
    if scope == "secrets":
        raise located(
            f"{shown} refers to a secret, and phalanx stores commands in plain text",
            "pass the secret to the task through its environment or a file, "
            "and remove this reference",
            at=at,
        )
    value = scopes.get(scope)
    if value is None:
        raise located(
            f"{shown}: task role {role!r} selects no {scope} prerequisite",
            f"set taskRoles.{role}.{scope} to the name of a {scope} prerequisite, "
            "or remove the reference",
            at=at,
        )
    walked = f"${scope}"
    for step in _STEP.finditer(path):
        value = _step(value, step[1], step[2], walked, shown, at)
        walked += step[0]
    return _scalar(value, shown, at)


def _step(value: Any, key: str | None, index: str | None, walked: str, shown: str, at: Loc) -> Any:
    if key is not None and isinstance(value, Mapping):
        if key in value:
            return value[key]
        fix = (
            f"add {key} under parameters"
            if walked == "$parameters"
            else f"use one of: {', '.join(map(str, value)) or 'nothing is defined there'}"
        )
        raise located(f"{shown}: {walked} has no {key!r}", fix, at=at)
    if index is not None and isinstance(value, list):
        if int(index) < len(value):
            return value[int(index)]
        raise located(
            f"{shown}: {walked} has {len(value)} item(s), so no [{index}]",
            f"use an index below {len(value)}",
            at=at,
        )
    kind = "a list" if isinstance(value, list) else "a single value"
    wanted = f".{key}" if key is not None else f"[{index}]"
    raise located(f"{shown}: {walked} is {kind}, so it has no {wanted}", "remove that step", at=at)


def _scalar(value: Any, shown: str, at: Loc) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    if isinstance(value, Mapping | list):
        kind = "a mapping" if isinstance(value, Mapping) else "a list"
        raise located(
            f"{shown} is {kind}, not a single value", "refer to one of its entries", at=at
        )
    return str(value)
