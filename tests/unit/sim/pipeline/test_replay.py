"""Pipelines replayed in the simulator: the planner's semantics over simulated jobs."""

from __future__ import annotations

from typing import Any

from phalanx.domain.node import Node
from phalanx.domain.queue import Queue
from phalanx.domain.resources import Resources
from phalanx.policies import load_policy
from phalanx.sim.pipeline import Replay, pipeline_queues, replay_pipeline, summary, timings_of
from phalanx.sim.runner import SimOptions
from phalanx.spec.loader import load_pipelines
from phalanx.spec.pipeline import build_graph, resolve
from phalanx.workflow import Phase, RunPhase

GIB = 2**30
CONFIG = load_policy("phalanx-default").config


def _nodes(count: int = 2, *, cpu: int = 8, gpu: int = 4) -> list[Node]:
    capacity = Resources.of({"cpu": cpu * 1000, "memory": 64 * GIB, "gpu": gpu})
    return [Node(name=f"n{i}", capacity=capacity) for i in range(count)]


def _replay(
    text: str,
    durations: dict[str, Any],
    *,
    nodes: list[Node] | None = None,
    queues: list[Queue] | None = None,
    runs: int = 1,
    interval: float = 0.0,
    **params: Any,
) -> Replay:
    [document] = load_pipelines(text)
    graph = build_graph(document.spec)
    return replay_pipeline(
        graph,
        timings_of(durations, graph),
        name=document.metadata.name,
        nodes=nodes or _nodes(),
        queues=pipeline_queues(graph, queues or []),
        config=CONFIG,
        params=resolve(document.spec.declared_params(), params),
        runs=runs,
        interval=interval,
    )


def _units(replay: Replay, run: int = 0) -> dict[str, Any]:
    return {unit.unit: unit for unit in replay.runs[run].units}


CHAIN = """\
apiVersion: phalanx/v1
kind: Pipeline
metadata: {name: chain}
spec:
  defaults: {queue: wf, resources: {cpu: 1, memory: 1Gi}}
  steps:
    prep: {command: "true"}
    train: {command: "true", dependsOn: [prep], resources: {cpu: 2, memory: 4Gi, gpu: 1}}
    validate: {command: "true", dependsOn: [train]}
"""


def test_a_chain_on_an_empty_cluster_takes_the_sum_of_its_durations() -> None:
    replay = _replay(CHAIN, {"prep": 30, "train": "2m", "validate": 45})
    [run] = replay.runs
    assert run.phase is RunPhase.SUCCEEDED and run.makespan == 30 + 120 + 45
    units = _units(replay)
    assert [(u.submitted, u.ended, u.queue_delay, u.jct) for u in units.values()] == [
        (0.0, 30.0, 0.0, 30.0),
        (30.0, 150.0, 0.0, 120.0),
        (150.0, 195.0, 0.0, 45.0),
    ]
    assert units["train"].jobs == ("chain-0-train-1",)  # the controller's job names
    assert replay.metrics.jobs["chain-0-train-1"].gpus == 1.0  # the step's resources


FAN = """\
apiVersion: phalanx/v1
kind: Pipeline
metadata: {name: fan}
spec:
  defaults: {queue: wf, resources: {cpu: 1, memory: 1Gi}}
  steps:
    train:
      command: "echo {{item}}"
      foreach: {items: [1, 2, 3, 4, 5, 6], maxItems: 6, maxParallel: 2}
"""


def test_a_fan_out_of_six_ten_second_items_two_at_a_time_takes_thirty_seconds() -> None:
    replay = _replay(FAN, {"train": 10})
    assert replay.runs[0].makespan == 30.0
    starts = sorted(u.submitted for u in replay.runs[0].units)
    assert starts == [0.0, 0.0, 10.0, 10.0, 20.0, 20.0]
    unlimited = _replay(FAN.replace(", maxParallel: 2", ""), {"train": 10})
    assert unlimited.runs[0].makespan == 10.0


def test_a_queue_capability_stretches_the_makespan() -> None:
    text = FAN.replace(", maxParallel: 2", "")
    capped = Queue(name="wf", capability=Resources.of({"cpu": 2000}))
    replay = _replay(text, {"train": 10}, queues=[capped])
    assert replay.runs[0].makespan == 30.0  # 2 cpus of quota: two items at a time
    delays = sorted(u.queue_delay or 0.0 for u in replay.runs[0].units)
    assert delays == [0.0, 0.0, 10.0, 10.0, 20.0, 20.0]


