"""Shared loader pieces: gang splits, row errors, CSV reading, workload assembly."""

from __future__ import annotations

from pathlib import Path

import pytest

from phalanx.domain.errors import DocumentError
from phalanx.sim.traces._common import (
    assemble,
    gang_role,
    gpu_role,
    note_unique,
    number,
    one_role_job,
    read_csv,
    split_gang,
)
from phalanx.sim.workload import WorkloadJob


@pytest.mark.parametrize(
    ("gpus", "per_node", "expected"),
    [
        (1, 8, (1, 1)),
        (8, 8, (1, 8)),
        (12, 8, (2, 6)),
        (16, 8, (2, 8)),
        (24, 8, (3, 8)),
        (128, 8, (16, 8)),
        (8, 4, (2, 4)),
        (9, 8, (3, 3)),
        (11, 8, (11, 1)),
    ],
)
def test_split_gang_uses_the_fewest_even_tasks_no_larger_than_a_node(
    gpus: int, per_node: int, expected: tuple[int, int]
) -> None:
    tasks, per_task = split_gang(gpus, per_node)
    assert (tasks, per_task) == expected
    assert tasks * per_task == gpus and per_task <= per_node


def test_number_names_file_line_column_and_fix(tmp_path: Path) -> None:
    where = (tmp_path / "t.csv", 7, "duration")
    assert number("2.5", where=where) == 2.5
    with pytest.raises(DocumentError) as caught:
        number("abc", where=where)
    message = str(caught.value)
    assert "t.csv, line 7: duration: 'abc' is not a number" in message and "fix:" in message
    assert caught.value.field == "duration"
    with pytest.raises(DocumentError, match="out of range"):
        number("0", where=where, positive=True)
    with pytest.raises(DocumentError, match="not a whole number"):
        number("1.5", where=where, integer=True)
    with pytest.raises(DocumentError, match="not a number"):
        number("nan", where=where)


def test_read_csv_refuses_missing_columns_and_ragged_rows(tmp_path: Path) -> None:
    path = tmp_path / "t.csv"
    path.write_text("a,b\n1,2\n")
    assert read_csv(path, ("a",)) == (["a", "b"], [(2, ["1", "2"])])
    with pytest.raises(DocumentError, match=r"line 1: header: missing column\(s\) c"):
        read_csv(path, ("a", "c"))
    path.write_text("a,b\n1,2\n\n3\n")
    with pytest.raises(DocumentError, match="line 4: row: 1 cells for 2 columns"):
        read_csv(path, ("a",))
    with pytest.raises(DocumentError, match="cannot read"):
        read_csv(tmp_path / "missing.csv", ())
    (tmp_path / "empty.csv").write_text("")
    with pytest.raises(DocumentError, match="empty"):
        read_csv(tmp_path / "empty.csv", ())


def test_assemble_sorts_by_submit_time_then_name_and_slices() -> None:
    role = gpu_role(1, 1.0)
    jobs = [
        WorkloadJob(job=one_role_job(name=name, queue="q", role=role, submit_time=t), duration=1.0)
        for name, t in (("b", 5.0), ("a", 5.0), ("c", 1.0), ("d", 9.0))
    ]
    workload = assemble(jobs, queues=(), source="x")
    assert [job.name for job in workload.jobs] == ["c", "a", "b", "d"]
    assert [j.name for j in assemble(jobs, queues=(), source="x", until=9.0).jobs] == [
        "c",
        "a",
        "b",
    ]
    assert [j.name for j in assemble(jobs, queues=(), source="x", limit=2).jobs] == ["c", "a"]


def test_gpu_role_scales_cpu_and_memory_with_gpus() -> None:
    role = gpu_role(2, 4.0, cpu_per_gpu=4000.0, memory_per_gpu=2.0**35)
    assert role.replicas == 2
    assert dict(role.resources.items()) == {"cpu": 16000.0, "gpu": 4.0, "memory": 2.0**37}
    assert dict(gpu_role(1, 1.0).resources.items()) == {"gpu": 1.0}


def test_gang_role_is_the_split_gang_as_one_gpu_role() -> None:
    role = gang_role(12, 8, cpu_per_gpu=4000.0, memory_per_gpu=2.0**35)
    assert role == gpu_role(2, 6.0, cpu_per_gpu=4000.0, memory_per_gpu=2.0**35)


def test_a_name_met_twice_is_a_row_error_naming_the_first_line() -> None:
    first: dict[str, int] = {}
    note_unique(first, "a", where=(Path("t.csv"), 2, "name"), fix="name jobs once")
    note_unique(first, "b", where=(Path("t.csv"), 3, "name"), fix="name jobs once")
    assert first == {"a": 2, "b": 3}
    with pytest.raises(DocumentError, match="line 5: name: 'a' is also on line 2; fix: name"):
        note_unique(first, "a", where=(Path("t.csv"), 5, "name"), fix="name jobs once")
    with pytest.raises(DocumentError, match="line 6: job_id: 7 is also on line 3"):
        note_unique(first, "b", where=(Path("t.csv"), 6, "job_id"), fix="x", shown="7")
