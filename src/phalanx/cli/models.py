"""Model versions for people: ``NAME[:vN]`` references and the tables of ``get models``
and ``describe model``."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Final

from rich.table import Table

from phalanx.cli.render import age
from phalanx.client import ModelVersionView, ModelView
from phalanx.domain.errors import InvalidInput

_REFERENCE: Final = re.compile(r"(?P<name>[^:]+)(:v(?P<version>[0-9]{1,9}))?")
#: Files ``describe model`` lists before it says how many more there are.
FILES_SHOWN: Final = 20


def reference(text: str) -> tuple[str, int | None]:
    """``NAME`` or ``NAME:vN`` as (name, N or None); ``InvalidInput`` otherwise."""
    found = _REFERENCE.fullmatch(text)
    if found is None:
        raise InvalidInput(
            f"{text!r} is not a model reference",
            field="model",
            fix="name a model (mnist) or one of its versions (mnist:v3)",
        )
    version = found.group("version")
    return found.group("name"), None if version is None else int(version)


def size(count: int) -> str:
    """``count`` bytes for people: ``512 B``, ``3.4 MiB``."""
    value, unit = float(count), "B"
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if value < 1024 or unit == "TiB":
            break
        value /= 1024
    return f"{count} B" if unit == "B" else f"{value:.1f} {unit}"


def short(digest: str) -> str:
    """A digest as people compare them: the algorithm and 12 hex digits."""
    algorithm, _, hexdigits = digest.partition(":")
    return f"{algorithm}:{hexdigits[:12]}"


def models_table(models: Sequence[ModelView], now: float) -> Table:
    """One row per model: name, newest version, how many, its size, owner and age."""
    table = Table(box=None, pad_edge=False)
    for title in ("MODEL", "LATEST", "VERSIONS", "SIZE", "USER", "AGE"):
        table.add_column(title, overflow="fold")
    for model in models:
        latest = model.latest
        table.add_row(
            model.name,
            f"v{latest.version}",
            str(model.versions),
            size(latest.size),
            model.user,
            age(latest.created_at, now),
        )
    return table


def versions_table(versions: Sequence[ModelVersionView], now: float) -> Table:
    """One row per version: reference, digest, size, files, the job that made it, age."""
    table = Table(box=None, pad_edge=False)
    for title in ("VERSION", "DIGEST", "SIZE", "FILES", "FROM", "AGE"):
        table.add_column(title, overflow="fold")
    for each in versions:
        table.add_row(
            f"{each.name}:v{each.version}",
            short(each.digest),
            size(each.size),
            str(each.files),
            origin(each),
            age(each.created_at, now),
        )
    return table


def origin(version: ModelVersionView) -> str:
    """What made ``version``: ``run RUN step STEP`` or ``job JOB``."""
    if version.run_id is not None:
        return f"run {version.run_id} step {version.step}"
    return f"job {version.job}"


def files_table(version: ModelVersionView) -> Table:
    """The first ``FILES_SHOWN`` files of ``version``: path, size and digest."""
    table = Table(box=None, pad_edge=False)
    for title in ("PATH", "SIZE", "DIGEST"):
        table.add_column(title, overflow="fold")
    for entry in version.contents[:FILES_SHOWN]:
        table.add_row(entry.path, size(entry.size), short(entry.digest))
    more = version.files - min(len(version.contents), FILES_SHOWN)
    if more > 0:
        table.add_row(f"... {more} more", "", "")
    return table
