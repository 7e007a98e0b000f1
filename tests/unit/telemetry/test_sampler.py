"""The sampler: readings attributed to tasks, the absent node said once, process trees."""

from __future__ import annotations

import ctypes.util
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from phalanx.domain.errors import InvalidInput
from phalanx.telemetry import sampler as sampler_module
from phalanx.telemetry.readings import CardReading, NodeSample, ProcessUse, TaskCards, TaskGpuUse
from phalanx.telemetry.recorded import MIB, RecordedNvml
from phalanx.telemetry.sampler import (
    DEFAULT_INTERVAL,
    GpuSampler,
    attribute,
    process_tree,
    process_trees,
)

GIB = 1 << 30
HAS_NVML = ctypes.util.find_library("nvidia-ml") is not None


def card(index: int = 0, **fields: Any) -> CardReading:
    values: dict[str, Any] = {"memory_total": 80 * GIB, "memory_used": 0, "utilisation": 0.0}
    return CardReading(index=index, **(values | fields))


def task(name: str, *gpus: int, pids: tuple[int, ...] = ()) -> TaskCards:
    return TaskCards(job="j", task=name, gpus=gpus, pids=frozenset(pids))


def use(name: str, gpus: tuple[int, ...], utilisation: float, memory: int) -> TaskGpuUse:
    return TaskGpuUse(job="j", task=name, gpus=gpus, utilisation=utilisation, memory=memory)


# -- attribution -------------------------------------------------------------------------


def test_a_card_held_alone_counts_whole() -> None:
    cards = [card(0, utilisation=93.0, memory_used=60 * GIB), card(1, utilisation=40.0)]
    assert attribute(cards, [task("a", 0), task("b", 1)]) == (
        use("a", (0,), 93.0, 60 * GIB),
        use("b", (1,), 40.0, 0),
    )


def test_a_task_on_several_cards_has_their_mean_utilisation_and_summed_memory() -> None:
    cards = [
        card(0, utilisation=90.0, memory_used=50 * GIB),
        card(1, utilisation=70.0, memory_used=30 * GIB),
    ]
    assert attribute(cards, [task("a", 0, 1)]) == (use("a", (0, 1), 80.0, 80 * GIB),)


def test_a_shared_card_gives_each_task_its_processes_figures() -> None:
    shared = card(
        2,
        utilisation=75.0,
        memory_used=30 * GIB,
        processes=(
            ProcessUse(pid=11, memory=20 * GIB, utilisation=50.0),
            ProcessUse(pid=12, memory=2 * GIB, utilisation=10.0),
            ProcessUse(pid=21, memory=6 * GIB, utilisation=15.0),
        ),
    )
    tasks = [task("a", 2, pids=(10, 11, 12)), task("b", 2, pids=(20, 21))]
    assert attribute([shared], tasks) == (
        use("a", (2,), 60.0, 22 * GIB),
        use("b", (2,), 15.0, 6 * GIB),
    )


def test_a_shared_card_without_per_process_figures_is_split_evenly() -> None:
    """NVML lists no process's memory (MIG, WDDM) and samples none: each task gets the
    card's used memory split evenly, and the card's utilisation."""
    shared = card(
        0,
        utilisation=64.0,
        memory_used=30 * GIB,
        processes=(ProcessUse(pid=11, memory=None), ProcessUse(pid=21, memory=None)),
    )
    tasks = [task("a", 0, pids=(11,)), task("b", 0, pids=(21,)), task("c", 0, pids=(31,))]
    assert attribute([shared], tasks) == (
        use("a", (0,), 64.0, 10 * GIB),
        use("b", (0,), 64.0, 10 * GIB),
        use("c", (0,), 64.0, 10 * GIB),
    )


def test_a_shared_card_whose_processes_are_nobodys_is_split_evenly() -> None:
    """NVML's pids match no task's (another pid namespace): nothing is known per task."""
    shared = card(
        0, utilisation=50.0, memory_used=8 * GIB, processes=(ProcessUse(pid=999, memory=GIB),)
    )
    tasks = [task("a", 0, pids=(11,)), task("b", 0, pids=(21,))]
    assert attribute([shared], tasks) == (
        use("a", (0,), 50.0, 4 * GIB),
        use("b", (0,), 50.0, 4 * GIB),
    )


