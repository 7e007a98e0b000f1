"""Where the client finds its server and token.

Guarantees: an explicit argument wins over the environment (``PHALANX_SERVER``,
``PHALANX_TOKEN``), which wins over the config file (``$PHALANX_CONFIG``, else
``$XDG_CONFIG_HOME/phalanx/config.yaml``, else ``~/.config/phalanx/config.yaml``), which
wins over the default server ``http://127.0.0.1:8080`` (no token). A config file that
cannot be used raises ``ClientError`` naming the file, the field and the fix; a missing
default config file is simply not used.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

import yaml

from phalanx.client._errors import ClientError

DEFAULT_SERVER: Final = "http://127.0.0.1:8080"
SERVER_ENV: Final = "PHALANX_SERVER"
TOKEN_ENV: Final = "PHALANX_TOKEN"
CONFIG_ENV: Final = "PHALANX_CONFIG"
_KEYS: Final = ("server", "token")


@dataclass(frozen=True, slots=True, kw_only=True)
class Endpoint:
    """A server URL (no trailing slash) and the token to send it, if any."""

    server: str
    token: str | None
    server_from: str  # where the URL came from, for error messages


def config_path(environ: Mapping[str, str] | None = None) -> Path:
    """The config file the client reads (it may not exist)."""
    env = os.environ if environ is None else environ
    explicit = env.get(CONFIG_ENV)
    if explicit:
        return Path(explicit).expanduser()
    base = env.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base) / "phalanx" / "config.yaml"


def resolve_endpoint(
    server: str | None = None,
    token: str | None = None,
    *,
    environ: Mapping[str, str] | None = None,
) -> Endpoint:
    """The endpoint from arguments, then the environment, then the config file."""
    env = os.environ if environ is None else environ
    found_server, server_from = _first((server, "--server"), (env.get(SERVER_ENV), SERVER_ENV))
    found_token, _ = _first((token, "--token"), (env.get(TOKEN_ENV), TOKEN_ENV))
    if found_server is None or found_token is None:
        path = config_path(env)
        stored = read_config(path, required=bool(env.get(CONFIG_ENV)))
        if found_server is None and stored.get("server"):
            found_server, server_from = stored["server"], str(path)
        if found_token is None and stored.get("token"):
            found_token = stored["token"]
    if found_server is None:
        found_server, server_from = DEFAULT_SERVER, "the default"
    return Endpoint(
        server=found_server.strip().rstrip("/"),
        token=found_token.strip() if found_token else None,
        server_from=server_from,
    )


def read_config(path: Path, *, required: bool = False) -> dict[str, str]:
    """``server`` and ``token`` from the YAML file at ``path`` ({} when it does not exist,
    unless ``required``)."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        if not required:
            return {}
        raise ClientError(
            f"config file {path} does not exist",
            field=CONFIG_ENV,
            fix=f"create it with 'server:' and 'token:' keys, or unset {CONFIG_ENV}",
        ) from None
    except (OSError, UnicodeDecodeError) as error:
        raise ClientError(
            f"cannot read config file {path}: {error}",
            field=CONFIG_ENV,
            fix="check the file's permissions and that it is UTF-8 text",
        ) from None
    return _parse_config(text, path)


def _parse_config(text: str, path: Path) -> dict[str, str]:
    try:
        raw: Any = yaml.safe_load(text)
    except yaml.YAMLError as error:
        mark = getattr(error, "problem_mark", None)
        where = f", line {mark.line + 1}" if mark is not None else ""
        raise ClientError(
            f"config file {path}{where}: not valid YAML",
            fix="write it as lines of 'key: value' (server: http://HOST:PORT, token: phx_...)",
        ) from None
    if raw is None:
        return {}
    if not isinstance(raw, dict):
        raise ClientError(
            f"config file {path} holds a {type(raw).__name__}, not a mapping",
            fix="write it as lines of 'key: value' (server: ..., token: ...)",
        )
    config: dict[str, str] = {}
    for key, value in raw.items():
        if key not in _KEYS:
            raise ClientError(
                f"config file {path}: unknown key {str(key)[:40]!r}",
                field=str(key)[:40],
                fix=f"use only: {', '.join(_KEYS)}",
            )
        if value is None:
            continue
        if not isinstance(value, str):
            raise ClientError(
                f"config file {path}: {key} must be text, got {type(value).__name__}",
                field=key,
                fix=f"quote the value of {key}",
            )
        config[key] = value
    return config


def _first(*candidates: tuple[str | None, str]) -> tuple[str | None, str]:
    for value, origin in candidates:
        if value is not None and value.strip():
            return value, origin
    return None, ""
