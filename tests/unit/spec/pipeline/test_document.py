"""The Pipeline document: the issue's example loads, every feature validates, and every
bad document is refused naming the document, the step, the field and the fix."""

from __future__ import annotations

from dataclasses import replace

import pytest

from phalanx.domain.errors import DocumentError, InvalidInput
from phalanx.spec import KNOWN_KINDS, load_documents
from phalanx.spec.loader import build_pipeline, load_pipelines
from phalanx.spec.pipeline.dag import build_graph
from phalanx.spec.pipeline.document import Pipeline, PipelineDocument
from phalanx.spec.pipeline.params import parse_assignments, resolve
from tests.unit.workflow.examples import FULL, TRI


def edit(text: str, old: str, new: str) -> str:
    assert old in text, old
    return text.replace(old, new, 1)


def test_the_issue_example_loads_as_written() -> None:
    [pipeline] = load_pipelines(TRI, source="tri.yaml")
    assert pipeline.metadata.name == "tri"
    assert list(pipeline.spec.steps) == ["prep", "train", "validate"]
    graph = build_graph(pipeline.spec)
    assert graph.order == ("prep", "train", "validate")
    assert graph.steps["validate"].depends_on == ("train",)  # implied by the reference
    assert graph.steps["train"].queue == "wf"
    assert graph.steps["train"].resources == {"cpu": 1, "memory": "256Mi"}
    assert graph.steps["train"].params_used == {"lr"}
    assert resolve(pipeline.spec.declared_params()) == {"lr": 0.01}


def test_every_feature_resolves_through_components_and_defaults() -> None:
    [pipeline] = load_pipelines(FULL)
    graph = build_graph(pipeline.spec)
    train = graph.steps["train"]
    assert train.command == (
        "/bin/sh",
        "-c",
        "python train.py --lr {{item}} --out {{outputs.model}} --metrics {{outputs.metrics}}",
    )
    assert train.resources == {"cpu": 2, "memory": "4Gi", "gpu": 1}  # the component's
    assert train.image == "localhost/train:1.0"  # the defaults'
    assert train.retry.max_attempts == 3 and train.retry.backoff.max == 60.0
    assert train.timeout == 3600.0 and train.cache.ttl == 7 * 86400.0
    assert train.foreach is not None and train.foreach.max_parallel == 2
    assert graph.steps["shard"].retry.max_attempts == 1
    assert not graph.steps["shard"].cache.enabled
    assert graph.steps["promote"].depends_on == ("best",)
    assert graph.steps["dist"].job is not None and graph.steps["dist"].queue == "wf"
    assert graph.steps["dist"].command is None and graph.steps["dist"].resources is None
    assert list(graph.final) == ["notify"]
    assert graph.on_failure == "continue" and graph.concurrency == 4
    assert graph.downstream("best") == {"promote", "dist"}
    assert pipeline.spec.schedule is not None
    assert pipeline.spec.schedule.concurrency_policy == "skip"
    assert resolve(pipeline.spec.declared_params())["tag"] == "nightly"  # as scheduled runs
    required = [replace(p, default=None) for p in pipeline.spec.declared_params()]
    with pytest.raises(InvalidInput, match=r"params.tag: is required.*-p tag=VALUE"):
        resolve(required, {"lrs": [0.1], "threshold": 0.5, "dry": False})


def test_a_yaml_on_key_means_on() -> None:
    [pipeline] = load_pipelines(FULL)
    assert pipeline.spec.defaults.retry is not None
    assert pipeline.spec.defaults.retry.on == ["preempted", "nodeLost"]


def test_documents_round_trip_through_yaml() -> None:
    for text in (TRI, FULL):
        [pipeline] = load_pipelines(text)
        [again] = load_pipelines(pipeline.to_yaml())
        assert again == pipeline
        assert build_pipeline(pipeline.to_dict()) == pipeline


def test_the_general_loader_reads_pipelines_as_load_pipelines_does() -> None:
    assert "phalanx/v1 Pipeline" in KNOWN_KINDS
    [document] = load_documents(TRI)
    assert document == load_pipelines(TRI)[0]
    assert Pipeline is PipelineDocument
    bad = TRI + "  bogus: 1\n"
    with pytest.raises(DocumentError) as own:
        load_pipelines(bad)
    with pytest.raises(DocumentError) as general:
        load_documents(bad)
    assert "spec.bogus" in str(own.value)
    assert str(general.value) == str(own.value)


