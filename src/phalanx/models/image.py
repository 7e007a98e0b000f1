"""A model version as a container image, as KubeDL bakes one: ``FROM scratch`` with the
version's files under ``/model``, tagged ``localhost/NAME:vN``.

Guarantees: the files built in are the store's, each verified against its digest
(``ModelStore.materialize``) in a scratch directory of the server's, which is removed
afterwards whatever happens; the build runs no container (``COPY`` only), pulls nothing
(``scratch`` is no image) and is bounded in time; a failure is ``ImageBuildFailed`` with the runtime's words.
"""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Final, Protocol

from phalanx.domain.errors import ContentError
from phalanx.models.store import ModelStore

#: Where the files are in the image.
MODEL_DIR: Final = "/model"
#: The longest a build may take.
BUILD_TIMEOUT: Final = 1800.0
_RECIPE: Final = f"FROM scratch\nCOPY model {MODEL_DIR}\n"


class Builder(Protocol):
    """A container runtime's client (``executors.containers.runtime.ContainerRuntime``)."""

    @property
    def kind(self) -> str: ...

    @property
    def client(self) -> str: ...

    @property
    def environ(self) -> Mapping[str, str]: ...


class ImageBuildFailed(ContentError):
    """A model version's image that could not be built, and why."""


def image_tag(name: str, version: int) -> str:
    """The tag of version ``version`` of model ``name``: ``localhost/NAME:vN``."""
    return f"localhost/{name}:v{version}"


def build_image(
    store: ModelStore, digest: str, tag: str, runtime: Builder, *, scratch: Path
) -> None:
    """Build version ``digest``'s image as ``tag`` with ``runtime``, in a new directory
    under ``scratch`` (the server's own)."""
    scratch.mkdir(mode=0o700, parents=True, exist_ok=True)
    context = Path(tempfile.mkdtemp(prefix="model-image-", dir=scratch))
    try:
        store.materialize(digest, context / "model")
        (context / "Containerfile").write_text(_RECIPE)
        argv = [runtime.client, "build", "-q", "-t", tag]
        argv += ["-f", str(context / "Containerfile"), str(context)]
        try:
            built = subprocess.run(
                argv,
                env=dict(runtime.environ),
                capture_output=True,
                text=True,
                timeout=BUILD_TIMEOUT,
                check=False,
                stdin=subprocess.DEVNULL,
            )
        except (OSError, subprocess.SubprocessError) as error:
            raise ImageBuildFailed(f"{runtime.kind} build did not run: {error}") from None
        if built.returncode != 0:
            said = built.stderr.strip().splitlines()[-1:] or ["no message"]
            raise ImageBuildFailed(f"{runtime.kind} build failed: {said[0][:500]}")
    finally:
        _remove(context)


def _remove(directory: Path) -> None:
    """Remove ``directory``, whose materialized files and folders are read-only."""
    for path in [directory, *directory.rglob("*")]:
        if path.is_dir() and not path.is_symlink():
            path.chmod(0o700)
    shutil.rmtree(directory, ignore_errors=True)
