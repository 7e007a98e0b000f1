"""What a job role or pipeline step declares of the model it trains: ``ModelOutput``.

A validated ``ModelOutput`` names a DNS-1123 label and a directory strictly inside the
task's working directory (relative, no ``..``, no empty or ``.`` component), so the
server can read it from a trusted base without ever leaving it.
"""

from __future__ import annotations

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