STEPS = "  steps:\n"

BAD = [
    # YAML and document shape
    (
        edit(TRI, '"{{steps.prep.outputs.data}}"', "{{steps.prep.outputs.data}}"),
        "line 13, column 35: found unhashable key",
        'quote every value holding {{...}} references, e.g. "{{params.lr}}"',
    ),
    ("apiVersion: phalanx/v1\nkind: Pipeline\nmetadata: {name: x\n", "line 4", "check the YAML"),
    ("- a\n- b\n", "expected a mapping, got a list", "write a mapping"),
    (
        TRI.replace("apiVersion: phalanx/v1\n", ""),
        "apiVersion: is required",
        "write apiVersion: phalanx/v1",
    ),
    (
        edit(TRI, "  params: {lr: 0.01}", "  params: {lr: null}"),
        "spec.params.lr: expected a string, number or boolean, got null",
        "write a scalar",
    ),
    (
        edit(TRI, "  params: {lr: 0.01}", "  params: {lr: [1, [2]]}"),
        "spec.params.lr[1]: expected a string, number or boolean, got a list",
        "write a scalar",
    ),
    (
        edit(TRI, "  params: {lr: 0.01}", "  params: {lr: .nan}"),
        "spec.params.lr: expected a string, number or boolean, got nan",
        "write a scalar",
    ),
    (
        edit(TRI, "kind: Pipeline", "kind: Job"),
        "kind: 'Job' is not Pipeline",
        "kind: Pipeline",
    ),
    (
        edit(TRI, "spec:\n", "spec:\n  onFailur: continue\n"),
        "spec.onFailur: unknown field",
        "did you mean 'onFailure'",
    ),
    (
        edit(TRI, "      outputs: {artifacts: [data]}", "      output: {artifacts: [data]}"),
        "spec.steps.prep.output: unknown field",
        "did you mean 'outputs'",
    ),
    (
        edit(TRI, "    prep:", "    Prep_1:"),
        "spec.steps.Prep_1 (the key): 'Prep_1' is not a valid name",
        "lowercase",
    ),
    (
        edit(TRI, "  steps:\n", "  onFailure: stop\n  steps:\n"),
        "spec.onFailure: 'stop' is not allowed",
        "failFast",
    ),
    (
        edit(TRI, "  steps:\n", "  concurrency: 0\n  steps:\n"),
        "spec.concurrency: must be >= 1",
        ">= 1",
    ),
    # dependencies and references
    (
        edit(TRI, "dependsOn: [prep]", "dependsOn: [prepp]"),
        "spec.steps.train.dependsOn[0]: 'prepp' is not a step",
        "did you mean 'prep'",
    ),
    (
        edit(TRI, "dependsOn: [prep]", "dependsOn: [train]"),
        "spec.steps.train.dependsOn[0]: a step cannot depend on itself",
        "remove",
    ),
    (
        edit(
            TRI,
            "      outputs: {artifacts: [data]}",
            "      outputs: {artifacts: [data]}\n      dependsOn: [validate]",
        ),
        "spec.steps.prep.dependsOn: steps depend on each other in a cycle: prep -> validate -> train -> prep",
        "remove one",
    ),
    (
        edit(TRI, "{{params.lr}}", "{{params.lrr}}"),
        "spec.steps.train.command[2]: {{params.lrr}}: no such parameter",
        "did you mean 'lr'",
    ),
    (
        edit(TRI, "{{inputs.data}}", "{{inputs.dat}}"),
        "spec.steps.train.command[2]: {{inputs.dat}}: the step has no such input",
        "did you mean 'data'",
    ),
    (
        edit(TRI, "{{outputs.model}}", "{{outputs.modle}}"),
        "spec.steps.train.command[2]: {{outputs.modle}}: the step has no such output",
        "did you mean 'model'",
    ),
    (
        edit(TRI, "{{steps.train.outputs.model}}", "{{steps.train.outputs.data}}"),
        "spec.steps.validate.inputs.artifacts.model: {{steps.train.outputs.data}}: step 'train' has no such output",
        "known: model",
    ),
    (
        edit(TRI, "{{steps.train.outputs.model}}", "{{steps.trian.outputs.model}}"),
        "{{steps.trian.outputs.model}}: no such step",
        "did you mean 'train'",
    ),
    (
        edit(TRI, "{{steps.prep.outputs.data}}", "{{steps.train.outputs.model}}"),
        "a step cannot read its own outputs",
        "{{outputs.model}}",
    ),
    (edit(TRI, "{{params.lr}}", "{{item}}"), "{{item}}: the step has no foreach", "add a foreach"),
    (
        edit(TRI, "{{params.lr}}", "{{params.lr"),
        "spec.steps.train.command[2]: {{ at character",
        "close it",
    ),
    (
        edit(TRI, "{{params.lr}}", "{{params.lr | upper}}"),
        "spec.steps.train.command[2]: {{params.lr | upper}}: unknown filter",
        "shquote",
    ),
    (
        edit(TRI, '"{{steps.prep.outputs.data}}"', '"{{outputs.data}}"'),
        "spec.steps.train.inputs.artifacts.data: {{outputs.data}}: outputs cannot be used here",
        "refer to params",
    ),
    # conditions
    (
        edit(
            TRI,
            "      outputs: {artifacts: [model]}",
            '      outputs: {artifacts: [model]}\n      when: "{{params.lr}} >"',
        ),
        "spec.steps.train.when: the condition ends too early",
        "write comparisons",
    ),
    (
        edit(
            TRI,
            "      outputs: {artifacts: [model]}",
            '      outputs: {artifacts: [model]}\n      when: "{{params.lr}} > 1 ; rm -rf /"',
        ),
        "spec.steps.train.when: cannot read",
        "write comparisons",
    ),
    (
        edit(
            TRI,
            "      outputs: {artifacts: [model]}",
            '      outputs: {artifacts: [model]}\n      when: "{{steps.nope.outputs.x}} > 1"',
        ),
        "spec.steps.train.when: {{steps.nope.outputs.x}}: no such step",
        "known: prep, train, validate",
    ),
    # fan-out
    (
        edit(
            TRI,
            "      outputs: {artifacts: [model]}",
            "      outputs: {artifacts: [model]}\n      foreach: {items: [1, 2]}",
        ),
        "spec.steps.train.foreach.maxItems: is required",
        "add this field",
    ),
    (
        edit(
            TRI,
            "      outputs: {artifacts: [model]}",
            "      outputs: {artifacts: [model]}\n      foreach: {items: [1, 2, 3], maxItems: 2}",
        ),
        "spec.steps.train.foreach.items: 3 items is more than maxItems (2)",
        "raise maxItems",
    ),
    (
        edit(
            TRI,
            "      outputs: {artifacts: [model]}",
            "      outputs: {artifacts: [model]}\n      foreach: {items: [1], maxItems: 20000}",
        ),
        "spec.steps.train.foreach.maxItems: must be <= 10000",
        "<= 10000",
    ),
    (
        edit(
            TRI,
            "      outputs: {artifacts: [model]}",
            '      outputs: {artifacts: [model]}\n      foreach: {items: "{{params.lr}}", maxItems: 5}',
        ),
        "spec.steps.train.foreach.items: {{params.lr}}: is a float parameter",
        "list parameter",
    ),
    (
        edit(
            TRI,
            "      outputs: {artifacts: [model]}",
            '      outputs: {artifacts: [model]}\n      foreach: {items: "a {{params.lr}}", maxItems: 5}',
        ),
        "spec.steps.train.foreach.items: is neither a list nor one reference",
        "exactly one reference",
    ),
    (
        edit(
            TRI,
            "      outputs: {artifacts: [model]}",
            '      outputs: {artifacts: [model]}\n      foreach: {items: [{a: 1}, {b: 2}], maxItems: 5}\n      env: {X: "{{item.a}}"}',
        ),
        "spec.steps.train.env.X: {{item.a}}: item 1 has no key 'a'",
        "give every item",
    ),
    # resources, components, jobs
    (
        edit(TRI, "  defaults: {queue: wf, resources: {cpu: 1, memory: 256Mi}}\n", ""),
        "spec.steps.prep: has no resources",
        "give resources",
    ),
    (
        edit(
            TRI,
            '      command: ["sh", "-c", "python validate.py {{inputs.model}}"]',
            "      uses: checker",
        ),
        "spec.steps.validate.uses: 'checker' is not a component",
        "known: none",
    ),
    (
        edit(
            TRI,
            '      command: ["sh", "-c", "python validate.py {{inputs.model}}"]',
            "      env: {A: b}",
        ),
        "spec.steps.validate: has neither command nor job",
        "give a command",
    ),
    (
        edit(
            TRI,
            '      command: ["sh", "-c", "python validate.py {{inputs.model}}"]',
            "      command: x\n      job: {roles: [{name: m, replicas: 1, resources: {cpu: 1}}]}",
        ),
        "spec.steps.validate.command: is not allowed together with job",
        "give command in the job",
    ),
    (
        edit(TRI, "  params: {lr: 0.01}", "  params: {lr: {type: int, default: 0.01}}"),
        "spec.params.lr.default: 0.01 is not an int",
        "give a default of type int",
    ),
    (edit(TRI, "  params: {lr: 0.01}", "  params: {lr: {a: 1}}"), "spec.params.lr", "type"),
    (
        edit(TRI, "  params: {lr: 0.01}", "  params: {lr-rate: 0.01}"),
        "spec.params.lr-rate (the key): 'lr-rate' is not a valid name here",
        "letters, digits and '_'",
    ),
    (
        edit(TRI, "      outputs: {artifacts: [data]}", "      outputs: {artifacts: [data, data]}"),
        "spec.steps.prep.outputs.artifacts[1]: 'data' is listed twice",
        "list it once",
    ),
    (
        edit(
            TRI, "  defaults: {queue: wf", "  defaults: {cache: {excludeParams: [lrr]}, queue: wf"
        ),
        "spec.steps.prep.cache.excludeParams[0]: 'lrr' is not a parameter",
        "did you mean 'lr'",
    ),
    (
        edit(TRI, "  steps:\n", "  schedule: {cron: '0 0 30 2 *'}\n  steps:\n"),
        "spec.schedule.cron: '0 0 30 2 *' never fires",
        "choose a day",
    ),
    (
        edit(TRI, "  steps:\n", "  schedule: {cron: '61 * * * *'}\n  steps:\n"),
        "spec.schedule.cron: minute: 61 is outside 0-59",
        "use 0 to 59",
    ),
    # finally
    (
        edit(TRI, "  steps:\n", "  finally:\n    prep: {command: x}\n  steps:\n"),
        "spec.finally.prep: 'prep' is both a step and a finally step",
        "different names",
    ),
    (
        edit(
            TRI,
            "  steps:\n",
            "  finally:\n    a: {command: x}\n    b: {command: x, dependsOn: [a]}\n  steps:\n",
        ),
        "spec.finally.b.dependsOn[0]: 'a' is a finally step",
        "normal steps only",
    ),
    (
        edit(TRI, "dependsOn: [prep]", "dependsOn: [fin]").replace(
            "  steps:\n", "  finally:\n    fin: {command: x}\n  steps:\n", 1
        ),
        "spec.steps.train.dependsOn[0]: 'fin' is a finally step",
        "normal steps only",
    ),
    # sub-pipelines
    (
        TRI.replace("  steps:\n", "  steps:\n    sub: {pipeline: {name: x}, command: ['true']}\n"),
        "spec.steps.sub.command: is not allowed together with pipeline",
        "give them that pipeline",
    ),
    (
        TRI.replace(
            "  steps:\n", "  steps:\n    sub: {pipeline: {name: x}, outputs: {artifacts: [a]}}\n"
        ),
        "spec.steps.sub.outputs: is not allowed together with pipeline",
        "give them that pipeline",
    ),
    (
        TRI.replace(
            "  steps:\n",
            "  steps:\n    sub: {pipeline: {name: x, params: {a: '{{steps.prep.outputs.nope}}'}}}\n",
        ),
        "spec.steps.sub.pipeline.params.a: {{steps.prep.outputs.nope}}: step 'prep' has no such output",
        "declare it in its outputs",
    ),
]


