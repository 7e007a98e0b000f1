"""A unit's job, its workspace paths and its output params."""

from __future__ import annotations

import json
import shlex
from pathlib import Path

import fsspec
import pytest

from phalanx.domain.errors import InvalidInput
from phalanx.spec.loader import load_pipelines
from phalanx.spec.pipeline.dag import build_graph
from phalanx.spec.pipeline.parts import OutputParam
from phalanx.spec.pipeline.templates import Context, TemplateError
from phalanx.workflow.artifacts import (
    MAX_PARAM_BYTES,
    OutputError,
    Workspace,
    check_shared,
    read_output_param,
    read_outputs,
)
from phalanx.workflow.jobs import MAIN_ROLE, attempt_ended, job_spec, unit_context
from phalanx.workflow.planner import Phase, RunState, Unit, apply, plan
from tests.unit.workflow.examples import FULL, TRI

WS = Workspace("/data/wf")


def test_a_command_step_becomes_one_role_with_everything_rendered() -> None:
    graph = build_graph(load_pipelines(TRI)[0].spec)
    node = graph.steps["train"]
    outputs = WS.outputs("r1", Unit("train"), node)
    assert outputs == {"model": "/data/wf/runs/r1/train/model"}
    context = Context(
        step="train",
        params={"lr": "0.1; rm -rf /"},
        inputs={"data": "/data/wf/runs/r1/prep/data"},
        outputs=outputs,
        run_id="r1",
    )
    spec = job_spec(node, context)
    [role] = spec.roles
    assert role.name == MAIN_ROLE and role.replicas == 1
    assert spec.queue == "wf" and spec.max_retry == 0
    assert role.resources == {"cpu": 1, "memory": "256Mi"}
    script = role.command[2]
    assert script == (
        "python train.py --lr '0.1; rm -rf /' /data/wf/runs/r1/prep/data /data/wf/runs/r1/train/model"
    )
    assert shlex.split(script)[3] == "0.1; rm -rf /"
    assert role.env == {"PHALANX_RUN_ID": "r1", "PHALANX_STEP": "train"}
    assert spec.to_job("wf-r1-train", 0.0).roles[0].command[0] == "sh"


def test_a_job_step_keeps_its_roles_and_gets_defaults() -> None:
    graph = build_graph(load_pipelines(FULL)[0].spec)
    node = graph.steps["dist"]
    context = Context(step="dist", params={"threshold": 0.9, "tag": "v 1"}, run_id="r2")
    spec = job_spec(node, context, unit="dist")
    assert spec.min_available == 2 and spec.queue == "wf" and spec.walltime == 3600.0
    master, worker = spec.roles
    assert master.command == ["torchrun", "--lr", "0.9"]
    assert worker.command == ["/bin/sh", "-c", "torchrun --tag 'v 1'"]
    assert master.image == "localhost/train:1.0"
    assert master.env == {"LOG": "info", "PHALANX_RUN_ID": "r2", "PHALANX_STEP": "dist"}
    # Roles in an image mount the workspace, to see the artifacts at their paths.
    mounted = job_spec(node, context, unit="dist", mounts=WS.mounts())
    assert [role.mounts for role in mounted.roles] == [["/data/wf"], ["/data/wf"]]
    assert Workspace("s3://bucket/wf").mounts() == ()  # reached by its URLs
    tri = build_graph(load_pipelines(TRI)[0].spec).steps["prep"]
    [on_host] = job_spec(tri, Context(step="prep", outputs={"data": "d"}), mounts=WS.mounts()).roles
    assert on_host.image is None and on_host.mounts == []  # a host task sees them anyway


def test_an_unresolved_reference_or_an_oversized_command_names_the_step() -> None:
    graph = build_graph(load_pipelines(TRI)[0].spec)
    node = graph.steps["train"]
    with pytest.raises(TemplateError, match=r"step train, command\[2\]: \{\{inputs.data\}\}"):
        job_spec(node, Context(step="train", params={"lr": 1}))
    huge = Context(
        step="train",
        params={"lr": "x" * 70_000},
        inputs={"data": "d"},
        outputs={"model": "m"},
    )
    with pytest.raises(
        InvalidInput, match=r"step train: the rendered job: .*more than the limit"
    ) as info:
        job_spec(node, huge)
    assert info.value.field == "roles[0].command[2]" and info.value.fix


