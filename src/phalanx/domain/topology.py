"""The inside of a GPU node: how its GPUs and NICs are connected.

The vocabulary is ``nvidia-smi topo -m``'s legend, best link first::

    X     the GPU itself
    NV#   a bonded set of # NVLinks (an NVSwitch fabric shows as NV# between every pair)
    PIX   at most a single PCIe bridge (same PCIe switch)
    PXB   multiple PCIe bridges, without the host bridge
    PHB   through a PCIe host bridge (typically the CPU)
    NODE  between host bridges within one NUMA node
    SYS   across NUMA nodes (the SMP interconnect, QPI/UPI/xGMI)

Guarantees: a ``GpuTopology`` is square, symmetric, has ``X`` exactly on its
diagonal, one NUMA node per GPU and one link per (NIC, GPU); anything else is
refused with ``InvalidInput`` naming the row and column. Every query is
deterministic: ties break on the lower GPU or NIC index.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from enum import IntEnum
from itertools import combinations
from types import MappingProxyType
from typing import Final

from phalanx.domain.errors import InvalidInput

#: Most GPUs one topology may describe; a guard against hostile input.
MAX_GPUS: Final = 64
#: Most NICs one topology may describe.
MAX_NICS: Final = 64
#: A NIC's device name (``mlx5_0``, ``ib0``, ``mlx5_0:1`` for one port): it reaches the task
#: in comma-separated lists (``NCCL_IB_HCA``), so it holds no comma, space or ``=``/``^``.
NIC_NAME: Final = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.:-]{0,63}")


def check_nic_name(name: str, *, field: str = "nics") -> None:
    """Raise ``InvalidInput`` naming ``field`` unless ``name`` matches ``NIC_NAME``."""
    if not NIC_NAME.fullmatch(name):
        raise InvalidInput(
            f"{name[:70]!r} cannot name a NIC",
            field=field,
            fix="use the device's name as the system shows it: letters, digits, _ . : - "
            "(such as mlx5_0)",
        )


class LinkLevel(IntEnum):
    """How two devices are connected, ordered best (lowest) to worst."""

    SELF = 0  # X
    NVLINK = 1  # NV#
    PIX = 2  # same PCIe switch
    PXB = 3  # several PCIe switches, below one host bridge
    PHB = 4  # through a PCIe host bridge (same CPU root)
    NODE = 5  # across host bridges within a NUMA node
    SYS = 6  # across NUMA nodes


_PLAIN_LEVELS: Final = {
    "PIX": LinkLevel.PIX,
    "PXB": LinkLevel.PXB,
    "PHB": LinkLevel.PHB,
    "NODE": LinkLevel.NODE,
    "SYS": LinkLevel.SYS,
    "SOC": LinkLevel.SYS,  # drivers before 384 wrote SOC for SYS
}
_NVLINK: Final = re.compile(r"NV([1-9][0-9]{0,2})")
LINK_TOKENS: Final = "X, NV<count> (e.g. NV12), PIX, PXB, PHB, NODE or SYS"


@dataclass(frozen=True, slots=True, kw_only=True)
class Link:
    """One cell of the matrix: a level and, for NVLink, how many links are bonded."""

    level: LinkLevel
    nvlinks: int = 0  # > 0 exactly when level is NVLINK

    def __post_init__(self) -> None:
        if (self.level is LinkLevel.NVLINK) != (self.nvlinks > 0):
            raise InvalidInput(
                f"an {self.level.name} link cannot carry {self.nvlinks} NVLinks",
                fix="give nvlinks > 0 for NVLINK links and 0 otherwise",
            )

    @property
    def rank(self) -> tuple[int, int]:
        """Sort key: lower is better; more bonded NVLinks beat fewer."""
        return (int(self.level), -self.nvlinks)

    @property
    def is_nvlink(self) -> bool:
        """True for an NVLink connection."""
        return self.level is LinkLevel.NVLINK

    def __str__(self) -> str:
        if self.level is LinkLevel.SELF:
            return "X"
        if self.level is LinkLevel.NVLINK:
            return f"NV{self.nvlinks}"
        return self.level.name


SELF: Final = Link(level=LinkLevel.SELF)
PIX: Final = Link(level=LinkLevel.PIX)
PXB: Final = Link(level=LinkLevel.PXB)
PHB: Final = Link(level=LinkLevel.PHB)
NODE: Final = Link(level=LinkLevel.NODE)
SYS: Final = Link(level=LinkLevel.SYS)


def nvlink(count: int) -> Link:
    """An NVLink connection of ``count`` bonded links."""
    return Link(level=LinkLevel.NVLINK, nvlinks=count)


def parse_link(token: str, *, field: str | None = None) -> Link:
    """The link an ``nvidia-smi topo -m`` cell stands for (``X``, ``NV12``, ``PIX`` ...)."""
    text = token.strip().upper()
    if text == "X":
        return SELF
    if text in _PLAIN_LEVELS:
        return Link(level=_PLAIN_LEVELS[text])
    match = _NVLINK.fullmatch(text)
    if match:
        return nvlink(int(match[1]))
    raise InvalidInput(f"{token[:20]!r} is not a link", field=field, fix=f"write {LINK_TOKENS}")


@dataclass(frozen=True, slots=True, kw_only=True)
class Nic:
    """A network card and its link to every GPU, in GPU order."""

    name: str
    links: tuple[Link, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class SetScore:
    """How well a set of GPUs is connected. Compare with ``sort_key``: lower is better.

    The worst pairwise link decides first (a set is as slow as its slowest pair),
    then more NVLink pairs, then fewer NUMA nodes spanned.
    """

    worst: Link  # SELF for a set of one GPU
    nvlink_pairs: int
    numa_nodes: int

    @property
    def sort_key(self) -> tuple[int, int, int, int]:
        """Lower is better."""
        level, links = self.worst.rank
        return (level, links, -self.nvlink_pairs, self.numa_nodes)

    def better_than(self, other: SetScore) -> bool:
        """True when this set is strictly better connected than ``other``."""
        return self.sort_key < other.sort_key


@dataclass(frozen=True, slots=True, kw_only=True)
class GpuTopology:
    """The GPU x GPU link matrix of one node, each GPU's NUMA node and the NICs."""

    links: tuple[tuple[Link, ...], ...]
    numa: tuple[int, ...]
    nics: tuple[Nic, ...] = ()

    def __post_init__(self) -> None:
        count = len(self.links)
        if not 1 <= count <= MAX_GPUS:
            raise InvalidInput(
                f"{count} GPUs; a topology describes 1 to {MAX_GPUS}",
                field="matrix",
                fix="give one row per GPU",
            )
        for row, cells in enumerate(self.links):
            if len(cells) != count:
                raise InvalidInput(
                    f"row GPU{row} has {len(cells)} columns for {count} GPUs",
                    field=f"matrix[GPU{row}]",
                    fix="give one link per GPU in every row",
                )
            for col, link in enumerate(cells):
                where = f"matrix[GPU{row}][GPU{col}]"
                if (row == col) != (link.level is LinkLevel.SELF):
                    wanted = "X" if row == col else "a link other than X"
                    raise InvalidInput(f"{link} found", field=where, fix=f"write {wanted} here")
                if col < row and link != self.links[col][row]:
                    raise InvalidInput(
                        f"{link} but GPU{col} -> GPU{row} is {self.links[col][row]}",
                        field=where,
                        fix="links are symmetric: write the same link in both cells",
                    )
        if len(self.numa) != count:
            raise InvalidInput(
                f"{len(self.numa)} NUMA nodes for {count} GPUs",
                field="numa",
                fix="give one NUMA node per GPU",
            )
        if any(node < 0 for node in self.numa):
            raise InvalidInput("NUMA nodes cannot be negative", field="numa", fix="use 0, 1, ...")
        if len(self.nics) > MAX_NICS:
            raise InvalidInput(
                f"{len(self.nics)} NICs is more than {MAX_NICS}", field="nics", fix="list fewer"
            )
        names: set[str] = set()
        for nic in self.nics:
            if nic.name in names or not nic.name:
                raise InvalidInput(
                    f"NIC name {nic.name!r} is empty or repeated",
                    field="nics",
                    fix="give every NIC its own name",
                )
            check_nic_name(nic.name)
            names.add(nic.name)
            if len(nic.links) != count:
                raise InvalidInput(
                    f"{len(nic.links)} links for {count} GPUs",
                    field=f"nics[{nic.name}]",
                    fix="give one link per GPU, in GPU order",
                )
            for gpu, link in enumerate(nic.links):
                if link.level in (LinkLevel.SELF, LinkLevel.NVLINK):
                    raise InvalidInput(
                        f"{link} found",
                        field=f"nics[{nic.name}][GPU{gpu}]",
                        fix="a NIC reaches a GPU over PCIe: write PIX, PXB, PHB, NODE or SYS",
                    )

    @property
    def count(self) -> int:
        """Number of GPUs."""
        return len(self.links)

    def link(self, a: int, b: int) -> Link:
        """The link between GPUs ``a`` and ``b`` (``SELF`` when a == b)."""
        self._check(a)
        self._check(b)
        return self.links[a][b]

    def nvlink_peers(self, gpu: int) -> tuple[int, ...]:
        """GPUs reached from ``gpu`` over NVLink, in index order."""
        self._check(gpu)
        return tuple(i for i, link in enumerate(self.links[gpu]) if link.is_nvlink)

    def numa_domains(self) -> Mapping[int, tuple[int, ...]]:
        """NUMA node -> its GPUs, both in ascending order."""
        domains: dict[int, list[int]] = {}
        for gpu, node in enumerate(self.numa):
            domains.setdefault(node, []).append(gpu)
        return MappingProxyType({node: tuple(domains[node]) for node in sorted(domains)})

    def nearest_nic(self, gpu: int) -> int | None:
        """Index of the NIC with the best link to ``gpu`` (ties: lower index); None without NICs."""
        self._check(gpu)
        if not self.nics:
            return None
        return min(range(len(self.nics)), key=lambda i: (self.nics[i].links[gpu].rank, i))

    def score(self, gpus: Collection[int]) -> SetScore:
        """How well ``gpus`` are connected to one another (see ``SetScore``)."""
        members = sorted(set(gpus))
        if not members:
            raise InvalidInput("an empty set of GPUs", field="gpus", fix="give at least one GPU")
        for gpu in members:
            self._check(gpu)
        worst = SELF
        pairs = 0
        for a, b in combinations(members, 2):
            link = self.links[a][b]
            pairs += link.is_nvlink
            if link.rank > worst.rank:
                worst = link
        return SetScore(
            worst=worst,
            nvlink_pairs=pairs,
            numa_nodes=len({self.numa[gpu] for gpu in members}),
        )

    def rows(self) -> tuple[str, ...]:
        """The matrix as ``nvidia-smi``-style rows, e.g. ``("X NV1", "NV1 X")``."""
        return tuple(" ".join(str(link) for link in cells) for cells in self.links)

    def _check(self, gpu: int) -> None:
        if not 0 <= gpu < self.count:
            raise InvalidInput(
                f"GPU {gpu} does not exist",
                field="gpu",
                fix=f"use an index from 0 to {self.count - 1}",
            )


