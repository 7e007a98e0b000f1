"""Workloads from traces: one loader module per format, and ``load_workload`` to pick one.

``load_workload("FORMAT:PATH")`` reads a workload; FORMAT is one of ``FORMATS``:

- ``jsonl``: phalanx's own format (``phalanx.sim.traces.jsonl``); a bare path ending
  in ``.jsonl`` means the same;
- ``philly``, ``openb``, ``pollux``, ``tiresias``: the public traces (each module's
  docstring states what it assumes); an empty PATH reads the format's usual file
  under ``traces_dir`` (``DEFAULT_PATHS``);
- ``synthetic``: PATH is a YAML/JSON file of generator parameters, or empty for the
  defaults; ``seed`` seeds it;
- ``kueue``: Kueue's scheduler benchmark (PATH empty).

Guarantees: the result's jobs are sorted by (submit time, name) and were submitted
before ``until`` (when given); every problem with the spec or the file is a
``DocumentError`` naming what to fix.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Final

from phalanx.domain.errors import DocumentError
from phalanx.sim.traces.jsonl import load_jsonl, write_jsonl
from phalanx.sim.traces.kueue import kueue_workload
from phalanx.sim.traces.openb import load_openb
from phalanx.sim.traces.philly import load_philly
from phalanx.sim.traces.pollux import load_pollux
from phalanx.sim.traces.synthetic import SyntheticParams, load_params, synthetic_workload
from phalanx.sim.traces.tiresias import load_tiresias
from phalanx.sim.workload import Workload

__all__ = [
    "DEFAULT_PATHS",
    "FORMATS",
    "SyntheticParams",
    "kueue_workload",
    "load_jsonl",
    "load_openb",
    "load_philly",
    "load_pollux",
    "load_tiresias",
    "load_workload",
    "synthetic_workload",
    "write_jsonl",
]

#: The file each trace format reads when PATH is empty, relative to ``traces_dir``.
DEFAULT_PATHS: Final[Mapping[str, str]] = {
    "philly": "philly-jobs-pollux/philly.csv.gz",
    "openb": "alibaba-gpu-v2023-openb/csv/openb_pod_list_default.csv",
    "pollux": "philly-jobs-pollux/workloads/workload-6.csv",
    "tiresias": "tiresias-sample/60_job.csv",
}

_FILE_LOADERS: Final[Mapping[str, Callable[..., Workload]]] = {
    "jsonl": load_jsonl,
    "philly": load_philly,
    "openb": load_openb,
    "pollux": load_pollux,
    "tiresias": load_tiresias,
}

#: Every workload format ``load_workload`` accepts.
FORMATS: Final = (*_FILE_LOADERS, "synthetic", "kueue")


def load_workload(
    spec: str,
    *,
    traces_dir: Path | None = None,
    seed: int = 0,
    until: float | None = None,
    profiles_dir: Path | None = None,
) -> Workload:
    """The workload ``spec`` (``FORMAT:PATH`` or ``PATH.jsonl``) names.

    A relative PATH of a public trace format is resolved against ``traces_dir`` when
    given; other paths (``jsonl`` files, ``synthetic`` parameters) against the working
    directory. ``seed`` matters to ``synthetic`` only; ``profiles_dir`` (the application
    profiles, default beside the workload's folder) to ``pollux`` only: another format
    given one is refused.
    """
    fmt, _, text = spec.partition(":")
    if not text and fmt.endswith(".jsonl"):
        fmt, text = "jsonl", spec
    elif fmt not in FORMATS:
        raise DocumentError(
            f"unknown format {fmt[:40]!r} in {spec[:80]!r}",
            field="workload",
            fix=f"write FORMAT:PATH with FORMAT one of {', '.join(FORMATS)}, "
            "or a path ending in .jsonl",
        )
    text = text.strip()
    if profiles_dir is not None and fmt != "pollux":
        raise DocumentError(
            f"{fmt} workloads read no application profiles",
            field="profiles",
            fix="give --profiles with a pollux: workload only",
        )
    if fmt == "kueue":
        if text:
            raise DocumentError(
                f"kueue takes no path, got {spec[:80]!r}", field="workload", fix="write kueue:"
            )
        return kueue_workload(until=until)
    if fmt == "synthetic":
        params = load_params(Path(text).expanduser()) if text else SyntheticParams()
        return synthetic_workload(params, seed=seed, until=until)
    if not text:
        if fmt not in DEFAULT_PATHS:
            raise DocumentError(
                f"no path in {spec[:80]!r}", field="workload", fix=f"write {fmt}:PATH"
            )
        text = DEFAULT_PATHS[fmt]
    path = Path(text).expanduser()
    if fmt in DEFAULT_PATHS and traces_dir is not None and not path.is_absolute():
        path = traces_dir / path
    if fmt == "pollux":
        return load_pollux(path, until=until, profiles_dir=profiles_dir)
    return _FILE_LOADERS[fmt](path, until=until)
