"""GPU types (node label ``phalanx.io/gpu-model``): a job's GPU tasks on one type unless its
spec allows mixing, a role's ``gpuTypes`` selector, an elastic job growing on its own type
only, and the reasons when the type is what keeps a job waiting; over the one lifecycle
(``World``) and through the simulator."""

from __future__ import annotations

import io
import json
from dataclasses import replace

from phalanx.domain.job import Elastic, Job, Role
from phalanx.domain.node import GPU_MODEL_LABEL, Node
from phalanx.sim.runner import SimOptions, Simulation
from phalanx.sim.workload import Workload, WorkloadJob
from tests.builders import config, make_job, make_node, make_queue, res
from tests.scenarios.world import World

CFG = config(
    ["enqueue", "allocate", "backfill"], ["priority", "gang"], ["drf", "predicates", "binpack"]
)
ELASTIC = config(
    ["enqueue", "allocate", "backfill", "elastic"],
    ["priority", "gang"],
    ["drf", "predicates", "binpack"],
)
QUEUES = [make_queue()]


def _typed(name: str, model: str | None, gpus: int = 4) -> Node:
    return make_node(name, gpus=gpus, labels={GPU_MODEL_LABEL: model} if model else {})


def _two_types() -> list[Node]:
    """One 4-GPU A100 node and one 4-GPU T4 node: 8 GPUs, at most 4 of one type."""
    return [_typed("a100-0", "A100"), _typed("t4-0", "T4")]


def _six(name: str = "six", *, mixed: bool = False, created: float = 0.0) -> Job:
    """Three tasks of 2 GPUs: 6 GPUs, more than either type has."""
    job = make_job(name, gpus=2, replicas=3, created=created)
    return replace(job, allow_mixed_gpu_types=mixed)


def _types_of(world: World, job: str) -> set[str]:
    return {node.split("-")[0] for node in world.placed(job)}


def test_a_job_that_fits_only_across_types_waits_with_the_reason() -> None:
    world = World(nodes=_two_types(), queues=QUEUES, config=CFG)
    world.submit(_six())
    decisions = world.step(1.0)
    assert not decisions.binds
    reason = decisions.reason_for("six")
    assert reason is not None
    assert reason.message.startswith("needs 6 GPUs of one GPU type: the most free of one type is 4")
    assert "A100: 4 free on 1 node, room for 2 of its 3 GPU tasks" in reason.message
    assert "T4: 4 free on 1 node" in reason.message
    assert "fix: allow mixed types (spec.allowMixedGpuTypes: true)" in reason.message
    world.run([2.0, 3.0])
    assert world.placed("six") == []


def test_with_allow_mixed_gpu_types_it_spans_both() -> None:
    world = World(nodes=_two_types(), queues=QUEUES, config=CFG)
    world.submit(_six(mixed=True))
    world.step(1.0)
    assert _types_of(world, "six") == {"a100", "t4"}
    assert len(world.placed("six")) == 3


def test_a_gang_goes_to_the_type_it_fits_best_ties_by_name() -> None:
    # A100 has 8 free, T4 4: a 4-GPU gang leaves T4 empty (best fit), the A100s whole
    nodes = [_typed("a100-0", "A100"), _typed("a100-1", "A100"), _typed("t4-0", "T4")]
    world = World(nodes=nodes, queues=QUEUES, config=CFG)
    world.submit(make_job("four", gpus=2, replicas=2))
    world.step(1.0)
    assert _types_of(world, "four") == {"t4"}
    # equally tight: the first by name
    world = World(nodes=_two_types(), queues=QUEUES, config=CFG)
    world.submit(make_job("four", gpus=2, replicas=2))
    world.step(1.0)
    assert _types_of(world, "four") == {"a100"}


def test_nodes_without_the_label_are_a_type_of_their_own() -> None:
    world = World(
        nodes=[_typed("a100-0", "A100"), _typed("bare-0", None)], queues=QUEUES, config=CFG
    )
    world.submit(_six())
    decisions = world.step(1.0)
    reason = decisions.reason_for("six")
    assert reason is not None and "unlabelled: 4 free on 1 node" in reason.message


def test_cpu_tasks_of_a_typed_job_go_anywhere() -> None:
    roles = (
        Role(name="launcher", replicas=1, resources=res(1, 1)),
        Role(name="worker", replicas=2, resources=res(1, 1, 4)),
    )
    nodes = [_typed("a100-0", "A100"), _typed("a100-1", "A100"), _typed("t4-0", "T4", gpus=0)]
    world = World(nodes=nodes, queues=QUEUES, config=CFG)
    world.submit(make_job("mpi", roles=roles))
    world.step(1.0)
    assert len(world.placed("mpi")) == 3
    assert _types_of(world, "mpi") <= {"a100", "t4"}


