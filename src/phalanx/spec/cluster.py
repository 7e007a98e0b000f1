"""The ``Cluster`` document: groups of identical nodes, expanded into domain ``Node`` values.

Guarantees: node ``i`` of group ``g`` is named ``g-i`` (from 0) and names are unique
across the cluster; every network template renders for every node; an ``address``
template (such as ``10.0.0.{index + 10}``, the same arithmetic as ``network``) renders
to an IP address or host name for every node, which becomes ``Node.address``; capacity
includes ``gpu`` (and ``gpu-memory`` when the GPU memory is given) from ``gpus``;
labels carry ``phalanx.io/node-group`` and, when known, the GPU model and topology.
``gpus.topology`` is a preset name (``dgx-a100``, ``dgx-h100``, ``dgx1-v100``,
``pcie-4gpu``), the text printed by ``nvidia-smi topo -m``, or an explicit matrix;
each node then carries the ``GpuTopology`` and its GPUs their NUMA node, NVLink
peers and nearest NIC. Every node of a group with ``gpus`` carries its cells (the
hived plugin's): the chain under the group's ``cellType`` from ``spec.cellTypes``, or
the one its topology shows (see ``phalanx.spec.cells``).
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Annotated, Final, Literal, Self

from pydantic import AfterValidator, Discriminator, Field, Tag, model_validator

from phalanx.domain.cells import NodeCells, derive_levels
from phalanx.domain.errors import DocumentError, InvalidInput
from phalanx.domain.node import GPU_MODEL_LABEL, Gpu, Node, check_address
from phalanx.domain.resources import GPU, GPU_MEMORY, Resources, canonical_amount
from phalanx.domain.topology import GpuTopology, preset
from phalanx.spec.cells import CellTypeSpec, check_cell_types, group_cells
from phalanx.spec.common import (
    API_VERSION,
    UNION_TAG,
    DnsLabel,
    LabelKey,
    LabelValue,
    Metadata,
    Name,
    SpecModel,
    from_invalid,
    located,
)
from phalanx.spec.placement import TaintSpec
from phalanx.spec.quantity import Quantity, ResourceMap, resources_of
from phalanx.spec.template import IndexTemplate
from phalanx.spec.topology import TopologyMatrixSpec, parse_nvidia_smi_topo

#: Most nodes one Cluster document may describe; a guard against hostile input.
MAX_NODES: Final = 100_000

NODE_GROUP_LABEL: Final = "phalanx.io/node-group"
GPU_TOPOLOGY_LABEL: Final = "phalanx.io/gpu-topology"
#: Value of the topology label when the topology is given as a matrix or nvidia-smi text.
CUSTOM_TOPOLOGY: Final = "custom"


def _check_template(text: str) -> str:
    try:
        IndexTemplate.parse(text)
    except DocumentError as error:
        raise from_invalid(error) from None
    return text


def _topology_form(value: object) -> str:
    return f"{UNION_TAG}{'matrix' if isinstance(value, dict | TopologyMatrixSpec) else 'text'}"


#: ``gpus.topology``: a preset name or ``nvidia-smi topo -m`` text, or a matrix mapping.
TopologyValue = Annotated[
    Annotated[str, Tag(f"{UNION_TAG}text")]
    | Annotated[TopologyMatrixSpec, Tag(f"{UNION_TAG}matrix")],
    Discriminator(_topology_form),
]


class GpuSpec(SpecModel):
    """``gpus``: how many identical GPUs each node has, their model and memory."""

    count: Annotated[int, Field(ge=1)]
    """How many GPUs each node of the group has."""
    model: LabelValue = ""
    """The GPU model (also the node label phalanx.io/gpu-model), e.g. A100-SXM4-80GB."""
    memory: Quantity | None = None
    """Each GPU's memory (e.g. 80Gi); GPU-memory requests and sharing are measured against
    it."""
    topology: TopologyValue | None = None
    """How the GPUs (and NICs) are linked: a preset name such as dgx-a100, the output of
    nvidia-smi topo -m, or a matrix."""

    @model_validator(mode="after")
    def _topology_fits(self) -> Self:
        try:
            topology = self.gpu_topology()
        except InvalidInput as error:
            raise from_invalid(error, at=("topology",)) from None
        if topology is not None and topology.count != self.count:
            raise located(
                f"the topology describes {topology.count} GPUs but count is {self.count}",
                "make count match the topology's GPUs",
                at=("topology",),
            )
        return self

    def memory_bytes(self) -> float:
        """Memory of one GPU in bytes (0 when not given)."""
        return 0.0 if self.memory is None else canonical_amount(GPU_MEMORY, self.memory)

    def gpu_topology(self) -> GpuTopology | None:
        """The topology of each node, or None when not given."""
        topology = self.topology
        if topology is None:
            return None
        if isinstance(topology, TopologyMatrixSpec):
            return topology.to_domain()
        if _is_nvidia_smi_text(topology):
            return parse_nvidia_smi_topo(topology)
        return preset(topology)

    def topology_label(self) -> str | None:
        """The preset name, ``custom`` for a matrix or nvidia-smi text, None without one."""
        if self.topology is None:
            return None
        if isinstance(self.topology, TopologyMatrixSpec) or _is_nvidia_smi_text(self.topology):
            return CUSTOM_TOPOLOGY
        return self.topology


def _is_nvidia_smi_text(topology: str) -> bool:
    """True for ``nvidia-smi topo -m`` output, False for a preset name."""
    text = topology.strip()
    return "\n" in text or text.startswith("GPU0")


class NodeGroupSpec(SpecModel):
    """``count`` identical nodes named ``<name>-0`` .. ``<name>-<count-1>``."""

    name: DnsLabel
    """The group's name; its nodes are <name>-0 .. <name>-<count-1>."""
    count: Annotated[int, Field(ge=1, le=MAX_NODES)]
    """How many identical nodes the group has."""
    resources: ResourceMap
    """What each node offers: cpu (cores or millicores), memory (e.g. 256Gi) and any extended
    resource; GPUs go under gpus."""
    labels: dict[LabelKey, LabelValue] = Field(default_factory=dict)
    """Node labels, matched by jobs' nodeSelector and affinity."""
    taints: list[TaintSpec] = Field(default_factory=list)
    """Node taints; only jobs that tolerate them run here."""
    gpus: GpuSpec | None = None
    """Each node's GPUs: count, model, memory and topology."""
    network: dict[DnsLabel, Annotated[str, AfterValidator(_check_template)]] = Field(
        default_factory=dict
    )
    """The node's switch at each network tier, as a template over index (e.g. tor:
    "tor-{index // 16}"), for network-topology placement."""
    address: Annotated[str, AfterValidator(_check_template)] | None = None
    """Where each node's tasks are reached, as a template over index (e.g. 10.0.0.{index});
    omitted: the executor knows."""
    max_tasks: Annotated[int, Field(ge=1)] | None = None
    """At most this many tasks on one node at once; omitted: no limit but the resources."""
    cell_type: Name | None = None
    """The top cell type of the group's nodes (spec.cellTypes), for the hived plugin;
    omitted: derived from gpus."""

    @model_validator(mode="after")
    def _consistent(self) -> Self:
        if self.gpus is not None:
            for name in (GPU, GPU_MEMORY):
                if name in self.resources:
                    raise located(
                        f"{name} is given by gpus",
                        f"remove resources.{name}",
                        at=("resources", name),
                    )
        if self.cell_type is not None and self.gpus is None:
            raise located(
                "cells are made of GPUs but the group has no gpus",
                "add gpus or remove cellType",
                at=("cellType",),
            )
        for tier, text in self.network.items():
            template = IndexTemplate.parse(text)
            try:
                for index in range(self.count):
                    template.render(index)
            except DocumentError as error:
                raise from_invalid(error, at=("network", tier)) from None
        self._addresses()
        return self

    def _addresses(self) -> list[str | None]:
        """Each node's address, in index order (None without an ``address`` template)."""
        if self.address is None:
            return [None] * self.count
        template = IndexTemplate.parse(self.address)
        found: list[str | None] = []
        for index in range(self.count):
            try:
                address = template.render(index)
                check_address(address, owner=f"node {self.name}-{index}")
            except InvalidInput as error:
                raise from_invalid(error, at=("address",)) from None
            found.append(address)
        return found

    def cells(self, cell_types: Mapping[str, CellTypeSpec]) -> list[NodeCells] | None:
        """Each node's cells (see ``phalanx.spec.cells``); None without gpus."""
        if self.gpus is None:
            return None
        if self.cell_type is not None:
            return group_cells(
                self.name, self.cell_type, cell_types, gpus=self.gpus.count, nodes=self.count
            )
        label = self.gpus.topology_label()
        prefix = self.name if label is None or label == CUSTOM_TOPOLOGY else label
        levels = derive_levels(self.gpus.count, self.gpus.gpu_topology(), prefix)
        return [NodeCells(levels=levels)] * self.count

    def nodes(self, cell_types: Mapping[str, CellTypeSpec] | None = None) -> tuple[Node, ...]:
        """The group's nodes, in index order, with their cells under ``cell_types``."""
        capacity = resources_of(self.resources)
        labels = dict(self.labels)
        labels[NODE_GROUP_LABEL] = self.name
        gpus: tuple[Gpu, ...] = ()
        topology: GpuTopology | None = None
        if self.gpus is not None:
            memory = self.gpus.memory_bytes()
            count = self.gpus.count
            capacity += Resources.of({GPU: count, GPU_MEMORY: count * memory})
            topology = self.gpus.gpu_topology()
            gpus = _gpus(self.gpus.model, memory, count, topology)
            labels.update(_gpu_labels(self.gpus))
        templates = {tier: IndexTemplate.parse(text) for tier, text in self.network.items()}
        shared_labels = MappingProxyType(labels)  # one read-only mapping for every node
        found = self.cells(cell_types or {})
        cells: list[NodeCells | None] = [None] * self.count if found is None else list(found)
        addresses = self._addresses()
        return tuple(
            Node(
                name=f"{self.name}-{index}",
                capacity=capacity,
                labels=shared_labels,
                taints=tuple(taint.to_domain() for taint in self.taints),
                gpus=gpus,
                gpu_topology=topology,
                network={tier: t.render(index) for tier, t in templates.items()},
                address=addresses[index],
                max_tasks=self.max_tasks,
                cells=cells[index],
            )
            for index in range(self.count)
        )


