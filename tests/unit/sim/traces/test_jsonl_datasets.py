"""Datasets in phalanx's JSONL workloads: roles name them, lines size them; a size that
no role of its line reads, or two sizes of one dataset, name the line and the fix."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from phalanx.domain.errors import DocumentError
from phalanx.domain.job import DataLocality
from phalanx.sim.traces.jsonl import load_jsonl, write_jsonl
from phalanx.sim.workload import Dataset

ROLE = {"name": "worker", "replicas": 1, "resources": {"gpu": 1}}


def _line(name: str, datasets: list[str], sizes: dict[str, object] | None = None) -> str:
    row: dict[str, object] = {
        "name": name,
        "submitTime": 0,
        "duration": 60,
        "roles": [{**ROLE, "datasets": datasets, "dataLocality": "required"}],
    }
    if sizes is not None:
        row["datasetSizes"] = sizes
    return json.dumps(row)


def test_roles_name_datasets_lines_size_them_and_it_reads_back_equal(tmp_path: Path) -> None:
    path = tmp_path / "w.jsonl"
    lines = [_line("a", ["wiki"], {"wiki": "150Gi"}), _line("b", ["wiki", "imagenet"])]
    path.write_text("\n".join(lines) + "\n")
    workload = load_jsonl(path)
    role = workload.jobs[1].job.roles[0]
    assert role.datasets == (("wiki", None), ("imagenet", None))
    assert role.data_locality is DataLocality.REQUIRED
    assert workload.datasets == (Dataset(name="wiki", size=150 * 2**30),)  # imagenet: unsized
    again = tmp_path / "again.jsonl"
    write_jsonl(workload, again)
    loaded = load_jsonl(again)
    assert (loaded.jobs, loaded.datasets) == (workload.jobs, workload.datasets)
    assert [json.loads(text).get("datasetSizes") for text in again.read_text().splitlines()] == [
        {"wiki": "150Gi"},
        {"wiki": "150Gi"},
    ]


@pytest.mark.parametrize(
    ("second", "expected"),
    [
        (
            _line("b", ["wiki"], {"wiki": "100Gi"}),
            "line 2: datasetSizes: 'wiki' is 107374182400 bytes here and 161061273600 on line 1",
        ),
        (_line("b", ["wiki"], {"imagenet": 5}), "line 2: datasetSizes: no role reads 'imagenet'"),
        (_line("b", ["wiki"], {"wiki": "lots"}), "line 2 (b): datasetSizes.wiki"),
    ],
)
def test_a_bad_size_names_the_line_and_the_fix(tmp_path: Path, second: str, expected: str) -> None:
    path = tmp_path / "w.jsonl"
    path.write_text(_line("a", ["wiki"], {"wiki": "150Gi"}) + "\n" + second + "\n")
    with pytest.raises(DocumentError) as caught:
        load_jsonl(path)
    assert expected in str(caught.value) and "fix:" in str(caught.value)