def topology_from_tokens(
    matrix: Sequence[Sequence[str]],
    *,
    numa: Sequence[int],
    nics: Mapping[str, Sequence[str]] | None = None,
) -> GpuTopology:
    """A topology from text cells: ``matrix[i][j]`` and ``nics[name][gpu]`` as nvidia-smi writes them."""
    links = tuple(
        tuple(
            parse_link(token, field=f"matrix[GPU{row}][GPU{col}]")
            for col, token in enumerate(cells)
        )
        for row, cells in enumerate(matrix)
    )
    nic_values = tuple(
        Nic(
            name=name,
            links=tuple(
                parse_link(token, field=f"nics[{name}][GPU{gpu}]")
                for gpu, token in enumerate(cells)
            ),
        )
        for name, cells in (nics or {}).items()
    )
    return GpuTopology(links=links, numa=tuple(numa), nics=nic_values)


# --- presets -------------------------------------------------------------------------------
#
# Matrices copied from recorded `nvidia-smi topo -m` outputs; the recordings are test
# fixtures in tests/unit/spec/test_topology.py, which checks each preset against them.


def _from_levels(rows: Sequence[str], numa: Sequence[int], nics: Mapping[str, str]) -> GpuTopology:
    return topology_from_tokens(
        [row.split() for row in rows],
        numa=numa,
        nics={name: cells.split() for name, cells in nics.items()},
    )


