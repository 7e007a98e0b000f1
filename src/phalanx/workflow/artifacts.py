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
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

import fsspec

from phalanx.domain.errors import ContentError, InvalidInput
from phalanx.spec.pipeline.dag import StepNode
from phalanx.spec.pipeline.params import a, check_value
from phalanx.spec.pipeline.parts import OutputParam
from phalanx.spec.pipeline.templates import Value, to_text
from phalanx.tenantfs import Reader
from phalanx.workflow.contents import (
    MAX_PARAM_BYTES,
    SERVER,
    Access,
    MissingContent,
    TenantPathRefused,
    read_param,
)
from phalanx.workflow.planner import Unit

_RUN_ID: Final = re.compile(r"[A-Za-z0-9_-][A-Za-z0-9._-]{0,127}")


class OutputError(ContentError):
    """A step's output param that is missing or not what its ``outputs`` entry declares;
    the step fails with this message."""


@dataclass(frozen=True, slots=True)
class Workspace:
    """The root under which runs keep their artifacts (a path or an fsspec URL)."""

    root: str

    def mounts(self) -> tuple[str, ...]:
        """What a step in a container mounts to see its artifacts at their URLs: the
        root, when it is a local directory; nothing for a remote filesystem, which the
        step reaches by its URLs."""
        protocol = fsspec.core.split_protocol(self.root)[0]
        if protocol not in (None, "file", "local"):
            return ()
        return (os.path.abspath(fsspec.core.strip_protocol(self.root)),)

    def access(self, reader: Reader | None) -> Access:
        """How the server reads runs' files here as ``reader`` (``workflow.contents``)."""
        local = self.mounts()
        return Access(workspace_root=local[0] if local else None, reader=reader)

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


def check_workspace(url: str) -> str:
    """``url`` as a workspace root: a local path made absolute, or an fsspec URL whose
    filesystem is installed. Raises ``InvalidInput`` naming ``--workspace`` and the fix."""
    protocol = fsspec.core.split_protocol(url)[0]
    if protocol in (None, "file", "local"):
        path = fsspec.core.strip_protocol(url) if protocol else url
        return os.path.abspath(os.path.expanduser(path))
    try:
        fsspec.get_filesystem_class(protocol)
    except ValueError:
        raise InvalidInput(
            f"{url!r}: fsspec knows no filesystem {protocol!r}",
            field="--workspace",
            fix="give a directory, or a URL such as s3://bucket/phalanx",
        ) from None
    except ImportError as error:
        raise InvalidInput(
            f"{url!r}: the {protocol} filesystem is not installed ({error})",
            field="--workspace",
            fix=f"install the package fsspec names for {protocol} (s3fs, gcsfs, adlfs ...)",
        ) from None
    if protocol == "memory":
        raise InvalidInput(
            f"{url!r}: a memory filesystem lives in the server alone, and steps run as "
            "processes of their own",
            field="--workspace",
            fix="give a directory or a shared filesystem's URL",
        )
    return url


def check_shared(url: str | None, *, nodes: int) -> None:
    """Refuse a workspace that the tasks of a cluster of ``nodes`` machines could not all
    reach: a plain local path (``url`` None: the default, in the data dir) on more than
    one node. A ``file://`` URL is the admin's word that every node mounts that path
    (NFS, a shared volume); any other URL (``s3://``) every node reaches by its URL.
    Raises ``InvalidInput`` naming ``--workspace`` and the fix."""
    if nodes <= 1 or (url is not None and fsspec.core.split_protocol(url)[0] is not None):
        return
    where = "the default, in the data dir" if url is None else url
    raise InvalidInput(
        f"the workspace ({where}) is a path on the server's machine, and the tasks of "
        f"this cluster run on {nodes} nodes, which would each see a directory of their own",
        field="--workspace",
        fix="give a URL every node reaches, such as s3://bucket/phalanx (s3fs installed "
        "on the server and the nodes: pip install 'phalanx[s3]'), or file:///PATH for a "
        "file system every node mounts at PATH",
    )


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


def read_outputs(
    node: StepNode,
    urls: Mapping[str, str],
    access: Access = SERVER,
) -> dict[str, Value]:
    """Every output param of ``node`` read from ``urls`` (``Workspace.outputs``) with
    ``access`` (``workflow.contents``: no link followed, no FIFO opened); raises
    ``OutputError`` naming what was there instead of a file, or that nothing was."""
    values: dict[str, Value] = {}
    for name, spec in node.outputs.params.items():
        url = urls[spec.from_artifact or name]
        where = f"step {node.name}, outputs.params.{name}"
        try:
            data = read_param(url, access)
        except MissingContent:
            raise OutputError(f"{where}: the step did not write {url}") from None
        except TenantPathRefused as error:
            raise OutputError(
                f"{where}: {error.path}: {error.why}; fix: write the value into a regular "
                "file there, no link (fromArtifact names a file artifact)"
            ) from None
        try:
            text = data.decode()
        except UnicodeDecodeError:
            raise OutputError(f"{where}: {url} is not UTF-8 text") from None
        values[name] = read_output_param(name, spec, text, step=node.name)
    return values
