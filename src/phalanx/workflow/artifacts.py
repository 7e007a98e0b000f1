"""Where a run's artifacts live, and how output params are read from what a step wrote.

A ``Workspace`` is a root on any fsspec filesystem (a local directory by default, or
``s3://bucket/phalanx`` ...). Every output of a unit has one URL the engine generates::

    ROOT/runs/RUN/STEP/NAME          a step's output NAME (artifact or param file)
    ROOT/runs/RUN/STEP/ITEM/NAME     of item ITEM of a foreach step

so the path itself records the lineage (which run and step produced it). Guarantees:
``output_url`` is a pure function of its arguments and refuses run ids that could leave
the workspace (anything but letters, digits, '.', '_' and '-', or a leading '.');
``read_output_param`` returns a value of the declared type or raises ``OutputError``
saying what the step wrote and what was expected; a file over ``MAX_PARAM_BYTES`` is
refused before it is parsed.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

import fsspec

from phalanx.domain.errors import PhalanxError
from phalanx.workflow.dag import StepNode
from phalanx.workflow.params import a, check_value
from phalanx.workflow.parts import OutputParam
from phalanx.workflow.planner import Unit
from phalanx.workflow.templates import Value, to_text

#: Largest output param file read (JSON text).
MAX_PARAM_BYTES: Final = 1 << 20

_RUN_ID: Final = re.compile(r"[A-Za-z0-9_-][A-Za-z0-9._-]{0,127}")


class OutputError(PhalanxError):
    """A step's output param that is missing or not what its ``outputs`` entry declares;
    the step fails with this message."""


@dataclass(frozen=True, slots=True)
class Workspace:
    """The root under which runs keep their artifacts (a path or an fsspec URL)."""

    root: str

    def run_url(self, run_id: str) -> str:
        """The directory of one run."""
        if not _RUN_ID.fullmatch(run_id):
            raise ValueError(f"run id {run_id[:60]!r} cannot name a directory")
        return f"{self.root.rstrip('/')}/runs/{run_id}"

    def unit_url(self, run_id: str, unit: Unit) -> str:
        """The directory of one unit's outputs."""
        base = f"{self.run_url(run_id)}/{unit.step}"
        return base if unit.index is None else f"{base}/{unit.index}"

    def output_url(self, run_id: str, unit: Unit, name: str) -> str:
        """Where ``unit`` writes its output ``name`` (``{{outputs.NAME}}``)."""
        return f"{self.unit_url(run_id, unit)}/{name}"

    def outputs(self, run_id: str, unit: Unit, node: StepNode) -> dict[str, str]:
        """``{{outputs.NAME}}`` of every output of ``node`` for ``unit``."""
        return {name: self.output_url(run_id, unit, name) for name in node.outputs.names}


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number")


def read_output_param(name: str, spec: OutputParam, text: str, *, step: str = "") -> Value:
    """The value of output param ``name`` of ``step`` from the JSON ``text`` (its own file,
    or the artifact ``spec.from_artifact``); raises ``OutputError`` naming step and output."""
    where = f"step {step}, outputs.params.{name}" if step else f"output {name}"
    if len(text.encode()) > MAX_PARAM_BYTES:
        raise OutputError(f"{where}: more than {MAX_PARAM_BYTES} bytes of JSON")
    try:
        value: Any = json.loads(text, parse_constant=_no_constant)
    except (ValueError, RecursionError) as error:
        raise OutputError(f"{where}: not JSON ({error}); write a JSON value") from None
    for part in (spec.key or "").split(".") if spec.key else ():
        if not isinstance(value, dict) or part not in value:
            raise OutputError(f"{where}: the JSON has no key {spec.key!r}")
        value = value[part]
    if spec.type == "json":
        return value  # type: ignore[no-any-return]
    checked = check_value(value, spec.type)
    if checked is None:
        raise OutputError(f"{where}: {to_text(value)[:60]} is not {a(spec.type)}")
    return list(checked) if isinstance(checked, list) else checked


def read_outputs(node: StepNode, urls: Mapping[str, str], *, fs: Any = None) -> dict[str, Value]:
    """Every output param of ``node`` read from ``urls`` (``Workspace.outputs``); raises
    ``OutputError`` (a missing file, or a directory where a file belongs, included)."""
    values: dict[str, Value] = {}
    for name, spec in node.outputs.params.items():
        url = urls[spec.from_artifact or name]
        try:
            if fs is not None:
                with fs.open(url, "rb") as stream:
                    data = stream.read(MAX_PARAM_BYTES + 1)
            else:
                with fsspec.open(url, "rb") as stream:
                    data = stream.read(MAX_PARAM_BYTES + 1)
        except FileNotFoundError:
            raise OutputError(
                f"step {node.name}, outputs.params.{name}: the step did not write {url}"
            ) from None
        except IsADirectoryError:
            raise OutputError(
                f"step {node.name}, outputs.params.{name}: {url} is a directory, not a JSON "
                "file; write the value into a file (fromArtifact names a file artifact)"
            ) from None
        try:
            text = data.decode()
        except UnicodeDecodeError:
            raise OutputError(
                f"step {node.name}, outputs.params.{name}: {url} is not UTF-8 text"
            ) from None
        values[name] = read_output_param(name, spec, text, step=node.name)
    return values