def _gpus(model: str, memory: float, count: int, topology: GpuTopology | None) -> tuple[Gpu, ...]:
    if topology is None:
        return tuple(Gpu(index=i, model=model, memory=memory) for i in range(count))
    cards = []
    for i in range(count):
        nic = topology.nearest_nic(i)
        cards.append(
            Gpu(
                index=i,
                model=model,
                memory=memory,
                numa=topology.numa[i],
                nvlink_peers=topology.nvlink_peers(i),
                nic=None if nic is None else topology.nics[nic].name,
            )
        )
    return tuple(cards)


def _gpu_labels(gpus: GpuSpec) -> dict[str, str]:
    labels = {GPU_MODEL_LABEL: gpus.model} if gpus.model else {}
    label = gpus.topology_label()
    if label:
        labels[GPU_TOPOLOGY_LABEL] = label
    return labels


class ClusterSpec(SpecModel):
    """``spec`` of a Cluster: its node groups and, for the hived plugin, its cell types."""

    node_groups: Annotated[list[NodeGroupSpec], Field(min_length=1)]
    """The cluster's nodes, as groups of identical nodes."""
    cell_types: list[CellTypeSpec] = Field(default_factory=list)
    """Cell types for the hived plugin: a hierarchy from GPUs up to nodes and beyond."""

    @model_validator(mode="after")
    def _unique_and_bounded(self) -> Self:
        seen: set[str] = set()
        for i, group in enumerate(self.node_groups):
            if group.name in seen:
                raise located(
                    f"node group {group.name!r} is defined twice, so node names "
                    f"{group.name}-0 ... would not be unique",
                    "give every node group its own name",
                    at=("nodeGroups", i, "name"),
                )
            seen.add(group.name)
        total = sum(group.count for group in self.node_groups)
        if total > MAX_NODES:
            raise located(
                f"{total} nodes is more than the limit of {MAX_NODES}",
                "split the cluster or lower the counts",
                at=("nodeGroups",),
            )
        self._cells_fit()
        return self

    def _cells_fit(self) -> None:
        by_name = check_cell_types(self.cell_types)
        for i, group in enumerate(self.node_groups):
            if group.cell_type is not None:
                assert group.gpus is not None  # the group's own check
                group_cells(
                    group.name,
                    group.cell_type,
                    by_name,
                    gpus=group.gpus.count,
                    nodes=group.count,
                    at=("nodeGroups", i, "cellType"),
                )


class ClusterDocument(SpecModel):
    """``apiVersion: phalanx/v1, kind: Cluster``."""

    api_version: Literal["phalanx/v1"] = API_VERSION
    """Always phalanx/v1."""
    kind: Literal["Cluster"] = "Cluster"
    """Always Cluster."""
    metadata: Metadata
    """The cluster's name, labels and annotations."""
    spec: ClusterSpec
    """The cluster's nodes."""

    def nodes(self) -> tuple[Node, ...]:
        """Every node of every group, group by group; names are unique."""
        cell_types = {entry.name: entry for entry in self.spec.cell_types}
        return tuple(node for group in self.spec.node_groups for node in group.nodes(cell_types))
