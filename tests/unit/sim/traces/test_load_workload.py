"""``load_workload``: FORMAT:PATH specs, default paths, and errors that list the formats."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from phalanx.domain.errors import DocumentError
from phalanx.sim.traces import DEFAULT_PATHS, FORMATS, load_workload, synthetic_workload

JOB = {
    "name": "a",
    "submitTime": 3,
    "duration": 60,
    "roles": [{"name": "w", "replicas": 1, "resources": {"gpu": 1}}],
}


@pytest.mark.traces
@pytest.mark.parametrize(
    ("spec", "jobs"),
    [
        ("philly:", 82_247),
        ("openb:", 8152),
        ("tiresias:", 60),
        ("pollux:", 160),
        ("openb:alibaba-gpu-v2023-openb/csv/openb_pod_list_multigpu30.csv", 8508),
        ("pollux:philly-jobs-pollux/workloads-2.0/workload-1.csv", 320),
    ],
)
def test_trace_formats_read_their_files_under_traces_dir(
    traces_dir: Path, spec: str, jobs: int
) -> None:
    assert len(load_workload(spec, traces_dir=traces_dir).jobs) == jobs


@pytest.mark.traces
def test_an_absolute_path_ignores_traces_dir_and_until_slices(traces_dir: Path) -> None:
    path = traces_dir / DEFAULT_PATHS["tiresias"]
    workload = load_workload(f"tiresias:{path}", traces_dir=Path("/nowhere"), until=300.0)
    assert workload.jobs and all(job.submit_time < 300.0 for job in workload.jobs)


def test_jsonl_by_format_or_by_suffix(tmp_path: Path) -> None:
    path = tmp_path / "w.jsonl"
    path.write_text(json.dumps(JOB) + "\n")
    by_suffix = load_workload(str(path), traces_dir=Path("/nowhere"))
    assert [job.name for job in by_suffix.jobs] == ["a"]
    assert load_workload(f"jsonl:{path}").jobs == by_suffix.jobs
    assert load_workload(str(path), until=3.0).jobs == ()


def test_built_in_workloads() -> None:
    assert len(load_workload("kueue:").jobs) == 15_000
    assert load_workload("synthetic:", seed=4) == synthetic_workload(seed=4)
    assert load_workload("synthetic:", seed=4) != load_workload("synthetic:", seed=5)


def test_synthetic_parameters_come_from_a_file(tmp_path: Path) -> None:
    path = tmp_path / "p.yaml"
    path.write_text("jobs: 12\n")
    assert len(load_workload(f"synthetic:{path}", seed=1).jobs) == 12


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        ("alibaba:x.csv", "unknown format 'alibaba'"),
        ("trace.csv", "unknown format 'trace.csv'"),
        ("kueue:x", "kueue takes no path"),
        ("jsonl:", "no path"),
    ],
)
def test_bad_specs_say_what_to_write(spec: str, expected: str) -> None:
    with pytest.raises(DocumentError) as caught:
        load_workload(spec)
    assert expected in str(caught.value)
    if "unknown" in expected:
        assert all(fmt in str(caught.value) for fmt in FORMATS)


def test_a_missing_trace_file_points_at_the_traces_folder(tmp_path: Path) -> None:
    with pytest.raises(DocumentError, match=r"cannot read.*\.\./shared/traces"):
        load_workload("tiresias:", traces_dir=tmp_path)
