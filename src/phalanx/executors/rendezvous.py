"""Rendezvous: the environment that lets a job's tasks find each other.

``rendezvous_env`` is pure: the same placements give the same variables. It speaks the
conventions frameworks already read: ``torch.distributed`` (``RANK``, ``WORLD_SIZE``,
``LOCAL_RANK``, ``MASTER_ADDR``, ``MASTER_PORT``), TensorFlow's parameter-server
training (``TF_CONFIG``, as KubeDL's and Kubeflow's TFJob set it) and CUDA
(``CUDA_VISIBLE_DEVICES``), plus phalanx's own ``PHALANX_*`` names.

Every address in it is the address of the node that runs the task, as the executor
resolved it (``gang_placements``): ``MASTER_ADDR`` is the rank-0 task's node's; the host
lists and ``TF_CONFIG`` name each task's node's. An IPv6 address is written in brackets
where a port follows it (``[fd00::7]:2222``), as gRPC and ``torch.distributed`` read it.
"""

from __future__ import annotations

import ipaddress
import json
import re
import socket
from collections.abc import Callable, Mapping, Sequence
from contextlib import ExitStack
from dataclasses import dataclass

from phalanx.domain.errors import InvalidInput
from phalanx.executors.launch import GangMember

#: The role whose presence marks a TensorFlow parameter-server job (TF_CONFIG is set).
PS_ROLE = "ps"
#: The roles whose presence marks a TensorFlow job (TF_CONFIG is set): a parameter
#: server, or a chief (multi-worker training, as a Kubeflow TFJob's Chief).
TF_ROLES = frozenset({PS_ROLE, "chief"})

_NOT_ALNUM = re.compile(r"[^A-Za-z0-9]")


@dataclass(frozen=True, slots=True, kw_only=True)
class Placement:
    """Where one task of a job runs: its node, and the address (``host``: its node's, as
    the executor resolved it) and port its peers reach it on."""

    role: str
    index: int
    node: str
    host: str
    port: int
    gpus: tuple[int, ...] = ()


def gang_placements(
    members: Sequence[GangMember],
    *,
    resolve: Callable[[GangMember], str],
    ports: Mapping[tuple[str, int], int],
    gpus: Mapping[tuple[str, int], tuple[int, ...]] | None = None,
) -> list[Placement]:
    """One ``Placement`` per member, in the given order: its host is ``resolve(member)``
    (the executor's answer to "where do peers reach this member's node"), its port
    ``ports[(role, index)]``, its GPUs ``gpus[(role, index)]`` (none when not given).
    Raises ``InvalidInput`` for a member without a port."""
    found = []
    for member in members:
        slot = (member.role, member.index)
        if slot not in ports:
            raise InvalidInput(
                f"no port for {member.role}[{member.index}]",
                field="ports",
                fix="reserve a port for every member of the gang",
            )
        found.append(
            Placement(
                role=member.role,
                index=member.index,
                node=member.node,
                host=resolve(member),
                port=ports[slot],
                gpus=(gpus or {}).get(slot, ()),
            )
        )
    return found


def endpoint(host: str, port: int) -> str:
    """``host:port``, with an IPv6 address in brackets (``[fd00::7]:2222``)."""
    try:
        if isinstance(ipaddress.ip_address(host), ipaddress.IPv6Address):
            return f"[{host}]:{port}"
    except ValueError:
        pass  # a host name
    return f"{host}:{port}"


def hosts_variable(role: str) -> str:
    """``PHALANX_HOSTS_<ROLE>``: the role upper-cased, anything not alphanumeric as ``_``."""
    return "PHALANX_HOSTS_" + _NOT_ALNUM.sub("_", role).upper()


def rank_order(placements: Sequence[Placement], roles: Sequence[str] = ()) -> list[Placement]:
    """``placements`` in rank order: by role (``roles`` first, then first appearance), then index."""
    order = {
        role: i for i, role in enumerate(dict.fromkeys([*roles, *(p.role for p in placements)]))
    }
    return sorted(placements, key=lambda p: (order[p.role], p.index))


def rendezvous_env(
    job: str, placements: Sequence[Placement], *, master_port: int, roles: Sequence[str] = ()
) -> dict[tuple[str, int], dict[str, str]]:
    """Each task's injected variables, keyed by ``(role, index)``.

    Ranks are global over ``placements``, ordered by role (``roles`` gives the job's
    role order; roles not listed follow in order of first appearance) then index.
    ``MASTER_ADDR`` is rank 0's host (its node's address); ``PHALANX_HOST`` and
    ``PHALANX_PORT`` where the task is reached (its node's address, and the port reserved
    for it there: its entry in its role's host list); ``LOCAL_RANK`` counts this job's tasks on the same
    node in rank order. ``TF_CONFIG`` is set only when the job has a role named ``ps`` or
    ``chief`` (``TF_ROLES``).
    Raises ``InvalidInput`` for a task placed twice, a bad port, or two role names that
    map to the same ``PHALANX_HOSTS_*`` variable.
    """
    ranked = rank_order(placements, roles)
    _check(ranked, master_port)
    by_role: dict[str, list[str]] = {}
    for p in ranked:
        by_role.setdefault(p.role, []).append(endpoint(p.host, p.port))
    shared = {
        "PHALANX_JOB": job,
        "WORLD_SIZE": str(len(ranked)),
        "MASTER_ADDR": ranked[0].host if ranked else "",
        "MASTER_PORT": str(master_port),
        **{hosts_variable(role): ",".join(hosts) for role, hosts in by_role.items()},
    }
    local_ranks: dict[str, int] = {}
    result: dict[tuple[str, int], dict[str, str]] = {}
    for rank, p in enumerate(ranked):
        local_rank = local_ranks.get(p.node, 0)
        local_ranks[p.node] = local_rank + 1
        env = {
            **shared,
            "PHALANX_ROLE": p.role,
            "PHALANX_INDEX": str(p.index),
            "PHALANX_HOST": p.host,
            "PHALANX_PORT": str(p.port),
            "RANK": str(rank),
            "LOCAL_RANK": str(local_rank),
            # Empty, not unset: an unset variable would let CUDA see every device.
            "CUDA_VISIBLE_DEVICES": ",".join(str(gpu) for gpu in p.gpus),
        }
        if TF_ROLES & by_role.keys():
            env["TF_CONFIG"] = json.dumps(
                {"cluster": by_role, "task": {"type": p.role, "index": p.index}},
                separators=(",", ":"),
            )
        result[(p.role, p.index)] = env
    return result