def test_an_idle_task_on_a_sampled_shared_card_uses_nothing() -> None:
    shared = card(
        0,
        utilisation=80.0,
        memory_used=10 * GIB,
        processes=(ProcessUse(pid=11, memory=9 * GIB, utilisation=80.0),),
    )
    tasks = [task("a", 0, pids=(11,)), task("b", 0, pids=(21,))]
    assert attribute([shared], tasks) == (use("a", (0,), 80.0, 9 * GIB), use("b", (0,), 0.0, 0))


def test_process_figures_above_the_cards_are_scaled_down_to_it() -> None:
    """The card's memory and its processes' are read a moment apart."""
    shared = card(
        0,
        memory_used=9 * GIB,
        processes=(ProcessUse(pid=11, memory=8 * GIB), ProcessUse(pid=21, memory=4 * GIB)),
    )
    tasks = [task("a", 0, pids=(11,)), task("b", 0, pids=(21,))]
    assert [u.memory for u in attribute([shared], tasks)] == [6 * GIB, 3 * GIB]


def test_a_card_not_read_counts_for_nothing() -> None:
    assert attribute([card(0, utilisation=90.0)], [task("a", 0, 5)]) == (use("a", (0, 5), 90.0, 0),)
    assert attribute([], [task("a", 3)]) == (use("a", (3,), 0.0, 0),)


PIDS = st.frozensets(st.integers(1, 12), max_size=4)
PROCESS = st.builds(
    ProcessUse,
    pid=st.integers(1, 12),
    memory=st.none() | st.integers(0, 100 * GIB),
    utilisation=st.none() | st.floats(0, 100),
)
CARD = st.builds(
    lambda total, used, busy, processes: CardReading(
        index=0,
        memory_total=total,
        memory_used=min(used, total),
        utilisation=busy,
        processes=tuple({p.pid: p for p in processes}.values()),
    ),
    st.integers(0, 100 * GIB),
    st.integers(0, 100 * GIB),
    st.floats(0, 100),
    st.lists(PROCESS, max_size=6),
)


@settings(max_examples=300, deadline=None, derandomize=True, database=None)
@given(
    st.lists(CARD, min_size=1, max_size=4),
    st.lists(st.tuples(st.lists(st.integers(0, 4), max_size=4), PIDS), max_size=6),
)
def test_no_task_is_given_more_than_its_cards_hold(
    drawn: list[CardReading], given_tasks: list[tuple[list[int], frozenset[int]]]
) -> None:
    cards = [CardReading(**{**_fields(c), "index": i}) for i, c in enumerate(drawn)]
    tasks = [
        TaskCards(job="j", task=f"t{n}", gpus=tuple(g), pids=p)
        for n, (g, p) in enumerate(given_tasks)
    ]
    uses = attribute(cards, tasks)
    by_index = {c.index: c for c in cards}
    for t, u in zip(tasks, uses, strict=True):
        mine = [by_index[i] for i in set(t.gpus) if i in by_index]
        assert (
            0 <= u.memory <= sum(c.memory_used for c in mine) <= sum(c.memory_total for c in mine)
        )
        assert 0.0 <= u.utilisation <= 100.0
    for c in cards:  # the tasks of a card, together, hold no more than it has in use
        holders = [u for t, u in zip(tasks, uses, strict=True) if t.gpus == (c.index,)]
        assert sum(u.memory for u in holders) <= c.memory_used


def _fields(reading: CardReading) -> dict[str, Any]:
    return {name: getattr(reading, name) for name in CardReading.__dataclass_fields__}


# -- the sampler ---------------------------------------------------------------------------


