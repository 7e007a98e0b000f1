"""The public traces folder of ``sim`` and ``bench``: found, or one clear error line.

Relative paths (the default ``../shared/traces`` above all) are relative to the working
directory, so a command run from elsewhere misses them; the error then names the option,
the path tried (resolved) and the fix, instead of a traceback from deep in a loader.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from phalanx.domain.errors import DocumentError

DEFAULT: Final = Path("../shared/traces")
ENV: Final = "PHALANX_TRACES"


@dataclass(frozen=True, slots=True)
class TracesDir:
    """Where the traces are looked for, and who said so (for the error)."""

    path: Path
    given_by: str  # "--traces-dir", "PHALANX_TRACES" or "the default --traces-dir"

    def exists(self) -> bool:
        return self.path.is_dir()

    def missing(self, wanted: str = "") -> DocumentError:
        """The error for a folder that is not there (``wanted``: what the run reads in it)."""
        resolved = self.path.expanduser().resolve()
        reads = f": no such folder, where the run reads {wanted}" if wanted else ": no such folder"
        if self.exists():
            reads, resolved = f" has no {wanted}", resolved / wanted
        beside = _beside_checkout()
        example = f"--traces-dir {beside}" if beside else "--traces-dir /path/to/shared/traces"
        fix = (
            "pass --traces-dir with the folder holding the public traces, as an absolute "
            f"path (e.g. {example}), or set {ENV}"
        )
        error = DocumentError(
            f"{self.given_by} {os.fspath(self.path)}{reads} (from {Path.cwd()} that is {resolved})",
            fix=fix,
        )
        error.field = "traces-dir"
        return error

    def require(self, wanted: str = "", *, holding: bool = False) -> Path:
        """The folder, or the error naming the option (``wanted``: what is read in it;
        ``holding``: it must be there too)."""
        if not self.exists() or (holding and not (self.path / wanted).exists()):
            raise self.missing(wanted)
        return self.path


def resolve(value: Path | None) -> TracesDir:
    """``--traces-dir`` when given, else ``$PHALANX_TRACES``, else ``../shared/traces``."""
    if value is not None:
        return TracesDir(value, "--traces-dir")
    env = os.environ.get(ENV)
    if env:
        return TracesDir(Path(env), ENV)
    return TracesDir(DEFAULT, "the default --traces-dir")


def _beside_checkout() -> Path | None:
    """``shared/traces`` beside the checkout phalanx runs from (an editable install), if any."""
    here = Path(__file__).resolve()
    if len(here.parents) < 5:
        return None
    candidate = here.parents[4] / "shared" / "traces"  # src/phalanx/cli/traces.py
    return candidate if candidate.is_dir() else None
