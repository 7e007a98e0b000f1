"""The rendezvous environment: every injected variable, and the free-port helper."""

from __future__ import annotations

import json
import socket

import pytest

from phalanx.domain.errors import InvalidInput
from phalanx.executors.launch import GangMember
from phalanx.executors.rendezvous import (
    Placement,
    endpoint,
    free_ports,
    gang_placements,
    hostfile_text,
    hosts_variable,
    rank_order,
    rendezvous_env,
)


def place(
    role: str,
    index: int,
    *,
    node: str = "n0",
    host: str = "10.0.0.1",
    port: int = 2000,
    gpus: tuple[int, ...] = (),
) -> Placement:
    return Placement(role=role, index=index, node=node, host=host, port=port, gpus=gpus)


def master_worker() -> list[Placement]:
    """One master on n0, three workers: two on n1, one on n0. Given out of order on purpose."""
    return [
        place("worker", 1, node="n1", host="10.0.0.2", port=3001, gpus=(2, 3)),
        place("master", 0, node="n0", host="10.0.0.1", port=3000, gpus=(0,)),
        place("worker", 0, node="n1", host="10.0.0.2", port=3002, gpus=(0, 1)),
        place("worker", 2, node="n0", host="10.0.0.1", port=3003),
    ]


def env_of(role: str, index: int) -> dict[str, str]:
    envs = rendezvous_env("bert", master_worker(), master_port=29500, roles=("master", "worker"))
    return envs[(role, index)]


def test_job_role_and_index_name_the_task() -> None:
    env = env_of("worker", 2)
    assert (env["PHALANX_JOB"], env["PHALANX_ROLE"], env["PHALANX_INDEX"]) == (
        "bert",
        "worker",
        "2",
    )


def test_world_size_counts_every_task() -> None:
    envs = rendezvous_env("bert", master_worker(), master_port=29500)
    assert {env["WORLD_SIZE"] for env in envs.values()} == {"4"}


def test_rank_follows_role_order_then_index() -> None:
    envs = rendezvous_env("bert", master_worker(), master_port=29500, roles=("master", "worker"))
    ranks = {key: env["RANK"] for key, env in envs.items()}
    assert ranks == {("master", 0): "0", ("worker", 0): "1", ("worker", 1): "2", ("worker", 2): "3"}


def test_listed_roles_rank_before_unlisted_ones_whatever_the_input_order() -> None:
    envs = rendezvous_env("bert", master_worker(), master_port=29500, roles=("worker",))
    assert envs[("worker", 0)]["RANK"] == "0" and envs[("master", 0)]["RANK"] == "3"
    # Without a role list, the first role to appear ranks first.
    envs = rendezvous_env("bert", master_worker(), master_port=29500)
    assert envs[("worker", 0)]["RANK"] == "0"


def test_local_rank_counts_the_jobs_tasks_on_the_same_node() -> None:
    envs = rendezvous_env("bert", master_worker(), master_port=29500, roles=("master", "worker"))
    local = {key: env["LOCAL_RANK"] for key, env in envs.items()}
    # n0 holds master-0 (rank 0) and worker-2 (rank 3); n1 holds worker-0 and worker-1.
    assert local == {("master", 0): "0", ("worker", 2): "1", ("worker", 0): "0", ("worker", 1): "1"}


def test_master_address_is_rank_zeros_host_and_the_port_is_the_given_one() -> None:
    env = env_of("worker", 1)
    assert (env["MASTER_ADDR"], env["MASTER_PORT"]) == ("10.0.0.1", "29500")


def test_hosts_per_role_list_host_and_port_in_index_order() -> None:
    env = env_of("master", 0)
    assert env["PHALANX_HOSTS_MASTER"] == "10.0.0.1:3000"
    assert env["PHALANX_HOSTS_WORKER"] == "10.0.0.2:3002,10.0.0.2:3001,10.0.0.1:3003"


def test_hosts_variable_upper_cases_and_replaces_non_alphanumerics() -> None:
    assert hosts_variable("eval-worker.v2") == "PHALANX_HOSTS_EVAL_WORKER_V2"
    envs = rendezvous_env("j", [place("eval-worker", 0)], master_port=1)
    assert envs[("eval-worker", 0)]["PHALANX_HOSTS_EVAL_WORKER"] == "10.0.0.1:2000"


