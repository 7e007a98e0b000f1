"""Secrets sealed at rest: ``SecretBox`` encrypts a secret's values with the server's key.

The key is a Fernet key (AES-128-CBC with HMAC-SHA256, from ``cryptography``) in a file
of the data dir (``secrets.key``, mode 0600). Only the server reads it, so only the
server can open what it sealed; a copy of the database alone reveals key names and
sizes, never a value.

Guarantees:

- ``load_or_create`` never overwrites a key file: a missing one is written whole under a
  temporary name, then linked into place (two servers starting at once keep one key);
  an existing one is used only if it is a regular file of the server's user that group
  and others cannot read, holding a Fernet key. Otherwise ``InvalidInput`` names the
  file and the fix.
- ``open(seal(values)) == values`` under the same key; under another key (a data dir
  whose key was replaced or lost) ``open`` raises ``ContentError`` saying so.
- Neither the key nor a value is ever part of a message, a repr or a log line.
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import json
import os
import secrets
import stat
from collections.abc import Mapping
from pathlib import Path
from typing import Final

from cryptography.fernet import Fernet, InvalidToken

from phalanx.domain.errors import ContentError, InvalidInput

#: The key file's name in the data dir.
KEY_FILE: Final = "secrets.key"
#: Permission bits a key file may not have: any for its group or other users.
_LOOSE: Final = 0o077
#: The most a key file holds (a Fernet key is 44 characters and a newline).
_MAX_KEY_FILE: Final = 4096
#: The format of a sealed mapping, inside the encryption.
_FORMAT: Final = 1
_WRONG_KEY: Final = (
    "the secrets key in the data dir is not the one they were sealed with; fix: restore "
    f"the data dir's {KEY_FILE} from the backup taken with the database (a new key "
    "cannot open them), or delete the secrets and create them again"
)


class SecretBox:
    """Seals and opens mappings of key names to values with one Fernet key."""

    __slots__ = ("_fernet",)

    def __init__(self, key: bytes) -> None:
        """A box over ``key`` (a Fernet key: 32 bytes, URL-safe base64); ``ValueError``
        for anything else."""
        self._fernet = Fernet(key)

    def __repr__(self) -> str:
        return "SecretBox(<key hidden>)"

    @classmethod
    def load_or_create(cls, path: Path) -> SecretBox:
        """The box over the key in ``path``, made there (mode 0600) when absent; see the
        module docstring for what is refused."""
        try:
            try:
                return cls._load(path)
            except FileNotFoundError:
                _create(path)
            return cls._load(path)
        except OSError as error:
            raise InvalidInput(
                f"cannot be read or made: {error.strerror or error}",
                field=str(path),
                fix="check that the data dir exists and is the server user's to write",
            ) from None

    @classmethod
    def _load(cls, path: Path) -> SecretBox:
        """The box over the key in ``path``; ``FileNotFoundError`` when there is none."""
        info = path.lstat()
        if not stat.S_ISREG(info.st_mode):
            raise InvalidInput(
                "is not a regular file (a link, a directory ...)",
                field=str(path),
                fix=f"put the secrets key back there as a plain file, or move {path} away "
                "to have a new key made (secrets sealed with the old one are then lost)",
            )
        user = os.geteuid()
        if info.st_uid != user:
            raise InvalidInput(
                f"belongs to uid {info.st_uid}, not to the server's user (uid {user})",
                field=str(path),
                fix=f"chown {user} {path}",
            )
        mode = stat.S_IMODE(info.st_mode)
        if mode & _LOOSE:
            raise InvalidInput(
                f"has mode {mode:04o}: other users could read the secrets key",
                field=str(path),
                fix=f"chmod 600 {path}",
            )
        descriptor = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
        with os.fdopen(descriptor, "rb") as handle:
            data = handle.read(_MAX_KEY_FILE + 1)
        try:
            return cls(data.strip())
        except (ValueError, binascii.Error):
            raise InvalidInput(
                "does not hold a secrets key (a Fernet key: 44 characters of URL-safe base64)",
                field=str(path),
                fix=f"restore {path} from the backup taken with the database",
            ) from None

    def seal(self, values: Mapping[str, bytes]) -> bytes:
        """``values``, encrypted and authenticated under this box's key."""
        encoded = {key: base64.b64encode(value).decode("ascii") for key, value in values.items()}
        plain = json.dumps({"format": _FORMAT, "values": encoded}, sort_keys=True)
        return self._fernet.encrypt(plain.encode())

    def open(self, sealed: bytes) -> dict[str, bytes]:
        """The values ``seal`` sealed; ``ContentError`` when this key did not seal them."""
        try:
            plain = self._fernet.decrypt(sealed)
        except InvalidToken:
            raise ContentError(_WRONG_KEY) from None
        try:
            found = json.loads(plain)
            values = found["values"]
            return {
                str(key): base64.b64decode(value, validate=True) for key, value in values.items()
            }
        except (ValueError, KeyError, TypeError, AttributeError):
            # Authenticated under this key, yet not what seal writes: a bug, never shown.
            raise ContentError(
                "sealed secret values are not in the form this server writes; fix: create "
                "the secret again"
            ) from None


def _create(path: Path) -> None:
    """A new key at ``path`` (mode 0600), unless one appeared there meanwhile."""
    temporary = path.with_name(f".{path.name}.{secrets.token_hex(8)}")
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW
    descriptor = os.open(temporary, flags, 0o600)
    try:
        with os.fdopen(descriptor, "wb") as handle:
            handle.write(Fernet.generate_key() + b"\n")
            handle.flush()
            os.fsync(handle.fileno())
        with contextlib.suppress(FileExistsError):  # another start made one: keep that
            os.link(temporary, path, follow_symlinks=False)
    finally:
        temporary.unlink(missing_ok=True)
    _sync_directory(path.parent)


def _sync_directory(directory: Path) -> None:
    """The new name is on disk once this returns (where the platform allows it)."""
    try:
        descriptor = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        with contextlib.suppress(OSError):
            os.fsync(descriptor)
    finally:
        os.close(descriptor)