def test_the_sampler_opens_nvml_at_its_first_sample_and_reads_every_card() -> None:
    fake = RecordedNvml.load("rtx4090-8")
    sampler = GpuSampler("gpu-7", nvml=fake)
    assert fake.calls == {} and sampler.latest is None
    tasks = [task("train-0", 0, pids=(58130,)), task("train-1", 1, 2, pids=(2930819, 2146842))]
    first = sampler.sample(tasks, now=1000.0)
    assert isinstance(first, NodeSample)
    assert (first.node, first.at, first.driver, first.absent, len(first.cards)) == (
        "gpu-7",
        1000.0,
        "535.154.05",
        None,
        8,
    )
    assert first.tasks == (
        use("train-0", (0,), 0.0, 20676 * MIB),
        use("train-1", (1, 2), 50.0, (21704 + 23392) * MIB),
    )
    assert sampler.latest is first
    sampler.sample(tasks, now=1005.0)
    assert fake.calls["nvmlInit"] == 1
    sampler.close()
    assert fake.calls["nvmlShutdown"] == 1


def test_a_sample_is_due_every_interval() -> None:
    sampler = GpuSampler("n", nvml=RecordedNvml.load("h100-sxm-8"), interval=5.0)
    assert sampler.due(0.0)
    sampler.sample([], now=100.0)
    assert not sampler.due(104.9)
    assert sampler.due(105.0)
    assert GpuSampler("n").interval == DEFAULT_INTERVAL == 5.0


def test_a_node_without_nvml_says_so_once() -> None:
    sampler = GpuSampler("cpu-1", nvml=RecordedNvml.absent())
    assert sampler.due(0.0)
    said = sampler.sample([task("a", 0)], now=10.0)
    assert said == NodeSample(
        node="cpu-1",
        at=10.0,
        absent="NVML is not available on this node: NVML Shared Library Not Found",
    )
    assert not sampler.due(1e9)
    assert sampler.sample([], now=20.0) is None
    assert sampler.latest is said


@pytest.mark.skipif(HAS_NVML, reason="this host has libnvidia-ml")
def test_this_cpu_only_host_says_it_has_no_nvml_once() -> None:
    sampler = GpuSampler("here")
    said = sampler.sample([], now=1.0)
    assert said is not None and said.absent is not None and said.cards == ()
    assert sampler.sample([], now=7.0) is None


def test_a_sampling_interval_must_be_a_span_of_time() -> None:
    with pytest.raises(InvalidInput, match="interval"):
        GpuSampler("n", interval=0)


# -- process trees -------------------------------------------------------------------------

#: A parent that starts two children, prints the three pids and waits.
FAMILY = (
    "import subprocess, sys\n"
    "kids = [subprocess.Popen(['sleep', '300']) for _ in range(2)]\n"
    "print(*[k.pid for k in kids], flush=True)\n"
    "sys.stdin.read()\n"
    "for k in kids: k.kill(); k.wait()\n"
)


@pytest.fixture
def family() -> Iterator[tuple[int, frozenset[int]]]:
    with subprocess.Popen(
        [sys.executable, "-c", FAMILY], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    ) as parent:
        assert parent.stdout is not None and parent.stdin is not None
        kids = frozenset(int(p) for p in parent.stdout.readline().split())
        yield parent.pid, kids
        parent.stdin.close()  # the parent kills its children and ends


def test_a_process_tree_is_the_root_and_all_its_descendants(
    family: tuple[int, frozenset[int]],
) -> None:
    root, kids = family
    assert len(kids) == 2
    assert process_tree(root) == {root, *kids}
    assert process_trees([root, *kids]) == {root: {root, *kids}} | {k: {k} for k in kids}


def test_where_there_is_no_proc_psutil_finds_the_same_tree(
    family: tuple[int, frozenset[int]], monkeypatch: pytest.MonkeyPatch
) -> None:
    root, kids = family
    monkeypatch.setattr(sampler_module, "PROC", "/nonexistent-proc")
    assert process_tree(root) == {root, *kids}


def test_a_process_that_is_gone_has_no_tree() -> None:
    done = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"],
        capture_output=True,
        text=True,
        check=True,
    )
    assert process_tree(int(done.stdout)) == frozenset()