def test_cuda_visible_devices_lists_the_tasks_gpus() -> None:
    assert env_of("worker", 1)["CUDA_VISIBLE_DEVICES"] == "2,3"
    assert env_of("master", 0)["CUDA_VISIBLE_DEVICES"] == "0"


def test_cuda_visible_devices_is_empty_not_missing_without_gpus() -> None:
    assert env_of("worker", 2)["CUDA_VISIBLE_DEVICES"] == ""


def test_no_tf_config_without_a_ps_or_chief_role() -> None:
    assert "TF_CONFIG" not in env_of("worker", 0)


def test_tf_config_for_a_multi_worker_job_with_a_chief() -> None:
    placements = [place("worker", 0, host="h1", port=2223), place("chief", 0, host="h0")]
    envs = rendezvous_env("tf", placements, master_port=1234, roles=("chief", "worker"))
    config = json.loads(envs[("worker", 0)]["TF_CONFIG"])
    assert config == {
        "cluster": {"chief": ["h0:2000"], "worker": ["h1:2223"]},
        "task": {"type": "worker", "index": 0},
    }
    assert envs[("chief", 0)]["RANK"] == "0"


def test_tf_config_for_a_parameter_server_job() -> None:
    placements = [
        place("ps", 0, host="h0", port=2222),
        place("worker", 0, host="h1", port=2223),
        place("worker", 1, host="h2", port=2224),
        place("ps", 1, host="h3", port=2225),
    ]
    envs = rendezvous_env("tf", placements, master_port=1234, roles=("ps", "worker"))
    config = json.loads(envs[("worker", 1)]["TF_CONFIG"])
    assert config == {
        "cluster": {"ps": ["h0:2222", "h3:2225"], "worker": ["h1:2223", "h2:2224"]},
        "task": {"type": "worker", "index": 1},
    }
    assert json.loads(envs[("ps", 1)]["TF_CONFIG"])["task"] == {"type": "ps", "index": 1}
    assert list(config["cluster"]) == ["ps", "worker"]  # role order is kept


def test_rendezvous_is_deterministic_whatever_the_input_order() -> None:
    forward = rendezvous_env("bert", master_worker(), master_port=1, roles=("master", "worker"))
    backward = rendezvous_env(
        "bert", list(reversed(master_worker())), master_port=1, roles=("master", "worker")
    )
    assert forward == backward


def test_rank_order_sorts_by_role_then_index() -> None:
    ordered = rank_order(master_worker(), ("master", "worker"))
    assert [(p.role, p.index) for p in ordered] == [
        ("master", 0),
        ("worker", 0),
        ("worker", 1),
        ("worker", 2),
    ]


def test_empty_job_has_no_environment() -> None:
    assert rendezvous_env("j", [], master_port=1) == {}


@pytest.mark.parametrize(
    ("placements", "port", "field"),
    [
        ([place("w", 0), place("w", 0)], 1, "placements"),
        ([place("w", 0)], 0, "master_port"),
        ([place("w", 0, port=70000)], 1, "w[0].port"),
        ([place("a-b", 0), place("a_b", 0)], 1, "roles"),
    ],
)
def test_bad_placements_are_refused_naming_the_field(
    placements: list[Placement], port: int, field: str
) -> None:
    with pytest.raises(InvalidInput) as error:
        rendezvous_env("j", placements, master_port=port)
    assert error.value.field == field


def spread_gang() -> list[GangMember]:
    """master-0 on n0, worker-0 on n1, worker-1 on n2 (which declares no address)."""
    return [
        GangMember(role="worker", index=0, node="n1", address="10.0.0.2"),
        GangMember(role="worker", index=1, node="n2"),
        GangMember(role="master", index=0, node="n0", address="10.0.0.1"),
    ]


GANG_PORTS = {("master", 0): 3000, ("worker", 0): 3001, ("worker", 1): 3002}


def declared_or_known(member: GangMember) -> str:
    """A multi-machine executor: the declared address, else its own record of the node."""
    return member.address or {"n2": "gpu-2.lab"}[member.node]


def test_gang_placements_put_each_member_at_the_address_the_executor_resolves() -> None:
    placed = gang_placements(
        spread_gang(), resolve=declared_or_known, ports=GANG_PORTS, gpus={("worker", 0): (1, 2)}
    )
    assert [(p.role, p.index, p.node, p.host, p.port, p.gpus) for p in placed] == [
        ("worker", 0, "n1", "10.0.0.2", 3001, (1, 2)),
        ("worker", 1, "n2", "gpu-2.lab", 3002, ()),
        ("master", 0, "n0", "10.0.0.1", 3000, ()),
    ]


