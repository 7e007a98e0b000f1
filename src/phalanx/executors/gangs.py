"""The rendezvous of each job's gang across starts: its ports, and each start's variables.

A gang may start in several calls (a role that ``dependsOn`` another starts once that
one runs) and on several nodes. ``GangPlanner`` remembers, per job, the port reserved
for every member and the ``MASTER_PORT``, so that the tasks started first and those
started later agree on the host lists; an executor tells it which of the job's tasks
are live (their placements) and when the job has none left (``forget``).

Ports are asked of the node that will use them (``free_ports(node, count)``): each
member's on its own node, ``MASTER_PORT`` on the rank-0 member's node. Addresses come
from the executor (``address_of(node, declared)``), as the rendezvous speaks them.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from phalanx.executors.launch import GangMember, TaskLaunch
from phalanx.executors.rendezvous import (
    Placement,
    gang_placements,
    rank_order,
    rendezvous_env,
    torchrun_env,
)

Slot = tuple[str, int]  # (role, index)


@dataclass(frozen=True, slots=True, kw_only=True)
class PlannedStart:
    """One task ready to start: its launch, where its peers reach it, and the rendezvous
    variables to put into its environment."""

    launch: TaskLaunch
    placement: Placement
    env: Mapping[str, str]


def _with_torchrun(job: str, launch: TaskLaunch, env: dict[str, str]) -> dict[str, str]:
    """``env``, plus torchrun's rendezvous for a replica of an elastic role."""
    if launch.elastic_nodes is None:
        return env
    return {**env, **torchrun_env(job, env, nodes=launch.elastic_nodes)}


class GangPlanner:
    """Plans the rendezvous of each job's starts (see the module docstring).

    ``address_of(node, declared)`` is where peers reach a task on ``node`` (``declared``:
    the node's declared address, or None); ``free_ports(node, count)`` is ``count``
    distinct ports that were free on ``node`` a moment ago. Not thread-safe."""

    def __init__(
        self,
        *,
        address_of: Callable[[str, str | None], str],
        free_ports: Callable[[str, int], Sequence[int]],
    ) -> None:
        self._address_of = address_of
        self._free_ports = free_ports
        self._ports: dict[str, dict[Slot, int]] = {}
        self._master_ports: dict[str, int] = {}

    def plan(
        self, job: str, launches: Sequence[TaskLaunch], live: Mapping[Slot, Placement]
    ) -> list[PlannedStart]:
        """The starts of ``launches`` (tasks of ``job``, at least one), in their order.

        ``live`` holds the placements of the job's tasks running now. Every member of
        the gang (``launches[0].gang``, the launches and ``live``) gets a port now,
        those that start later too. Raises what ``address_of`` or ``free_ports`` raise
        (``InvalidInput`` among them); nothing is reserved for the job then unless it
        was before."""
        members = {
            (launch.role, launch.index): GangMember(
                role=launch.role, index=launch.index, node=launch.node, address=launch.address
            )
            for launch in launches
        }
        for member in launches[0].gang:
            members.setdefault((member.role, member.index), member)
        reserved = dict(self._ports.get(job, {}))
        wanted = [slot for slot in members if slot not in live and slot not in reserved]
        by_node: dict[str, list[Slot]] = {}
        for slot in wanted:
            by_node.setdefault(members[slot].node, []).append(slot)
        master_port = self._master_ports.get(job, 0)
        master_node = None
        if job not in self._master_ports:  # asked for with that node's others: all distinct
            master_node = self._rank0_node(launches, members, live)
            by_node.setdefault(master_node, [])
        for node, slots in by_node.items():
            ports = self._free_ports(node, len(slots) + (node == master_node))
            reserved.update(zip(slots, ports, strict=False))
            if node == master_node:
                master_port = ports[-1]
        gpus = {(launch.role, launch.index): launch.gpus for launch in launches}
        placed = gang_placements(
            [m for slot, m in members.items() if slot not in live or slot in gpus],
            resolve=lambda member: self._address_of(member.node, member.address),
            ports=reserved,
            gpus=gpus,
        )
        placements = {(p.role, p.index): p for p in placed}
        peers = [p for slot, p in live.items() if slot not in placements]
        envs = rendezvous_env(
            job,
            [*peers, *placements.values()],
            master_port=master_port,
            roles=launches[0].job_roles,
        )
        self._ports[job] = reserved
        self._master_ports[job] = master_port
        return [
            PlannedStart(
                launch=launch,
                placement=placements[launch.role, launch.index],
                env=_with_torchrun(job, launch, envs[launch.role, launch.index]),
            )
            for launch in launches
        ]

    def forget(self, job: str) -> None:
        """Drop what is reserved for ``job`` (none of its tasks is live or starting)."""
        self._ports.pop(job, None)
        self._master_ports.pop(job, None)

    @staticmethod
    def _rank0_node(
        launches: Sequence[TaskLaunch],
        members: Mapping[Slot, GangMember],
        live: Mapping[Slot, Placement],
    ) -> str:
        """The node of the gang's rank-0 task, where ``MASTER_PORT`` must be free."""
        nodes = {slot: member.node for slot, member in members.items()}
        nodes.update({slot: placement.node for slot, placement in live.items()})
        ranked = rank_order(
            [Placement(role=r, index=i, node=n, host="", port=0) for (r, i), n in nodes.items()],
            launches[0].job_roles,
        )
        return ranked[0].node
