"""OfflineThrottle against a fake executor and an injected load signal."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from phalanx.domain.errors import InvalidInput
from phalanx.domain.job import ServiceClass
from phalanx.executors.colocation import OfflineThrottle, OnlineLoad
from phalanx.executors.gpuwatch import GpuWatch
from phalanx.executors.local import RunningTask
from phalanx.telemetry.recorded import RecordedNvml
from phalanx.telemetry.sampler import GpuSampler


class FakeExecutor:
    """Live tasks as a dict; pause and resume flip a flag and are logged."""

    def __init__(self) -> None:
        self.tasks: dict[tuple[str, str], RunningTask] = {}
        self.calls: list[tuple[str, str]] = []
        self.gpus: GpuWatch | None = None  # reads no GPU unless a test gives it a watch

    def add(
        self,
        task: str,
        workload: ServiceClass,
        *,
        stopping: bool = False,
        pid: int = 1,
        gpus: tuple[int, ...] = (),
    ) -> None:
        self.tasks[("job", task)] = RunningTask(
            job="job",
            task=task,
            node="n0",
            pid=pid,
            workload=workload,
            gpus=gpus,
            paused=False,
            stopping=stopping,
        )

    def running(self, workload: ServiceClass | None = None) -> list[RunningTask]:
        return [t for t in self.tasks.values() if workload is None or t.workload is workload]

    def _set(self, job: str, task: str, paused: bool) -> bool:
        old = self.tasks[(job, task)]
        self.tasks[(job, task)] = RunningTask(
            job=old.job,
            task=old.task,
            node=old.node,
            pid=old.pid,
            workload=old.workload,
            gpus=old.gpus,
            paused=paused,
            stopping=old.stopping,
        )
        self.calls.append(("pause" if paused else "resume", task))
        return True

    def pause(self, job: str, task: str) -> bool:
        return self._set(job, task, True)

    def resume(self, job: str, task: str) -> bool:
        return self._set(job, task, False)

    def paused(self) -> set[str]:
        return {t.task for t in self.tasks.values() if t.paused}


class Load:
    """A settable load signal."""

    def __init__(self) -> None:
        self.value = 0.0

    def __call__(self) -> float:
        return self.value


def setup() -> tuple[FakeExecutor, Load, OfflineThrottle]:
    executor, load = FakeExecutor(), Load()
    executor.add("serve", ServiceClass.ONLINE)
    executor.add("train-a", ServiceClass.OFFLINE)
    executor.add("train-b", ServiceClass.OFFLINE)
    return executor, load, OfflineThrottle(executor, watermark=0.7, signal=load, hysteresis=0.2)


def test_offline_tasks_are_paused_above_the_watermark_and_online_ones_never() -> None:
    executor, load, throttle = setup()
    assert throttle.tick() is False and executor.calls == []
    load.value = 0.8
    assert throttle.tick() is True
    assert executor.paused() == {"train-a", "train-b"}
    assert throttle.paused == {("job", "train-a"), ("job", "train-b")}


def test_they_resume_only_below_the_hysteresis_band() -> None:
    executor, load, throttle = setup()
    load.value = 0.8
    throttle.tick()
    load.value = 0.6  # below the watermark but inside the band: stay paused
    assert throttle.tick() is True and executor.paused() == {"train-a", "train-b"}
    load.value = 0.49
    assert throttle.tick() is False
    assert executor.paused() == set() and throttle.paused == frozenset()


def test_a_load_exactly_at_the_watermark_does_not_throttle() -> None:
    executor, load, throttle = setup()
    load.value = 0.7
    assert throttle.tick() is False and executor.paused() == set()


def test_a_task_arriving_while_throttled_is_paused_at_the_next_tick() -> None:
    executor, load, throttle = setup()
    load.value = 0.9
    throttle.tick()
    executor.add("train-c", ServiceClass.OFFLINE)
    throttle.tick()
    assert executor.paused() == {"train-a", "train-b", "train-c"}
    assert executor.calls.count(("pause", "train-a")) == 1  # paused tasks are left alone


def test_stopping_tasks_are_not_paused() -> None:
    executor, load, throttle = setup()
    executor.add("train-c", ServiceClass.OFFLINE, stopping=True)
    load.value = 0.9
    throttle.tick()
    assert "train-c" not in executor.paused()


def test_tasks_paused_by_someone_else_are_not_resumed() -> None:
    executor, load, throttle = setup()
    executor.pause("job", "train-b")
    load.value = 0.9
    throttle.tick()
    load.value = 0.0
    throttle.tick()
    assert executor.paused() == {"train-b"}


def test_ended_tasks_are_forgotten() -> None:
    executor, load, throttle = setup()
    load.value = 0.9
    throttle.tick()
    del executor.tasks[("job", "train-a")]
    load.value = 0.0
    throttle.tick()
    assert ("resume", "train-a") not in executor.calls


@pytest.mark.parametrize(
    ("watermark", "hysteresis", "field"),
    [(0.0, 0.0, "watermark"), (0.5, 0.5, "hysteresis"), (0.5, -0.1, "hysteresis")],
)
def test_bad_thresholds_are_refused(watermark: float, hysteresis: float, field: str) -> None:
    with pytest.raises(InvalidInput) as error:
        OfflineThrottle(FakeExecutor(), watermark=watermark, signal=Load(), hysteresis=hysteresis)
    assert error.value.field == field


def test_online_load_takes_the_busiest_gpu_of_online_tasks() -> None:
    executor = FakeExecutor()
    asked: list[Sequence[tuple[str, str]]] = []

    def gpu(tasks: Sequence[tuple[str, str]]) -> float:
        asked.append(tasks)
        return 0.9

    executor.add("train", ServiceClass.OFFLINE, pid=999_999_999, gpus=(0,))
    load = OnlineLoad(executor, cores=4, gpu=gpu)
    assert load() == 0.0 and asked == []  # no online GPU: the GPU term is not read
    executor.add("serve", ServiceClass.ONLINE, pid=999_999_999, gpus=(3, 1))
    assert load() == 0.9 and asked == [[("job", "serve")]]


def test_online_load_reads_the_online_tasks_own_share_of_their_cards() -> None:
    """The executor's real GPU readings (a recorded 8x H100 node through the sampler):
    the online task's card at 90% loads the host to 0.9, whatever offline cards do."""
    nvml = RecordedNvml.load("h100-sxm-8")
    executor = FakeExecutor()
    executor.gpus = GpuWatch(GpuSampler("n0", nvml=nvml, interval=1.0))
    executor.add("train", ServiceClass.OFFLINE, pid=999_999_999, gpus=(0,))
    executor.add("serve", ServiceClass.ONLINE, pid=999_999_999, gpus=(2,))
    nvml.set(0, utilisation=100)
    nvml.set(2, utilisation=90)
    load = OnlineLoad(executor, cores=4)
    assert load() == 0.0  # nothing read yet: no GPU term
    executor.gpus.tick(executor.running(), now=1.0)
    assert load() == pytest.approx(0.9)
    nvml.set(2, utilisation=10)
    executor.gpus.tick(executor.running(), now=2.0)
    assert load() == pytest.approx(0.1)