def test_a_sub_pipeline_step_depends_on_what_its_params_read() -> None:
    text = TRI.replace(
        "  steps:\n",
        "  steps:\n    sub: {pipeline: {name: other, params: {data: '{{steps.prep.outputs.data}}'}}}\n",
    )
    graph = build_graph(load_pipelines(text)[0].spec)
    sub = graph.steps["sub"]
    assert sub.depends_on == ("prep",) and sub.pipeline is not None
    assert sub.command is None and sub.job is None and sub.resources is None
    assert not sub.cache.enabled and sub.timeout is None  # the child's steps have theirs


@pytest.mark.parametrize(("text", "message", "fix"), BAD)
def test_bad_documents_are_refused_naming_the_field_and_the_fix(
    text: str, message: str, fix: str
) -> None:
    with pytest.raises(DocumentError) as info:
        load_pipelines(text, source="p.yaml")
    assert str(info.value).startswith("p.yaml document 1")
    assert message in str(info.value)
    assert info.value.fix is not None and fix in info.value.fix


def test_an_error_in_a_component_or_the_defaults_points_there_and_names_the_step() -> None:
    text = edit(
        TRI,
        "  steps:\n",
        "  components:\n    checker: {command: [check, '{{inputs.modle}}']}\n  steps:\n",
    )
    text = edit(
        text,
        '      command: ["sh", "-c", "python validate.py {{inputs.model}}"]',
        "      uses: checker",
    )
    with pytest.raises(DocumentError) as info:
        load_pipelines(text)
    assert (
        "spec.components.checker.command[1]: {{inputs.modle}}: the step has no such input (in step validate)"
        in str(info.value)
    )
    assert info.value.fix is not None and "did you mean 'model'" in info.value.fix
    text = edit(
        TRI, "  defaults: {queue: wf,", "  defaults: {env: {LR: '{{params.rate}}'}, queue: wf,"
    )
    with pytest.raises(
        DocumentError,
        match=r"spec\.defaults\.env\.LR: \{\{params\.rate\}\}: no such parameter \(in step prep\)",
    ):
        load_pipelines(text)