def _selecting(name: str, *types: str, replicas: int = 2, gpus: int = 2) -> Job:
    role = Role(name="worker", replicas=replicas, resources=res(1, 1, gpus), gpu_types=types)
    return make_job(name, roles=[role])


def test_the_role_selector_confines_to_its_types() -> None:
    world = World(nodes=_two_types(), queues=QUEUES, config=CFG)
    world.submit(_selecting("t4-only", "T4"))  # best fit alone would pick the A100 node
    world.step(1.0)
    assert _types_of(world, "t4-only") == {"t4"}


def test_a_selector_that_leaves_out_free_gpus_says_so() -> None:
    world = World(nodes=_two_types(), queues=QUEUES, config=CFG)
    world.submit(_selecting("a100-only", "A100", replicas=3))
    decisions = world.step(1.0)
    reason = decisions.reason_for("a100-only")
    assert reason is not None
    assert "gpuTypes [A100] leaves out 4 free T4 GPUs" in reason.message
    assert world.placed("a100-only") == []


def test_a_selector_naming_no_node_s_type_says_so() -> None:
    world = World(nodes=_two_types(), queues=QUEUES, config=CFG)
    world.submit(_selecting("h100-only", "H100", replicas=1))
    reason = world.step(1.0).reason_for("h100-only")
    assert reason is not None
    assert "0/2 nodes match task worker" in reason.message
    assert "2 by gpuTypes [H100]" in reason.message
    assert "leaves out 4 free A100 GPUs, 4 free T4 GPUs" in reason.message


def _elastic(name: str = "e", *, replicas: int = 2) -> Job:
    role = Role(
        name="worker",
        replicas=replicas,
        resources=res(1, 1, 1),
        elastic=Elastic(min_replicas=1, max_replicas=8, interval=60.0, cost=0.0),
    )
    return Job(name=name, queue="default", roles=(role,), user="u")


def test_an_elastic_job_grows_on_its_own_type_only() -> None:
    # A100: 4 GPUs, T4: 8 GPUs. The job of 2 starts on the A100 (the tighter fit) and grows
    # to 4 there; the idle T4s would take 8, but they are of another type
    nodes = [_typed("a100-0", "A100"), _typed("t4-0", "T4"), _typed("t4-1", "T4")]
    world = World(nodes=nodes, queues=QUEUES, config=ELASTIC)
    world.submit(_elastic())
    world.step(1.0)
    assert _types_of(world, "e") == {"a100"}
    for second in (100.0, 101.0, 102.0, 200.0, 201.0):
        world.step(second)
    assert _types_of(world, "e") == {"a100"}
    assert len(world.placed("e")) == 4
    mixed = replace(_elastic("m"), allow_mixed_gpu_types=True)
    world = World(nodes=nodes, queues=QUEUES, config=ELASTIC)
    world.submit(mixed)
    for second in (1.0, 100.0, 101.0, 102.0):
        world.step(second)
    assert len(world.placed("m")) == 8  # allowed to mix, it grows onto the T4s too


def test_a_started_job_s_remaining_tasks_keep_to_its_type() -> None:
    # four 1-GPU tasks, minAvailable 1, on a 2-GPU A100 node and a 3-GPU T4 node: three go
    # to the T4 node (the most room); the fourth waits for its type, not the free A100s
    nodes = [_typed("a100-0", "A100", gpus=2), _typed("t4-0", "T4", gpus=3)]
    world = World(nodes=nodes, queues=QUEUES, config=CFG)
    world.submit(make_job("half", gpus=1, replicas=4, min_available=1))
    world.step(1.0)
    assert _types_of(world, "half") == {"t4"}
    assert len(world.placed("half")) == 3
    assert not world.step(2.0).binds
    assert len(world.placed("half")) == 3


def test_through_the_simulator_the_six_gpu_job_waits_and_the_mixed_one_runs() -> None:
    jobs = (
        WorkloadJob(job=_six("six", created=0.0), duration=100.0),
        WorkloadJob(job=_six("mixed", mixed=True, created=1.0), duration=100.0),
    )
    out = io.StringIO()
    options = SimOptions(period=1.0, max_period=60.0, trigger_delay=0.0, until=1000.0)
    simulation = Simulation(
        _two_types(), Workload(jobs=jobs), CFG, queues=QUEUES, options=options, events_out=out
    )
    simulation.run()
    rows = [json.loads(line) for line in out.getvalue().splitlines()]
    placed = {
        r["job"]: {t["node"].split("-")[0] for t in r["tasks"]} for r in rows if r["ev"] == "Placed"
    }
    assert placed["mixed"] == {"a100", "t4"}
    assert "six" not in placed
    finished = {r["job"] for r in rows if r["ev"] == "Succeeded"}
    assert finished == {"mixed"}
