"""binpack and spread: where identical tasks land, and why it matters for large gangs."""

from __future__ import annotations

from phalanx.engine import SchedulerConfig
from tests.builders import bound, config, cycle, make_job, make_node, make_nodes


def _cfg(scorer: str | tuple[str, dict[str, object]]) -> SchedulerConfig:
    return config(["allocate"], ["priority", "gang"], ["drf", "predicates", scorer])


BINPACK = _cfg("binpack")
SPREAD = _cfg("spread")


def test_binpack_fills_the_fullest_node_that_fits() -> None:
    running = make_job("r", gpus=4, running_on=["n1"])

    decisions = cycle(make_nodes(3), [running, make_job("j", gpus=1, replicas=4)], BINPACK)

    assert bound(decisions, "j") == ["n1", "n1", "n1", "n1"]


def test_spread_prefers_the_emptiest_node() -> None:
    running = make_job("r", gpus=4, running_on=["n1"])

    decisions = cycle(make_nodes(3), [running, make_job("j", gpus=1, replicas=3)], SPREAD)

    assert bound(decisions, "j") == ["n0", "n2", "n0"]  # alternating over the empty nodes


def test_binpack_keeps_a_whole_node_free_for_a_later_8_gpu_task() -> None:
    small = [make_job(f"s{i}", gpus=2, created=i) for i in range(4)]
    big = make_job("big", gpus=8, created=10)

    packed = cycle(make_nodes(2), [*small, big], BINPACK)
    spread = cycle(make_nodes(2), [*small, big], SPREAD)

    assert {n for s in small for n in bound(packed, s.name)} == {"n0"}
    assert bound(packed, "big") == ["n1"]
    assert {n for s in small for n in bound(spread, s.name)} == {"n0", "n1"}
    assert bound(spread, "big") == []  # fragmented: 4 GPUs free on each node


def test_gpu_weighs_most_by_default() -> None:
    # n0 is busy on CPU but has idle GPUs; n1 has GPUs in use and idle CPU
    nodes = [make_node("n0", cpu=16), make_node("n1", cpu=16)]
    running = [
        make_job("cpu-heavy", gpus=0, cpu=12, running_on=["n0"]),
        make_job("gpu-user", gpus=4, cpu=1, running_on=["n1"]),
    ]
    job = make_job("j", gpus=1, cpu=1)

    assert bound(cycle(nodes, [*running, job], BINPACK), "j") == ["n1"]
    # weights can say otherwise: CPU only
    cpu_only = _cfg(("binpack", {"gpu": 0, "memory": 0, "cpu": 1}))
    assert bound(cycle(nodes, [*running, job], cpu_only), "j") == ["n0"]


def test_placement_is_deterministic() -> None:
    jobs = [make_job(f"j{i}", gpus=1 + i % 3, replicas=1 + i % 2, created=i) for i in range(12)]

    first = cycle(make_nodes(4), jobs, SPREAD)
    second = cycle(make_nodes(4), jobs, SPREAD)

    assert first == second
    assert len(first.binds) > 0
