"""The one fragment kernel equals a plain-Python reference and the checked measure (x 1000,
unclipped)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from phalanx.engine.plugins.fgd.fragmentation import node_fragmentation
from phalanx.engine.plugins.fgd.kernel import FragmentKernel
from phalanx.engine.plugins.fgd.workload import TargetWorkload, TaskShape, model_access

SHARES = st.sampled_from([0.0, 0.1, 0.25, 0.3, 0.5, 0.6, 1.0, 2.0, 4.0, 8.0])


def _reference(
    shape: TaskShape, cpu: float, memory: float | None, cards: Sequence[int], allowed: bool
) -> int:
    """F_n(m) in milli-GPU from the definition, one node and one task type at a time."""
    free = sum(cards)
    need = round(shape.gpu * 1000)
    if not allowed or need == 0 or cpu < shape.cpu:
        return free
    if memory is not None and memory < shape.memory:
        return free
    per_card = min(need, 1000)
    if sum(1 for card in cards if card >= per_card) < max(1, need // 1000):
        return free
    return sum(card for card in cards if card < per_card)


@settings(max_examples=200, deadline=None)
@given(
    gpus=st.lists(
        st.one_of(st.just(0), st.integers(1, 999), st.integers(1, 8).map(lambda n: n * 1000)),
        min_size=1,
        max_size=6,
    ),
    nodes=st.integers(0, 12),
    slots=st.integers(0, 8),
    memory=st.booleans(),
    seed=st.integers(0, 2**16),
)
def test_kernel_equals_a_plain_python_reference_on_random_node_states(
    gpus: list[int], nodes: int, slots: int, memory: bool, seed: int
) -> None:
    rng = np.random.default_rng(seed)
    shapes = [
        TaskShape(
            cpu=float(rng.choice([0, 1000, 4000])), memory=float(rng.integers(0, 4)), gpu=g / 1000
        )
        for g in gpus
    ]
    target = TargetWorkload.of(shapes, np.full(len(shapes), 1 / len(shapes)))
    cards = rng.choice([0, 1, 100, 299, 300, 500, 999, 1000], size=(nodes, slots)).astype(np.int64)
    free_cpu = rng.choice([0.0, 999.0, 1000.0, 4000.0, 64000.0], size=nodes)
    free_memory = rng.integers(0, 4, size=nodes).astype(np.float64) if memory else None
    allowed = rng.random((nodes, len(shapes))) < 0.8
    got = FragmentKernel(target).fragments(free_cpu, cards, allowed, free_memory)
    expected = [
        [
            _reference(
                shape,
                free_cpu[n],
                None if free_memory is None else free_memory[n],
                cards[n].tolist(),
                bool(allowed[n, m]),
            )
            for m, shape in enumerate(shapes)
        ]
        for n in range(nodes)
    ]
    assert got.dtype == np.int64
    assert np.array_equal(got, np.array(expected, dtype=np.int64).reshape(nodes, len(shapes)))


@settings(max_examples=60, deadline=None)
@given(
    gpus=st.lists(SHARES, min_size=1, max_size=6),
    cpus=st.lists(st.sampled_from([0.0, 1000.0, 4000.0, 32000.0]), min_size=6, max_size=6),
    seed=st.integers(0, 2**16),
)
def test_kernel_equals_node_fragmentation(gpus: list[float], cpus: list[float], seed: int) -> None:
    shapes = [TaskShape(cpu=cpus[i], gpu=g) for i, g in enumerate(gpus)]
    target = TargetWorkload.of(shapes, np.full(len(shapes), 1 / len(shapes)))
    rng = np.random.default_rng(seed)
    cards = rng.choice([0, 100, 300, 400, 500, 600, 1000], size=(20, 8)).astype(np.int64)
    cards[:5, 4:] = 0  # 4-card nodes
    free_cpu = rng.choice([0.0, 1000.0, 3000.0, 64000.0], size=20)
    expected = node_fragmentation(
        target, free_cpu=free_cpu, free_memory=None, free_cards=cards / 1000
    )
    got = FragmentKernel(target)(free_cpu, cards)
    np.testing.assert_allclose(got, expected * 1000, atol=1e-6)


def test_equal_rows_give_bit_equal_results() -> None:
    target = TargetWorkload.of(
        [TaskShape(cpu=1000, gpu=g) for g in (0.1, 0.3, 0.7, 1, 2)], [0.3, 0.1, 0.2, 0.25, 0.15]
    )
    cards = np.array([[700, 300, 1000, 0]] * 3 + [[300, 700, 0, 1000]], dtype=np.int64)
    got = FragmentKernel(target)(np.full(4, 8000.0), cards)
    assert got[0] == got[1] == got[2] == got[3]  # same multiset of cards, any order


def test_kernel_with_gpu_models_equals_node_fragmentation_with_model_access() -> None:
    shapes = [
        TaskShape(cpu=1000, gpu=0.5, gpu_models=("T4",)),
        TaskShape(cpu=1000, gpu=1, gpu_models=("P100", "T4")),
        TaskShape(cpu=1000, gpu=0.3),
    ]
    target = TargetWorkload.of(shapes, [0.5, 0.3, 0.2])
    models = ["T4", "P100", "V100", None]
    allowed = model_access(target, models)
    assert allowed.tolist() == [
        [True, True, True],
        [False, True, True],
        [False, False, True],
        [False, False, True],
    ]
    cards = np.array([[1000, 400, 0, 0], [600, 1000, 0, 0], [1000, 1000, 0, 0], [0, 0, 0, 0]])
    free_cpu = np.full(4, 8000.0)
    expected = node_fragmentation(
        target, free_cpu=free_cpu, free_memory=None, free_cards=cards / 1000, allowed=allowed
    )
    got = FragmentKernel(target)(free_cpu, cards.astype(np.int64), allowed)
    np.testing.assert_allclose(got, expected * 1000, atol=1e-6)
    # the V100 node: only the 0.3 share (p 0.2) may use it, and it can use all 2000 free
    assert got[2] == 0.8 * 2000


def test_a_task_shape_keeps_its_gpu_models_sorted_and_unique() -> None:
    assert TaskShape(gpu=1, gpu_models=("T4", "P100", "T4")).gpu_models == ("P100", "T4")
    assert TaskShape(gpu=1, gpu_models=("T4",)) != TaskShape(gpu=1)


def test_kernel_with_free_memory_equals_node_fragmentation_with_memory() -> None:
    gib = 2.0**30
    shapes = [TaskShape(cpu=1000, memory=16 * gib, gpu=0.5), TaskShape(cpu=1000, gpu=1)]
    target = TargetWorkload.of(shapes, [0.6, 0.4])
    cards = np.array([[1000, 1000], [1000, 1000], [500, 0]], dtype=np.int64)
    free_cpu = np.full(3, 8000.0)
    free_memory = np.array([64 * gib, 8 * gib, 64 * gib])
    expected = node_fragmentation(
        target, free_cpu=free_cpu, free_memory=free_memory, free_cards=cards / 1000
    )
    got = FragmentKernel(target)(free_cpu, cards, free_memory=free_memory)
    np.testing.assert_allclose(got, expected * 1000, atol=1e-6)
    # 8 GiB free: the 0.5 share (16 GiB) fits nowhere there, so 0.6 of 2000 is a fragment
    assert got[1] == 0.6 * 2000
    assert FragmentKernel(target)(free_cpu, cards)[1] == 0  # memory unchecked: no fragment