def _nvswitch(count: int, links: int) -> list[str]:
    return [" ".join("X" if i == j else f"NV{links}" for j in range(count)) for i in range(count)]


def dgx_a100() -> GpuTopology:
    """DGX A100: NVSwitch (NV12 between every pair); GPU pairs share a PCIe switch tree
    with two ConnectX-6 NICs (PXB); GPUs 0-3 on socket 0, 4-7 on socket 1.

    Recorded DGX A100s run the EPYC CPUs in NPS4 and report NUMA nodes 3,3,1,1,7,7,5,5
    (one per GPU pair, which is why every other NIC is SYS); the preset names the
    two sockets instead. The two storage NICs (mlx5_8, mlx5_9) are left out.
    """
    nics = {}
    for pair in range(4):
        cells = " ".join(["SYS"] * (2 * pair) + ["PXB", "PXB"] + ["SYS"] * (6 - 2 * pair))
        nics[f"mlx5_{2 * pair}"] = cells
        nics[f"mlx5_{2 * pair + 1}"] = cells
    return _from_levels(_nvswitch(8, 12), [0, 0, 0, 0, 1, 1, 1, 1], nics)


def dgx_h100() -> GpuTopology:
    """DGX H100 / HGX H100 board: NVSwitch (NV18 between every pair); each GPU has its
    own ConnectX-7 behind its PCIe switch (PIX), NODE to the other GPUs of its
    socket, SYS across; GPUs 0-3 on NUMA node 0, 4-7 on NUMA node 1."""
    nics = {}
    for nic in range(8):
        cells = []
        for gpu in range(8):
            if gpu == nic:
                cells.append("PIX")
            elif gpu // 4 == nic // 4:
                cells.append("NODE")
            else:
                cells.append("SYS")
        nics[f"mlx5_{nic}"] = " ".join(cells)
    return _from_levels(_nvswitch(8, 18), [0, 0, 0, 0, 1, 1, 1, 1], nics)