def test_workspace_paths_carry_the_lineage_and_refuse_escaping_run_ids() -> None:
    assert WS.output_url("r1", Unit("train", 3), "model") == "/data/wf/runs/r1/train/3/model"
    assert Workspace("s3://b/wf/").run_url("r-1.2") == "s3://b/wf/runs/r-1.2"
    for bad in ("..", "../x", "a/b", "", ".hidden", "a b"):
        with pytest.raises(ValueError, match="cannot name a directory"):
            WS.run_url(bad)


@pytest.mark.parametrize(
    ("spec", "text", "expected"),
    [
        ({}, '{"a": [1, 2]}', {"a": [1, 2]}),
        ({"type": "float"}, "0.93", 0.93),
        ({"type": "float"}, "1", 1.0),
        ({"type": "float", "key": "eval.acc"}, '{"eval": {"acc": 0.5}}', 0.5),
        ({"type": "list"}, '["a", 1]', ["a", 1]),
        ({"type": "string"}, '"; rm -rf /"', "; rm -rf /"),
    ],
)
def test_output_params_are_read_and_typed(
    spec: dict[str, object], text: str, expected: object
) -> None:
    assert read_output_param("x", OutputParam.model_validate(spec), text) == expected


@pytest.mark.parametrize(
    ("spec", "text", "message"),
    [
        ({"type": "float"}, '"high"', "output x: high is not a float"),
        ({"type": "bool"}, "1", "output x: 1 is not a bool"),
        ({}, "{not json", "output x: not JSON"),
        ({"key": "a.b"}, '{"a": 1}', "the JSON has no key 'a.b'"),
        ({}, " " * (MAX_PARAM_BYTES + 1), "more than"),
        ({}, "[" * 100_000, "not JSON"),
        ({}, "[1, NaN]", "NaN is not a JSON number"),
        ({"type": "float"}, "Infinity", "Infinity is not a JSON number"),
    ],
)
def test_bad_output_params_fail_with_the_reason(
    spec: dict[str, object], text: str, message: str
) -> None:
    with pytest.raises(OutputError, match=message):
        read_output_param("x", OutputParam.model_validate(spec), text)


def test_outputs_are_read_from_the_workspace_through_fsspec(tmp_path: Path) -> None:
    graph = build_graph(load_pipelines(FULL)[0].spec)
    node = graph.steps["train"]
    workspace = Workspace(str(tmp_path))
    urls = workspace.outputs("r1", Unit("train", 0), node)
    Path(urls["metrics"]).parent.mkdir(parents=True)
    Path(urls["metrics"]).write_text(json.dumps({"eval": {"accuracy": 0.91}}))
    assert read_outputs(node, urls) == {"accuracy": 0.91}
    memory = Workspace("memory://wf").outputs("r1", Unit("best"), graph.steps["best"])
    with pytest.raises(
        OutputError, match=r"step best, outputs\.params\.score: the step did not write memory://wf"
    ):
        read_outputs(graph.steps["best"], memory)
    with fsspec.open(memory["score"], "w") as stream:
        stream.write("0.75")
    assert read_outputs(graph.steps["best"], memory) == {"score": 0.75}


def test_a_started_unit_gets_its_whole_context_and_job() -> None:
    graph = build_graph(load_pipelines(FULL)[0].spec)
    params = {"lrs": [0.1, 0.2], "threshold": 0.9, "tag": "v1", "dry": False}
    state = apply(
        RunState(params=params, run_id="r1"), plan(graph, RunState(params=params, run_id="r1"))
    )
    state = RunState(
        params=params,
        phases={**state.phases, Unit("data"): Phase.SUCCEEDED},
        outputs={Unit("data"): {"shards": ["a", "b"]}},
        run_id="r1",
    )
    start = next(s for s in plan(graph, state).start if s.unit == Unit("train", 1))
    context = unit_context(
        graph, state, start, outputs=WS.outputs("r1", start.unit, graph.steps["train"])
    )
    assert context.inputs == {"shards": ["a", "b"]}
    assert context.item == 0.2
    [role] = job_spec(graph.steps["train"], context, unit=str(start.unit)).roles
    assert role.command[2] == (
        "python train.py --lr 0.2 --out /data/wf/runs/r1/train/1/model "
        "--metrics /data/wf/runs/r1/train/1/metrics"
    )
    assert role.env["PHALANX_STEP"] == "train[1]"
    assert role.resources == {"cpu": 2, "memory": "4Gi", "gpu": 1}


