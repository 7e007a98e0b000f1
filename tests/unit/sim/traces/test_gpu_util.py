"""A job's recorded GPU utilisation in the trace formats: ``gpuUtil`` in phalanx's JSONL
(written and read back), an optional ``gpu_util`` column in the CSV formats, refused
with the line and the fix when it is not a percent; no shipped trace has it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from phalanx.domain.errors import DocumentError, InvalidInput
from phalanx.sim.traces import DEFAULT_PATHS, load_jsonl, load_tiresias, write_jsonl
from phalanx.sim.traces._common import GPU_UTIL, read_csv
from phalanx.sim.workload import WorkloadJob
from tests.builders import make_job

LINE = {
    "name": "a",
    "submitTime": 0,
    "duration": 60,
    "roles": [{"name": "w", "replicas": 1, "resources": {"gpu": 1}}],
}


def test_gpu_util_is_written_and_read_back(tmp_path: Path) -> None:
    jobs = [
        WorkloadJob(job=make_job("a"), duration=60.0, gpu_util=3.5),
        WorkloadJob(job=make_job("b", created=1.0), duration=60.0),
    ]
    path = tmp_path / "w.jsonl"
    write_jsonl(jobs, path)

    rows = [json.loads(line) for line in path.read_text().splitlines()]
    assert [row.get("gpuUtil") for row in rows] == [3.5, None]
    assert [job.gpu_util for job in load_jsonl(path).jobs] == [3.5, None]


@pytest.mark.parametrize(("value", "said"), [(101, "gpuUtil: must be <= 100"), ("5%", "gpuUtil: ")])
def test_a_gpu_util_that_is_not_a_percent_is_refused(
    tmp_path: Path, value: object, said: str
) -> None:
    path = tmp_path / "w.jsonl"
    path.write_text(json.dumps({**LINE, "gpuUtil": value}) + "\n")

    with pytest.raises(DocumentError) as caught:
        load_jsonl(path)

    assert (
        "line 1" in str(caught.value)
        and "gpuUtil" in str(caught.value)
        and said in str(caught.value)
    )


def test_a_csv_trace_may_give_gpu_util_per_row(tmp_path: Path) -> None:
    path = tmp_path / "jobs.csv"
    path.write_text("job_id,num_gpu,submit_time,duration,gpu_util\n0,1,0,60,2.5\n1,1,5,60,\n")

    assert [job.gpu_util for job in load_tiresias(path).jobs] == [2.5, None]


@pytest.mark.parametrize("cell", ["150", "-1", "busy"])
def test_a_gpu_util_cell_out_of_range_names_the_line_and_the_column(
    tmp_path: Path, cell: str
) -> None:
    path = tmp_path / "jobs.csv"
    path.write_text(f"job_id,num_gpu,submit_time,duration,gpu_util\n0,1,0,60,{cell}\n")

    with pytest.raises(DocumentError, match=rf"line 2: {GPU_UTIL}: .*fix: write"):
        load_tiresias(path)


def test_a_workload_job_refuses_a_utilisation_outside_0_to_100() -> None:
    with pytest.raises(InvalidInput, match=r"0\.\.100"):
        WorkloadJob(job=make_job("a"), duration=1.0, gpu_util=120.0)


@pytest.mark.traces
@pytest.mark.parametrize("fmt", sorted(DEFAULT_PATHS))
def test_no_shipped_trace_records_gpu_utilisation(traces_dir: Path, fmt: str) -> None:
    header, _ = read_csv(traces_dir / DEFAULT_PATHS[fmt], ())

    assert GPU_UTIL not in header and not [c for c in header if "util" in c.lower()]
