"""phalanx's JSONL workload format: round trips and bad lines with their line numbers."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from phalanx.domain.errors import DocumentError
from phalanx.domain.job import Job, JobPhase, NodeSelectorRequirement, Role, SelectorOperator
from phalanx.domain.node import TaintEffect, Toleration
from phalanx.domain.resources import Resources
from phalanx.sim.traces.jsonl import load_jsonl, quantity, write_jsonl
from phalanx.sim.traces.openb import load_openb
from phalanx.sim.traces.philly import load_philly
from phalanx.sim.traces.pollux import load_pollux
from phalanx.sim.workload import Workload, WorkloadJob

GIB = 2**30


def _rich_workload() -> Workload:
    master = Role(
        name="master",
        replicas=1,
        resources=Resources.of({"cpu": 500.0, "memory": 3 * GIB + 512, "gpu": 0.25}),
        command=("python", "train.py"),
        node_selector={"zone": "a"},
        affinity=(
            NodeSelectorRequirement(
                key="phalanx.io/gpu-model", operator=SelectorOperator.IN, values=("A100", "H100")
            ),
            NodeSelectorRequirement(key="spot", operator=SelectorOperator.DOES_NOT_EXIST),
        ),
        tolerations=(
            Toleration(key="gpu", value="yes", effect=TaintEffect.NO_SCHEDULE),
            Toleration(operator="Exists"),
        ),
    )
    worker = Role(
        name="worker",
        replicas=3,
        resources=Resources.of({"cpu": 8000.0, "memory": 32.0 * GIB, "gpu": 8, "rdma/hca": 1}),
        depends_on=("master",),
    )
    rich = Job(
        name="bert-1",
        queue="nlp",
        roles=(master, worker),
        user="ann@example.com",
        priority=-5,
        min_available=3,
        creation_time=12.5,
        preemptible=False,
        walltime=7200.0,
        runtime_estimate=3000.0,
        starvation_threshold=600.0,
        max_retry=0,
    )
    plain = Job(
        name="tiny",
        queue="default",
        roles=(Role(name="main", replicas=1, resources=Resources.of({"cpu": 1500.0})),),
    )
    return Workload(
        jobs=(
            WorkloadJob(job=plain, duration=0.2),
            WorkloadJob(
                job=rich,
                duration=3600.0,
                checkpoint_interval=900.0,
                restart_delay=30.0,
                fail_after=(30.0, 600.0),
            ),
        )
    )


def test_a_written_workload_reads_back_equal(tmp_path: Path) -> None:
    workload = _rich_workload()
    path = tmp_path / "w.jsonl"
    write_jsonl(workload, path)
    loaded = load_jsonl(path)
    assert loaded.jobs == workload.jobs
    assert [q.name for q in loaded.queues] == ["default", "nlp"]
    assert all(job.job.phase is JobPhase.PENDING for job in loaded.jobs)
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    assert rows[1]["roles"][1]["resources"] == {"cpu": 8, "gpu": 8, "memory": "32Gi", "rdma/hca": 1}
    assert rows[0] == {
        "name": "tiny",
        "submitTime": 0.0,
        "duration": 0.2,
        "queue": "default",
        "user": "default",
        "priority": 0,
        "roles": [{"name": "main", "replicas": 1, "resources": {"cpu": "1500m"}}],
    }


@pytest.mark.parametrize(
    ("name", "amount", "written"),
    [
        ("cpu", 4000.0, 4),
        ("cpu", 1500.0, "1500m"),
        ("cpu", 0.5, "0.5m"),
        ("memory", 32.0 * GIB, "32Gi"),
        ("memory", 1536.0 * 2**20, "1536Mi"),
        ("memory", 1000.0, 1000),
        ("gpu", 0.46, 0.46),
        ("gpu", 2.0, 2),
        ("gpu-memory", 80.0 * GIB, "80Gi"),
    ],
)
def test_quantities_are_written_exactly(name: str, amount: float, written: object) -> None:
    assert quantity(name, amount) == written
    assert Resources.parse({name: written}).get(name) == amount


@pytest.mark.traces
def test_real_traces_round_trip(traces_dir: Path, tmp_path: Path) -> None:
    openb = load_openb(traces_dir / "alibaba-gpu-v2023-openb/csv/openb_pod_list_gpuspec33.csv")
    philly = load_philly(traces_dir / "philly-jobs-pollux/philly.csv.gz", limit=3000)
    # jsonl keeps jobs and durations, not an elastic job's application profile
    pollux = load_pollux(traces_dir / "philly-jobs-pollux/workloads/workload-6.csv", elastic=False)
    for workload in (openb, philly, pollux):
        path = tmp_path / "trace.jsonl"
        write_jsonl(workload, path)
        assert load_jsonl(path).jobs == workload.jobs


GOOD = {
    "name": "a",
    "submitTime": 0,
    "duration": 60,
    "queue": "q",
    "user": "u",
    "priority": 1,
    "minAvailable": 1,
    "roles": [{"name": "worker", "replicas": 1, "resources": {"gpu": 1}}],
}


def _write(tmp_path: Path, bad: str) -> Path:
    path = tmp_path / "bad.jsonl"
    path.write_text(json.dumps(GOOD) + "\n\n" + bad + "\n")
    return path


@pytest.mark.parametrize(
    ("patch", "expected"),
    [
        ({"durations": 5}, "durations: unknown field; fix: did you mean 'duration'?"),
        ({"submitTime": -1}, "submitTime: must be >= 0"),
        ({"duration": 0}, "duration: "),
        ({"priority": "high"}, "priority: expected an integer"),
        ({"minAvailable": 5}, "minAvailable: 5 is more than the job's 1 replicas"),
        ({"roles": []}, "roles: must not be empty"),
        (
            {"roles": [{"name": "w", "replicas": 0, "resources": {}}]},
            "roles[0].replicas: must be >= 1",
        ),
        (
            {"roles": [{"name": "w", "replicas": 1, "resources": {"memory": "16GB"}}]},
            "roles[0].resources.memory",
        ),
        ({"name": "Not_A_Name"}, "name: 'Not_A_Name' is not a valid name"),
        ({"walltime": "soon"}, "walltime: 'soon' is not a duration"),
        ({"failAfter": ["later"]}, "failAfter[0]: 'later' is not a duration"),
    ],
)
def test_a_bad_line_names_the_file_the_line_the_field_and_the_fix(
    tmp_path: Path, patch: dict[str, object], expected: str
) -> None:
    path = _write(tmp_path, json.dumps({**GOOD, "name": "b", **patch}))
    with pytest.raises(DocumentError) as caught:
        load_jsonl(path)
    message = str(caught.value)
    assert message.startswith(f"{path}, line 3")
    assert expected in message and "fix:" in message


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        ("{not json", "line 3: line: not JSON"),
        ("[1, 2]", "line 3: line: expected an object, got list"),
        (json.dumps(GOOD), "line 3: name: 'a' is also on line 1"),
        ('{"name": "c", "submitTime": NaN}', "line 3: line: not JSON"),
    ],
)
def test_lines_that_are_not_job_objects_are_reported(
    tmp_path: Path, line: str, expected: str
) -> None:
    with pytest.raises(DocumentError, match=expected):
        load_jsonl(_write(tmp_path, line))


def test_blank_lines_are_skipped_and_optional_fields_default(tmp_path: Path) -> None:
    path = tmp_path / "w.jsonl"
    path.write_text(
        "\n"
        + json.dumps({"name": "x", "submitTime": 5, "duration": "1h", "roles": GOOD["roles"]})
        + "\n\n"
    )
    (item,) = load_jsonl(path).jobs
    assert (item.submit_time, item.duration, item.checkpoint_interval) == (5.0, 3600.0, None)
    assert (item.job.queue, item.job.user, item.job.priority, item.job.min_available) == (
        "default",
        "default",
        0,
        None,
    )
    assert item.job.preemptible and item.job.max_retry == 3


def test_an_unreadable_file_is_a_document_error(tmp_path: Path) -> None:
    with pytest.raises(DocumentError, match="cannot read"):
        load_jsonl(tmp_path / "missing.jsonl")
    path = tmp_path / "latin1.jsonl"
    path.write_bytes(b'{"name": "\xe9"}\n')
    with pytest.raises(DocumentError, match="not UTF-8"):
        load_jsonl(path)