PROMOTE = """\
apiVersion: phalanx/v1
kind: Pipeline
metadata: {name: promote}
spec:
  params: {threshold: 0.9}
  defaults: {queue: wf, resources: {cpu: 1, memory: 1Gi}}
  steps:
    validate:
      command: "true"
      outputs: {params: {accuracy: {type: float}}}
    promote:
      when: "{{steps.validate.outputs.accuracy}} >= {{params.threshold}}"
      command: "true"
    announce: {command: "true", dependsOn: [promote]}
  finally:
    cleanup: {command: "true"}
"""


def test_a_when_false_step_is_skipped_and_the_run_still_succeeds() -> None:
    durations = {
        "validate": {"duration": 60, "outputs": {"accuracy": 0.8}},
        "promote": 30,
        "announce": 5,
        "cleanup": 1,
    }
    skipped = _replay(PROMOTE, durations)
    units = _units(skipped)
    assert skipped.runs[0].phase is RunPhase.SUCCEEDED
    assert units["promote"].phase is Phase.SKIPPED and units["promote"].jobs == ()
    assert "when is false" in units["promote"].reason
    assert units["announce"].phase is Phase.SKIPPED  # its upstream was skipped
    assert units["cleanup"].phase is Phase.SUCCEEDED and skipped.runs[0].makespan == 61.0
    promoted = _replay(PROMOTE, durations, threshold=0.5)
    assert _units(promoted)["promote"].phase is Phase.SUCCEEDED
    assert promoted.runs[0].makespan == 60 + 30 + 5 + 1


RETRIED = """\
apiVersion: phalanx/v1
kind: Pipeline
metadata: {name: retried}
spec:
  defaults: {queue: wf, resources: {cpu: 1, memory: 1Gi}}
  steps:
    flaky:
      command: "true"
      retry: {maxAttempts: 3, on: [failed], backoff: {initial: 5, factor: 2}}
    after: {command: "true", dependsOn: [flaky]}
    aside: {command: "true"}
  finally:
    cleanup: {command: "true"}
"""


def test_failing_attempts_follow_the_retry_policy_then_fail_fast() -> None:
    durations = {"flaky": {"duration": 10, "failures": 2}, "after": 10, "aside": 100, "cleanup": 1}
    replay = _replay(RETRIED, durations)
    units = _units(replay)
    # two failures, waits of 5 and 10 s, then a third attempt succeeds
    assert units["flaky"].jobs == tuple(f"retried-0-flaky-{i}" for i in (1, 2, 3))
    assert units["flaky"].phase is Phase.SUCCEEDED and units["flaky"].ended == 10 + 5 + 10 + 10 + 10
    assert units["after"].ended == 55.0 and replay.runs[0].phase is RunPhase.SUCCEEDED
    failing = _replay(RETRIED, {**durations, "flaky": {"duration": 10, "failures": 3}})
    units = _units(failing)
    assert units["flaky"].phase is Phase.FAILED and "failed" in units["flaky"].reason
    assert units["after"].phase is Phase.SKIPPED
    assert units["aside"].phase is Phase.SUCCEEDED  # already running: failFast starts nothing new
    assert units["cleanup"].phase is Phase.SUCCEEDED and units["cleanup"].submitted == 100.0
    assert failing.runs[0].phase is RunPhase.FAILED


def test_a_step_past_its_timeout_fails_as_its_walltime() -> None:
    text = CHAIN.replace(
        "dependsOn: [prep], resources", "dependsOn: [prep], timeout: 1m, resources"
    )
    replay = _replay(text, {"prep": 30, "train": "2m", "validate": 45})
    units = _units(replay)
    assert units["train"].phase is Phase.FAILED and units["train"].ended == 90.0
    assert units["validate"].phase is Phase.SKIPPED


def test_concurrent_runs_share_the_cluster_and_wait_for_each_other() -> None:
    one_gpu = _nodes(1, gpu=1)
    alone = _replay(CHAIN, {"prep": 30, "train": "2m", "validate": 45}, nodes=one_gpu)
    shared = _replay(
        CHAIN, {"prep": 30, "train": "2m", "validate": 45}, nodes=one_gpu, runs=3, interval=10
    )
    assert [r.makespan for r in shared.runs] == [195.0, 305.0, 415.0]
    assert alone.runs[0].makespan == 195.0
    waits = [_units(shared, i)["train"].queue_delay for i in range(3)]
    assert waits == [0.0, 110.0, 220.0]  # the one GPU serves the trainings in turn
    figures = summary(shared)
    assert figures["max_makespan_s"] == 415.0 and figures["finished_runs"] == 3
    steps = figures["steps"]
    assert isinstance(steps, dict) and steps["train"]["avg_queue_delay_s"] == 110.0