def test_output_param_errors_name_the_step_and_the_output() -> None:
    with pytest.raises(OutputError, match=r"step best, outputs\.params\.score: .* is not a float"):
        read_output_param(
            "score", OutputParam.model_validate({"type": "float"}), '"x"', step="best"
        )


def test_job_names_are_valid_stable_and_distinct() -> None:
    from phalanx.workflow.jobs import job_name

    assert job_name("r1", Unit("train"), 1) == "r1-train-1"
    assert job_name("r1", Unit("train", 3), 2) == "r1-train-3-2"
    odd = job_name("Run_1/../x", Unit("train"), 1)
    assert odd == job_name("Run_1/../x", Unit("train"), 1)
    assert odd != job_name("run-1-x", Unit("train"), 1)
    assert job_name("A" * 300, Unit("s" * 63, 9999), 100).count("-") >= 3
    for name in (
        odd,
        job_name("A" * 300, Unit("s" * 63, 9999), 100),
        job_name("---", Unit("a"), 1),
    ):
        assert len(name) <= 253
        assert all(c.isdigit() or c.islower() or c == "-" for c in name)
        assert name[0].isalnum() and name[-1].isalnum()


def test_retry_delays_double_up_to_the_maximum_for_the_causes_asked() -> None:
    from phalanx.spec.pipeline.parts import RetrySpec

    retry = RetrySpec.model_validate(
        {"maxAttempts": 5, "backoff": {"initial": "10s", "factor": 3, "max": "1m"}}
    )
    assert [retry.delay(n, "preempted") for n in range(1, 6)] == [10.0, 30.0, 60.0, 60.0, None]
    assert retry.delay(1, "failed") is None  # a plain non-zero exit is not retried by default
    assert RetrySpec.model_validate({"on": ["failed"], "maxAttempts": 2}).delay(1, "failed") == 10.0
    # By default: 3 attempts for what is not the step's fault, 10 s then 20 s apart.
    assert [RetrySpec().delay(n, "nodeLost") for n in (1, 2, 3)] == [10.0, 20.0, None]
    assert RetrySpec().delay(1, "failed") is None


def test_an_attempt_ends_with_the_cause_its_retry_policy_names() -> None:
    def ended(failed: bool, reason: str, message: str) -> tuple[str, str]:
        return attempt_ended("r-s-1", failed=failed, reason=reason, message=message)

    assert ended(False, "Evicted", "evicted by reclaim") == (
        "preempted",
        "job r-s-1 was preempted: evicted by reclaim",
    )
    assert ended(True, "WalltimeExceeded", "ran past 60 s") == (
        "failed",
        "job r-s-1 timed out: ran past 60 s",
    )
    assert ended(True, "TaskLost", "node n1 was lost")[0] == "nodeLost"
    assert ended(True, "Failed", "task exited with code 1; no retries left (maxRetry 0)") == (
        "failed",
        "job r-s-1 failed: task exited with code 1",
    )


def test_an_output_param_read_from_a_directory_fails_its_step_saying_so(tmp_path: Path) -> None:
    graph = build_graph(load_pipelines(FULL)[0].spec)
    node = graph.steps["train"]
    urls = Workspace(str(tmp_path)).outputs("r1", Unit("train", 0), node)
    Path(urls["metrics"]).mkdir(parents=True)  # the step made a directory of its artifact
    with pytest.raises(OutputError, match=r"outputs\.params\.accuracy: .* is a directory, not a"):
        read_outputs(node, urls)


def test_a_plain_path_workspace_is_refused_on_several_nodes() -> None:
    """Steps on other machines would each see a directory of their own."""
    check_shared(None, nodes=1)  # one node: its own disk is every step's
    check_shared("s3://bucket/ws", nodes=3)  # every node reaches a URL
    check_shared("file:///mnt/shared/ws", nodes=3)  # the admin's word: mounted everywhere
    for plain in (None, "/var/lib/phalanx-workspace"):
        with pytest.raises(InvalidInput, match=r"--workspace: .* 3 nodes") as refused:
            check_shared(plain, nodes=3)
        assert "s3://bucket/phalanx" in str(refused.value) and "file:///PATH" in str(refused.value)