def test_a_hundred_thousand_items_are_refused_before_they_are_read() -> None:
    items = ", ".join(["1"] * 100_000)
    text = edit(
        TRI,
        "      outputs: {artifacts: [model]}",
        f"      outputs: {{artifacts: [model]}}\n      foreach: {{items: [{items}], maxItems: 10000}}",
    )
    with pytest.raises(
        DocumentError, match=r"foreach\.items: 100000 items is more than the limit of 10000"
    ):
        load_pipelines(text)


def test_parameters_are_overridden_with_type_checks() -> None:
    [pipeline] = load_pipelines(FULL)
    declared = pipeline.spec.declared_params()
    values = resolve(
        declared, parse_assignments(["tag=v1", "threshold=1", "lrs=[0.5]", "dry=true"])
    )
    assert values == {"lrs": [0.5], "threshold": 1.0, "tag": "v1", "dry": True}
    assert resolve(declared, {"tag": "; rm -rf /"})["tag"] == "; rm -rf /"
    for pairs, message in [
        (
            ["tag=x", "threshold=high"],
            r"params.threshold: 'high' is not a float; fix: give a number",
        ),
        (["tag=x", "dry=yes"], r"params.dry: 'yes' is not a bool; fix: give true or false"),
        (["tag=x", "lrs=1"], r"params.lrs: '1' is not a list"),
        (["tag=x", "treshold=1"], r"params.treshold: 'treshold' is not a parameter.*threshold"),
        (["tag"], "is not key=value"),
        (["tag=a", "tag=b"], r"params.tag: is given twice"),
    ]:
        with pytest.raises(InvalidInput, match=message):
            resolve(declared, parse_assignments(pairs))
    with pytest.raises(InvalidInput, match=r"params.threshold: 'true' is not a float"):
        resolve(declared, {"tag": "x", "threshold": True})


def test_a_broken_template_in_a_job_steps_role_is_refused_at_that_command() -> None:
    text = """\
apiVersion: phalanx/v1
kind: Pipeline
metadata: {name: p}
spec:
  steps:
    dist:
      job: {roles: [{name: m, replicas: 1, resources: {cpu: 1}, command: "{{"}]}
"""
    with pytest.raises(DocumentError) as refused:
        load_pipelines(text)
    said = str(refused.value)
    assert "spec.steps.dist.job.roles.0.command" in said or "roles[0].command" in said, said
    assert "is never closed" in said and "fix:" in said