def dgx1_v100() -> GpuTopology:
    """DGX-1 with V100: the hybrid cube-mesh. Each GPU has 6 NVLinks to 4 peers (NV1,
    NV1, NV2, NV2): all of its own quad (0-3 or 4-7) and its twin in the other quad;
    the other three GPUs are SYS. Quads are NUMA nodes 0 and 1.

    NICs follow the DGX-1 system architecture (one EDR NIC per PCIe switch pair: PIX
    to its two GPUs, PHB to the other pair of its socket); the recording the GPU
    matrix was checked against is a V100-SXM2 box with a single NIC, so these NIC
    columns are not checked against a recording."""
    rows = [
        "X   NV1 NV1 NV2 NV2 SYS SYS SYS",
        "NV1 X   NV2 NV1 SYS NV2 SYS SYS",
        "NV1 NV2 X   NV2 SYS SYS NV1 SYS",
        "NV2 NV1 NV2 X   SYS SYS SYS NV1",
        "NV2 SYS SYS SYS X   NV1 NV1 NV2",
        "SYS NV2 SYS SYS NV1 X   NV2 NV1",
        "SYS SYS NV1 SYS NV1 NV2 X   NV2",
        "SYS SYS SYS NV1 NV2 NV1 NV2 X",
    ]
    nics = {
        "mlx5_0": "PIX PIX PHB PHB SYS SYS SYS SYS",
        "mlx5_1": "PHB PHB PIX PIX SYS SYS SYS SYS",
        "mlx5_2": "SYS SYS SYS SYS PIX PIX PHB PHB",
        "mlx5_3": "SYS SYS SYS SYS PHB PHB PIX PIX",
    }
    return _from_levels(rows, [0, 0, 0, 0, 1, 1, 1, 1], nics)


def pcie_4gpu() -> GpuTopology:
    """A two-socket PCIe server with 4 GPUs: GPUs 0-1 and 2-3 each behind one PCIe
    switch (PIX), SYS across sockets; one NIC on socket 0's host bridge."""
    rows = ["X PIX SYS SYS", "PIX X SYS SYS", "SYS SYS X PIX", "SYS SYS PIX X"]
    return _from_levels(rows, [0, 0, 1, 1], {"mlx5_0": "PHB PHB SYS SYS"})


PRESETS: Final[Mapping[str, Callable[[], GpuTopology]]] = MappingProxyType(
    {
        "dgx-a100": dgx_a100,
        "dgx-h100": dgx_h100,
        "dgx1-v100": dgx1_v100,
        "pcie-4gpu": pcie_4gpu,
    }
)


def preset(name: str) -> GpuTopology:
    """The preset topology called ``name``; an unknown name is refused with the closest one."""
    try:
        return PRESETS[name]()
    except KeyError:
        known = list(PRESETS)
        close = difflib.get_close_matches(name, known, n=1, cutoff=0.6)
        hint = f"did you mean {close[0]!r}? " if close else ""
        raise InvalidInput(
            f"unknown GPU topology preset {name[:40]!r}",
            fix=f"{hint}known presets: {', '.join(known)}; or give a matrix",
        ) from None