def test_a_fan_out_over_runtime_outputs_uses_the_given_items() -> None:
    text = """\
apiVersion: phalanx/v1
kind: Pipeline
metadata: {name: shards}
spec:
  defaults: {queue: wf, resources: {cpu: 1, memory: 1Gi}}
  steps:
    split:
      command: "true"
      outputs: {params: {shards: {type: list}}}
    work:
      command: "echo {{item}}"
      foreach: {items: "{{steps.split.outputs.shards}}", maxItems: 10}
"""
    durations = {
        "split": {"duration": 5, "outputs": {"shards": ["a", "b", "c"]}},
        "work": 20,
        "work[1]": 50,
    }
    replay = _replay(text, durations)
    units = _units(replay)
    assert [u for u in units if u.startswith("work")] == ["work[0]", "work[1]", "work[2]"]
    assert replay.runs[0].makespan == 55.0 and units["work[1]"].jct == 50.0


def test_the_same_inputs_give_the_same_outcomes() -> None:
    first = summary(_replay(FAN, {"train": 10}, runs=4, interval=3))
    second = summary(_replay(FAN, {"train": 10}, runs=4, interval=3))
    first.pop("sim"), second.pop("sim")  # holds the wall time
    assert first == second


def test_a_step_that_can_never_be_placed_leaves_its_run_unfinished_saying_why() -> None:
    text = CHAIN.replace("gpu: 1}}", "gpu: 16}}")
    replay = _replay(text, {"prep": 30, "train": "2m", "validate": 45})
    [run] = replay.runs
    assert run.phase is RunPhase.RUNNING and run.makespan is None
    train = _units(replay)["train"]
    assert train.phase is Phase.RUNNING and train.started is None
    assert train.reason.startswith("job chain-0-train-1 was never placed: ")
    assert "needs 16 GPUs" in train.reason  # the engine's own words
    assert summary(replay)["finished_runs"] == 0


def test_a_session_delay_adds_to_each_hand_off() -> None:
    [document] = load_pipelines(CHAIN)
    graph = build_graph(document.spec)
    replay = replay_pipeline(
        graph,
        timings_of({"prep": 30, "train": "2m", "validate": 45}, graph),
        name="chain",
        nodes=_nodes(),
        queues=pipeline_queues(graph, []),
        config=CONFIG,
        params={},
        options=SimOptions(trigger_delay=1.5),
    )
    assert replay.runs[0].makespan == 30 + 120 + 45 + 3 * 1.5
    assert [u.queue_delay for u in replay.runs[0].units] == [1.5, 1.5, 1.5]


RECLAIMED = """\
apiVersion: phalanx/v1
kind: Pipeline
metadata: {name: reclaimed}
spec:
  defaults: {resources: {cpu: 1, memory: 1Gi}}
  steps:
    hog:
      queue: batch
      command: "echo {{item}}"
      resources: {cpu: 4, memory: 1Gi}
      foreach: {items: [0, 1], maxItems: 2}
    tick: {queue: prod, command: "true"}
    urgent: {queue: prod, command: "true", dependsOn: [tick], resources: {cpu: 4, memory: 1Gi}}
"""


def _cpus(count: int) -> Resources:
    return Resources.of({"cpu": count * 1000})


def test_a_preempted_step_ends_its_attempt_and_its_retry_policy_decides() -> None:
    """As in the control plane: the evicted job is cancelled and the step retried for the
    cause preempted (by default 3 attempts, 10 s apart), or failed saying so."""
    queues = [
        Queue(name="prod", guarantee=_cpus(8), deserved=_cpus(8)),
        Queue(name="batch", deserved=_cpus(0), reclaimable=True),
    ]
    durations = {"hog": 100, "tick": 10, "urgent": 20}
    replay = _replay(RECLAIMED, durations, nodes=_nodes(1, cpu=9), queues=queues)
    units = _units(replay)
    # at 10 s urgent needs 4 of the 8 CPUs batch borrowed: reclaim evicts hog[0]
    assert units["urgent"].submitted == units["urgent"].started == 10.0
    assert units["hog[0]"].jobs == ("reclaimed-0-hog-0-1", "reclaimed-0-hog-0-2")
    assert replay.metrics.jobs["reclaimed-0-hog-0-1"].outcome == "cancelled"
    # retried 10 s later, placed when urgent has ended, then its whole 100 s
    assert (units["hog[0]"].started, units["hog[0]"].ended) == (30.0, 130.0)
    assert units["hog[1]"].jobs == ("reclaimed-0-hog-1-1",) and units["hog[1]"].ended == 100.0
    assert replay.runs[0].phase is RunPhase.SUCCEEDED
    once = RECLAIMED.replace("foreach:", "retry: {maxAttempts: 1}\n      foreach:")
    failed = _units(_replay(once, durations, nodes=_nodes(1, cpu=9), queues=queues))
    assert failed["hog[0]"].phase is Phase.FAILED and failed["hog[0]"].ended == 10.0
    assert failed["hog[0]"].reason.startswith("job reclaimed-0-hog-0-1 was preempted: ")
