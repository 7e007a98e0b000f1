"""What a job role or pipeline step declares of models: the one it trains
(``ModelOutput``) and the version it reads (``ModelReference``).

A validated ``ModelOutput`` names a DNS-1123 label and a directory strictly inside the
task's working directory (relative, no ``..``, no empty or ``.`` component), so the
server can read it from a trusted base without ever leaving it. A validated
``ModelReference`` parses (``model_reference``) into a ``ModelRef``: a name, and
optionally a version number and the version's content digest.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import PurePosixPath
from typing import Annotated, Final

from pydantic import AfterValidator, Field

from phalanx.spec.common import DnsLabel, SpecModel, located

#: The longest model directory path a role may name.
MAX_MODEL_PATH: Final = 1024


def _inside(path: str) -> str:
    parts = PurePosixPath(path).parts
    if not parts or path.startswith("/"):
        raise located(
            f"{path!r} is not a relative path",
            "name the directory relative to the task's working directory, e.g. model",
        )
    if any(part in ("..", ".") for part in path.split("/")) or "\0" in path:
        raise located(
            f"{path!r} leaves or repeats its directory ('.' or '..')",
            "name the directory below the task's working directory, without '.' or '..'",
        )
    return "/".join(parts)


ModelPath = Annotated[str, Field(min_length=1, max_length=MAX_MODEL_PATH), AfterValidator(_inside)]


class ModelOutput(SpecModel):
    """A model the task writes: when the job succeeds, the directory becomes the next
    version of the model, NAME:vN, copied into the model store."""

    name: DnsLabel
    """The model's name; each registration adds a version (mnist:v1, mnist:v2 ...). A model
    belongs to the user who registered it first."""
    path: ModelPath
    """The directory the role's first task (index 0) writes, relative to its working
    directory (e.g. model); plain files and directories only."""
    image: bool = False
    """Also build each version into a container image on the server's host, as KubeDL
    does: localhost/NAME:vN, FROM scratch with the files under /model."""


#: ``NAME``, ``NAME:vN`` or ``NAME:vN@sha256:HEX``.
_REFERENCE: Final = re.compile(
    r"(?P<name>[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?)"
    r"(:v(?P<version>[1-9][0-9]{0,8}))?"
    r"(@(?P<digest>sha256:[0-9a-f]{64}))?"
)


@dataclass(frozen=True, slots=True)
class ModelRef:
    """A model version named by a role: ``name``, its ``version`` (None: the newest, which
    the server pins at submit) and its content ``digest`` (None: not given)."""

    name: str
    version: int | None = None
    digest: str | None = None

    def __str__(self) -> str:
        text = self.name if self.version is None else f"{self.name}:v{self.version}"
        return text if self.digest is None else f"{text}@{self.digest}"


def model_reference(text: str) -> ModelRef:
    """``text`` as a ``ModelRef``; ``ValueError`` naming the forms when it is none."""
    match = _REFERENCE.fullmatch(text)
    if match is None or (match["digest"] and not match["version"]):
        raise located(
            f"{text!r} is not a model version",
            "name it NAME (its newest version), NAME:vN, or NAME:vN@sha256:<digest>",
        )
    version = match["version"]
    return ModelRef(match["name"], int(version) if version else None, match["digest"])


def _canonical(text: str) -> str:
    return str(model_reference(text))


ModelReference = Annotated[str, Field(max_length=160), AfterValidator(_canonical)]
"""``NAME``, ``NAME:vN`` or ``NAME:vN@sha256:<digest>`` (``model_reference`` parses it)."""
