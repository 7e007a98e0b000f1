"""What ``apply`` sends: checked locally first, queues before jobs, as the user wrote it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from phalanx.client import DocumentError, prepare_documents
from phalanx.spec import QueueDocument
from tests.unit.spec.kubeflow_examples import MPI_JOB

JOB = """\
apiVersion: phalanx/v1
kind: Job
metadata: {name: train}
spec:
  queue: nlp
  roles:
  - name: worker
    replicas: 2
    resources: {cpu: 1, gpu: 1}
    command: ["python", "train.py"]
"""
QUEUE = """\
apiVersion: phalanx/v1
kind: Queue
metadata: {name: nlp}
spec: {weight: 2}
"""


def test_queues_come_first_and_are_sent_as_written() -> None:
    prepared = prepare_documents(JOB + "---\n" + QUEUE, source="f.yaml")
    assert [(p.kind, p.name, p.where) for p in prepared] == [
        ("Queue", "nlp", "f.yaml document 2"),
        ("Job", "train", "f.yaml document 1"),
    ]
    assert json.loads(prepared[1].body)["spec"]["roles"][0]["command"] == ["python", "train.py"]


def test_a_path_text_mapping_or_document_are_all_accepted(tmp_path: Path) -> None:
    path = tmp_path / "q.yaml"
    path.write_text(QUEUE)
    assert prepare_documents(path)[0].where == f"{path} document 1"
    assert prepare_documents(str(path))[0].name == "nlp"
    raw = {"apiVersion": "phalanx/v1", "kind": "Queue", "metadata": {"name": "q2"}}
    assert prepare_documents(raw)[0].name == "q2"
    assert prepare_documents(QueueDocument.model_validate(raw))[0].name == "q2"
    assert [p.name for p in prepare_documents([raw, json.loads(json.dumps(raw))])] == ["q2", "q2"]


def test_yaml_dates_survive_as_text() -> None:
    text = QUEUE.replace("metadata: {name: nlp}", "metadata: {name: nlp, labels: {since: x}}")
    text = text.replace("since: x", "since: '2024-01-01'")
    assert (
        json.loads(prepare_documents(text)[0].body)["metadata"]["labels"]["since"] == "2024-01-01"
    )


def test_a_validation_error_names_the_document_line_and_field() -> None:
    text = QUEUE + "---\n" + JOB.replace("gpu: 1}", "gpu: lots}")
    with pytest.raises(DocumentError) as error:
        prepare_documents(text, source="f.yaml")
    message = str(error.value)
    assert message.startswith("f.yaml document 2 (Job train), line 14: spec.roles[0].resources.gpu")
    assert error.value.field == "spec.roles[0].resources.gpu" and error.value.fix


def test_an_unknown_field_points_at_its_own_line() -> None:
    with pytest.raises(DocumentError) as error:
        prepare_documents(JOB.replace("  queue: nlp\n", "  queue: nlp\n  priorty: 3\n"))
    assert "line 6: spec.priorty: unknown field" in str(error.value)


def test_a_missing_field_points_at_the_nearest_enclosing_line() -> None:
    with pytest.raises(DocumentError) as error:
        prepare_documents(JOB.replace("    replicas: 2\n", "    replicas: two\n"))
    assert "line 8: spec.roles[0].replicas" in str(error.value)


def test_a_syntax_error_keeps_the_loaders_line() -> None:
    with pytest.raises(DocumentError) as error:
        prepare_documents("a: [1,\nb: 2\n", source="s.yaml")
    assert "s.yaml document 1, line 3" in str(error.value)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("", "holds no documents"),
        (
            "apiVersion: phalanx/v1\nkind: Cluster\nmetadata: {name: c}\n"
            "spec: {nodeGroups: [{name: n, count: 1, resources: {cpu: 1}}]}\n",
            "phalanx up --cluster FILE",
        ),
    ],
)
def test_what_apply_does_not_send(text: str, expected: str) -> None:
    with pytest.raises(DocumentError) as error:
        prepare_documents(text + "\n", source="x.yaml")
    assert expected in str(error.value)


def test_a_missing_file_is_a_document_error(tmp_path: Path) -> None:
    with pytest.raises(DocumentError) as error:
        prepare_documents(tmp_path / "none.yaml")
    assert "cannot read" in str(error.value)


def test_a_kubeflow_job_is_sent_as_written_and_its_unhonoured_fields_are_told(
    tmp_path: Path,
) -> None:
    path = tmp_path / "mpi.yaml"
    path.write_text(MPI_JOB)
    warnings: list[str] = []
    (prepared,) = prepare_documents(path, warn=warnings.append)
    assert (prepared.kind, prepared.name) == ("Job", "tensorflow-benchmarks")
    assert json.loads(prepared.body)["kind"] == "MPIJob"
    assert warnings[0] == (
        f"{path} document 1 (MPIJob tensorflow-benchmarks): spec.runPolicy.cleanPodPolicy: "
        "not honoured: a phalanx job's tasks all stop when it ends"
    )


FLOW = """\
from phalanx.workflow import PipelineBuilder

p = PipelineBuilder("flow", defaults={"queue": "wf", "resources": {"cpu": 1}})
prep = p.step("prep", command="echo hi > {{outputs.data}}", outputs=["data"])
p.step("show", inputs={"artifacts": {"data": prep.outputs.data}}, command="cat {{inputs.data}}")
boxed = PipelineBuilder("boxed", defaults={"queue": "wf"})
boxed.step("dist", job={"roles": [{"name": "w", "replicas": 2, "resources": {"cpu": 1}}]})
built = boxed.build()
if __name__ == "__main__":
    raise SystemExit("not run by apply")
"""


def test_a_python_file_gives_the_pipelines_its_dsl_builds(tmp_path: Path) -> None:
    script = tmp_path / "flow.py"
    script.write_text(FLOW)
    prepared = prepare_documents(script)
    assert [(d.kind, d.name, d.where) for d in prepared] == [
        ("Pipeline", "flow", f"{script}:p document 1"),
        ("Pipeline", "boxed", f"{script}:boxed document 1"),
        ("Pipeline", "boxed", f"{script}:built document 1"),
    ]
    flow = json.loads(prepared[0].body)
    assert flow["spec"]["steps"]["show"]["inputs"] == {
        "artifacts": {"data": "{{steps.prep.outputs.data}}"}
    }
    # Sent as written: the job step names no queue, so it runs in the pipeline's.
    assert "queue" not in json.loads(prepared[1].body)["spec"]["steps"]["dist"]["job"]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("x = 1\n", "builds no document; fix: assign a PipelineBuilder"),
        ("x = 1\n1 / 0\n", "running it raised ZeroDivisionError at line 2: division by zero"),
        (
            "from phalanx.workflow import PipelineBuilder\n"
            "b = PipelineBuilder('bad', defaults={'queue': 'wf'})\n"
            "b.step('s', command='true')\n"
            "b.build()\n",
            "has no resources",
        ),
    ],
)
def test_a_python_file_that_builds_nothing_or_fails_is_one_error(
    tmp_path: Path, text: str, expected: str
) -> None:
    script = tmp_path / "flow.py"
    script.write_text(text)
    with pytest.raises(DocumentError) as refused:
        prepare_documents(script)
    assert expected in str(refused.value) and str(script) in str(refused.value)