#: Restarts of the workers torchrun allows: a replica leaving (a shrink) costs one.
ELASTIC_RESTARTS = 1000
#: Seconds torchrun waits for more replicas once its minimum has joined a round.
LAST_CALL_SECONDS = 5


def torchrun_env(job: str, env: Mapping[str, str], *, nodes: tuple[int, int]) -> dict[str, str]:
    """The variables torchrun (``torch.distributed.run``) reads as its defaults, for one
    replica of an elastic role in rendezvous mode whose rendezvous ``env`` gave it.

    ``PET_NNODES`` is the role's range (``min:max``), ``PET_RDZV_BACKEND`` ``c10d``, the
    endpoint the rank-0 replica's ``MASTER_ADDR:MASTER_PORT``, where that replica hosts
    the rendezvous store (``is_host``; every other one joins it), ``PET_RDZV_ID`` the
    job. The job's replicas may then join and leave while it runs: torchrun re-forms
    the world at each change and restarts its workers, who resume from their checkpoint.
    """
    low, high = nodes
    host = env["RANK"] == "0"
    return {
        "PET_NNODES": f"{low}:{high}",
        "PET_RDZV_BACKEND": "c10d",
        "PET_RDZV_ENDPOINT": endpoint(env["MASTER_ADDR"], int(env["MASTER_PORT"])),
        "PET_RDZV_ID": job,
        "PET_RDZV_CONF": f"is_host={int(host)},last_call_timeout={LAST_CALL_SECONDS}",
        "PET_MAX_RESTARTS": str(ELASTIC_RESTARTS),
        # torchrun's shared store keeps the first round's address: a replica that joins
        # a later round would wait for it forever. Each round publishes its own.
        "TORCH_DISABLE_SHARE_RDZV_TCP_STORE": "1",
    }


def _check(ranked: Sequence[Placement], master_port: int) -> None:
    for port, name in [
        (master_port, "master_port"),
        *((p.port, f"{p.role}[{p.index}].port") for p in ranked),
    ]:
        if not 1 <= port <= 65535:
            raise InvalidInput(f"{port} is not a TCP port", field=name, fix="use 1..65535")
    seen: set[tuple[str, int]] = set()
    for p in ranked:
        if (p.role, p.index) in seen:
            raise InvalidInput(
                f"task {p.role}[{p.index}] is placed twice",
                field="placements",
                fix="give one placement per task",
            )
        seen.add((p.role, p.index))
    variables: dict[str, str] = {}
    for role in dict.fromkeys(p.role for p in ranked):
        other = variables.setdefault(hosts_variable(role), role)
        if other != role:
            raise InvalidInput(
                f"roles {other!r} and {role!r} both map to {hosts_variable(role)}",
                field="roles",
                fix="rename one so they differ in letters or digits",
            )


def hostfile_text(injected: Mapping[str, str], role: str, slots: int) -> str:
    """An MPI hostfile of ``role``'s tasks: one ``host slots=N`` line per task, in rank
    order, each naming its node's address as the rendezvous gave it (``injected`` is a
    task's ``rendezvous_env``, whose ``PHALANX_HOSTS_<ROLE>`` lists them). Raises
    ``InvalidInput`` when the rendezvous has no task of ``role``."""
    hosts = injected.get(hosts_variable(role))
    if not hosts:
        raise InvalidInput(
            f"the job has no placed task of role {role!r} to list in the hostfile",
            field="hostfile.role",
            fix="name a role of the same job in hostfile.role",
        )
    lines = []
    for written in hosts.split(","):
        host = written.rpartition(":")[0]
        lines.append(f"{host.removeprefix('[').removesuffix(']')} slots={slots}\n")
    return "".join(lines)


def free_ports(count: int, host: str = "127.0.0.1") -> tuple[int, ...]:
    """``count`` distinct TCP ports that were free on ``host`` a moment ago.

    All sockets are held open until every port is chosen, so the ports differ. Another
    process may still take one before the task binds it; frameworks report that as
    "address in use" and the task fails, which the controller's retry covers.
    """
    if count < 0:
        raise InvalidInput(f"{count} is negative", field="count", fix="ask for 0 or more ports")
    with ExitStack() as stack:
        ports = []
        for _ in range(count):
            sock = stack.enter_context(socket.socket(socket.AF_INET, socket.SOCK_STREAM))
            sock.bind((host, 0))
            ports.append(int(sock.getsockname()[1]))
        return tuple(ports)