def test_master_addr_is_the_rank_zero_tasks_node_address() -> None:
    placed = gang_placements(spread_gang(), resolve=declared_or_known, ports=GANG_PORTS)
    envs = rendezvous_env("bert", placed, master_port=29500, roles=("master", "worker"))
    assert {env["MASTER_ADDR"] for env in envs.values()} == {"10.0.0.1"}  # master-0 on n0
    assert envs[("worker", 1)]["PHALANX_HOSTS_WORKER"] == "10.0.0.2:3001,gpu-2.lab:3002"
    assert envs[("worker", 1)]["PHALANX_HOSTS_MASTER"] == "10.0.0.1:3000"
    # Another role order makes worker-0 rank 0: the address follows it to n1.
    envs = rendezvous_env("bert", placed, master_port=29500, roles=("worker", "master"))
    assert {env["MASTER_ADDR"] for env in envs.values()} == {"10.0.0.2"}


def test_an_executor_on_one_host_puts_every_node_at_its_host() -> None:
    placed = gang_placements(spread_gang(), resolve=lambda _: "127.0.0.1", ports=GANG_PORTS)
    envs = rendezvous_env("bert", placed, master_port=29500, roles=("master", "worker"))
    assert {env["MASTER_ADDR"] for env in envs.values()} == {"127.0.0.1"}
    assert envs[("master", 0)]["PHALANX_HOSTS_WORKER"] == "127.0.0.1:3001,127.0.0.1:3002"


def test_tf_config_names_each_tasks_node_address_ipv6_in_brackets() -> None:
    members = [
        GangMember(role="ps", index=0, node="n0", address="fd00::1"),
        GangMember(role="worker", index=0, node="n1", address="10.0.0.2"),
    ]
    placed = gang_placements(
        members, resolve=declared_or_known, ports={("ps", 0): 2222, ("worker", 0): 2223}
    )
    env = rendezvous_env("tf", placed, master_port=1234, roles=("ps", "worker"))[("worker", 0)]
    assert json.loads(env["TF_CONFIG"])["cluster"] == {
        "ps": ["[fd00::1]:2222"],
        "worker": ["10.0.0.2:2223"],
    }
    assert env["PHALANX_HOSTS_PS"] == "[fd00::1]:2222"
    assert env["MASTER_ADDR"] == "fd00::1"  # an address alone is not bracketed


def test_endpoint_brackets_ipv6_addresses_only() -> None:
    assert endpoint("fd00::7", 80) == "[fd00::7]:80"
    assert endpoint("10.0.0.7", 80) == "10.0.0.7:80"
    assert endpoint("gpu-7.lab", 80) == "gpu-7.lab:80"


def test_a_gang_member_without_a_port_is_refused() -> None:
    with pytest.raises(InvalidInput) as error:
        gang_placements(spread_gang(), resolve=declared_or_known, ports={("master", 0): 1})
    assert error.value.field == "ports" and "worker[0]" in str(error.value)


def test_free_ports_are_distinct_and_bindable() -> None:
    ports = free_ports(5)
    assert len(set(ports)) == 5
    for port in ports:
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
            sock.bind(("127.0.0.1", port))


def test_free_ports_of_none_is_empty_and_negative_is_refused() -> None:
    assert free_ports(0) == ()
    with pytest.raises(InvalidInput):
        free_ports(-1)


def test_a_hostfile_lists_the_roles_hosts_in_rank_order_with_their_slots() -> None:
    placements = [
        place("launcher", 0, node="n0", host="10.0.0.1", port=3000),
        place("worker", 1, node="n2", host="fd00::7", port=3001),
        place("worker", 0, node="n1", host="10.0.0.2", port=3002),
    ]
    envs = rendezvous_env("mpi", placements, master_port=2999, roles=("launcher", "worker"))
    text = hostfile_text(envs[("launcher", 0)], "worker", 2)
    assert text == "10.0.0.2 slots=2\nfd00::7 slots=2\n"


def test_a_hostfile_of_a_role_without_tasks_is_refused() -> None:
    envs = rendezvous_env("mpi", [place("launcher", 0)], master_port=2999)
    with pytest.raises(InvalidInput) as caught:
        hostfile_text(envs[("launcher", 0)], "worker", 1)
    assert caught.value.field == "hostfile.role"
