"""GPU topology as people give it: ``nvidia-smi topo -m`` output, a matrix, or a preset name.

Guarantees: ``parse_nvidia_smi_topo`` accepts the output as printed (tabs or
spaces, text before the header, NIC rows, the legend and NIC legend after the
matrix, the optional ``CPU Affinity`` / ``NUMA Affinity`` / ``GPU NUMA ID``
columns) and raises ``InvalidInput`` naming the line, row and column and the fix
for anything else, never another exception. NUMA nodes come from ``NUMA
Affinity``; without it (older drivers), GPUs with the same ``CPU Affinity`` share
a NUMA node numbered in order of first appearance; without either, all are 0.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Annotated, Final

from pydantic import Field, model_validator

from phalanx.domain.errors import InvalidInput
from phalanx.domain.topology import (
    LINK_TOKENS,
    MAX_GPUS,
    GpuTopology,
    Link,
    Nic,
    parse_link,
    topology_from_tokens,
)
from phalanx.spec.common import SpecModel, from_invalid

#: Longest ``nvidia-smi topo -m`` text accepted; a guard against hostile input.
MAX_TOPOLOGY_TEXT: Final = 200_000

_EXTRA_COLUMNS: Final = (("CPU", "Affinity"), ("NUMA", "Affinity"), ("GPU", "NUMA", "ID"))
_GPU: Final = re.compile(r"GPU(\d+)")
_NIC_LEGEND: Final = re.compile(r"\s*(NIC\d+)\s*:\s*(\S+)\s*")
_FIX_PASTE: Final = "paste the whole output of `nvidia-smi topo -m`, header row included"


def _header(tokens: list[str]) -> tuple[list[str], list[str]] | None:
    """Device columns and extra column names of a header row, or None if it is not one."""
    devices: list[str] = []
    extras: list[str] = []
    i = 0
    while i < len(tokens):
        for words in _EXTRA_COLUMNS:
            if tuple(tokens[i : i + len(words)]) == words:
                extras.append(" ".join(words))
                i += len(words)
                break
        else:
            if extras:  # a device column after the extra columns: not a header we know
                return None
            devices.append(tokens[i])
            i += 1
    if not devices or devices[0] != "GPU0" or "X" in devices:  # a row has X on its diagonal
        return None
    return devices, extras


@dataclass(slots=True)
class _Table:
    """What the rows below the header hold, filled in row by row."""

    devices: list[str]
    extras: list[str]
    gpus: int
    matrix: dict[int, list[str]] = field(default_factory=dict)
    nic_cells: dict[str, list[str]] = field(default_factory=dict)
    numa: list[str | None] = field(default_factory=list)
    cpus: list[str | None] = field(default_factory=list)
    legend: dict[str, str] = field(default_factory=dict)


def parse_nvidia_smi_topo(text: str) -> GpuTopology:
    """The topology printed by ``nvidia-smi topo -m`` (the ``--matrix`` view)."""
    if len(text) > MAX_TOPOLOGY_TEXT:
        raise InvalidInput(
            f"{len(text)} characters is more than {MAX_TOPOLOGY_TEXT}",
            fix="give only the output of `nvidia-smi topo -m`",
        )
    lines = text.replace("\r\n", "\n").split("\n")
    start, table = _find_header(lines)
    in_legend = False
    for number in range(start + 1, len(lines)):
        line = lines[number]
        tokens = line.split()
        if not tokens:
            continue
        if tokens[0].rstrip(":") in ("Legend", "NIC") and line.strip().endswith(":"):
            in_legend = True  # "Legend:" or "NIC Legend:"
        elif in_legend:
            match = _NIC_LEGEND.fullmatch(line)
            if match:
                table.legend[match[1]] = match[2]
        elif tokens[0] not in table.nic_cells:  # NIC rows repeat the GPU rows' NIC columns
            _read_gpu_row(table, tokens, number)
    if len(table.matrix) != table.gpus:
        raise InvalidInput(
            f"{len(table.matrix)} GPU rows for {table.gpus} GPU columns",
            field=f"row GPU{len(table.matrix)}",
            fix=_FIX_PASTE,
        )
    numa = _numa(table.numa, table.cpus)
    nics = {table.legend.get(name, name): cells for name, cells in table.nic_cells.items()}
    try:
        return topology_from_tokens(
            [table.matrix[i] for i in range(table.gpus)], numa=numa, nics=nics
        )
    except InvalidInput as error:
        raise InvalidInput(
            str(error).removeprefix(f"{error.field}: ") if error.field else str(error),
            field=(error.field or "matrix").replace("matrix", "nvidia-smi matrix", 1),
            fix=error.fix,
        ) from None


def _find_header(lines: list[str]) -> tuple[int, _Table]:
    headers = ((i, _header(line.split())) for i, line in enumerate(lines))
    start, parsed = next(((i, h) for i, h in headers if h is not None), (-1, None))
    if parsed is None:
        raise InvalidInput("no header row starting with GPU0 found", fix=_FIX_PASTE)
    devices, extras = parsed
    gpus = [d for d in devices if _GPU.fullmatch(d)]
    for index, name in enumerate(gpus):
        if devices[index] != name or name != f"GPU{index}":
            raise InvalidInput(
                f"header column {index + 1} is {name!r}, expected 'GPU{index}'",
                field=f"line {start + 1}",
                fix="GPU columns come first and are numbered GPU0, GPU1, ... in order",
            )
    if len(gpus) > MAX_GPUS:
        raise InvalidInput(
            f"{len(gpus)} GPUs is more than {MAX_GPUS}", field=f"line {start + 1}", fix=_FIX_PASTE
        )
    nic_columns = devices[len(gpus) :]
    if len(set(nic_columns)) != len(nic_columns):
        raise InvalidInput(
            "a NIC column is repeated", field=f"line {start + 1}", fix="give each column once"
        )
    table = _Table(devices=devices, extras=extras, gpus=len(gpus))
    table.nic_cells = {name: [] for name in nic_columns}
    return start, table


def _read_gpu_row(table: _Table, tokens: list[str], number: int) -> None:
    row = tokens[0]
    where = f"line {number + 1} (row {row[:20]})"
    if not _GPU.fullmatch(row):
        raise InvalidInput(
            f"unexpected row {row[:20]!r}",
            field=f"line {number + 1}",
            fix="rows start with a column name of the header (GPU0, NIC0, mlx5_0 ...)",
        )
    index = int(row[3:])
    if index != len(table.matrix):
        raise InvalidInput(
            f"row {row} found where row GPU{len(table.matrix)} was expected",
            field=where,
            fix=f"give rows GPU0 to GPU{table.gpus - 1} in order, once each",
        )
    if index >= table.gpus:
        raise InvalidInput(
            f"row {row} has no column in the header",
            field=where,
            fix=f"give rows GPU0 to GPU{table.gpus - 1} only",
        )
    cells = tokens[1 : 1 + len(table.devices)]
    if len(cells) < len(table.devices):
        raise InvalidInput(
            f"{len(cells)} cells for {len(table.devices)} columns",
            field=where,
            fix="give one cell per header column (X on the diagonal)",
        )
    for column, token in zip(table.devices, cells, strict=True):
        try:
            parse_link(token)
        except InvalidInput:
            raise InvalidInput(
                f"{token[:20]!r} is not a link",
                field=f"{where}, column {column}",
                fix=f"write {LINK_TOKENS}",
            ) from None
    table.matrix[index] = cells[: table.gpus]
    for name, token in zip(table.nic_cells, cells[table.gpus :], strict=True):
        table.nic_cells[name].append(token)
    rest = tokens[1 + len(table.devices) :]
    extras = table.extras
    if len(rest) > len(extras):
        raise InvalidInput(
            f"{len(rest)} values after the links for {len(extras)} columns "
            f"({', '.join(extras) or 'none'})",
            field=where,
            fix="give one cell per header column",
        )
    # a blank CPU Affinity leaves fewer values: align them to the right
    values = dict(zip(extras[len(extras) - len(rest) :], rest, strict=True))
    table.numa.append(values.get("NUMA Affinity"))
    table.cpus.append(values.get("CPU Affinity"))


def _numa(numa: list[str | None], cpus: list[str | None]) -> list[int]:
    if all(token is not None and token.isdigit() for token in numa):
        return [int(token) for token in numa if token is not None]
    for gpu, token in enumerate(numa):
        if token is not None and token != "N/A" and not token.isdigit():
            raise InvalidInput(
                f"NUMA Affinity {token[:20]!r} is not a NUMA node",
                field=f"row GPU{gpu}",
                fix="write a whole number or N/A",
            )
    # No usable NUMA Affinity: GPUs with the same CPU affinity share a NUMA node.
    seen: dict[str | None, int] = {}
    return [seen.setdefault(token, len(seen)) for token in cpus]


class TopologyMatrixSpec(SpecModel):
    """``gpus.topology`` as an explicit matrix.

    ``matrix`` holds one row per GPU, cells as ``nvidia-smi`` writes them
    (``"X NV1 NV2"``); ``numa`` one NUMA node per GPU (all 0 when left out); ``nics``
    maps a NIC name to its row of links to each GPU (``"PIX PIX SYS SYS"``).
    """

    matrix: Annotated[list[str], Field(min_length=1, max_length=MAX_GPUS)]
    """One row per GPU, cells as nvidia-smi topo -m writes them (X NV1 NV2 PIX SYS ...)."""
    numa: list[Annotated[int, Field(ge=0)]] | None = None
    """Each GPU's NUMA node (all 0 when left out)."""
    nics: dict[str, str] = Field(default_factory=dict)
    """Each NIC's row of links to every GPU (e.g. mlx5_0: PIX PIX SYS SYS)."""

    @model_validator(mode="after")
    def _valid(self) -> TopologyMatrixSpec:
        try:
            self.to_domain()
        except InvalidInput as error:
            raise from_invalid(error, at=_location(error.field)) from None
        return self

    def to_domain(self) -> GpuTopology:
        """The domain topology."""
        numa = self.numa if self.numa is not None else [0] * len(self.matrix)
        return topology_from_tokens(
            [row.split() for row in self.matrix],
            numa=numa,
            nics={name: cells.split() for name, cells in self.nics.items()},
        )


_CELL: Final = re.compile(r"(matrix|nics)\[([^\]]+)\](?:\[GPU(\d+)\])?")


def _location(field: str | None) -> tuple[str | int, ...]:
    """The document location of a domain field such as ``matrix[GPU1][GPU2]``."""
    if field is None:
        return ()
    match = _CELL.fullmatch(field)
    if match is None:
        return (field,)
    if match[1] == "matrix":
        return ("matrix", int(match[2].removeprefix("GPU")))
    return ("nics", match[2])


__all__ = [
    "MAX_TOPOLOGY_TEXT",
    "GpuTopology",
    "Link",
    "Nic",
    "TopologyMatrixSpec",
    "parse_nvidia_smi_topo",
]
