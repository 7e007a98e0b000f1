"""ProcessRecord: a JSON round trip, and bad fields named."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from phalanx.domain.errors import InvalidInput
from phalanx.domain.job import ServiceClass
from phalanx.executors.cgroups import IsolationKind
from phalanx.executors.records import ProcessRecord, read_record, write_record


def record() -> ProcessRecord:
    return ProcessRecord(
        job="bert",
        task="bert-worker-0",
        node="n0",
        pid=4242,
        start_time=1_700_000_000.25,
        workdir="/data/tasks/bert/bert-worker-0",
        workload=ServiceClass.OFFLINE,
        gpus=(0, 3),
    )


def test_a_record_survives_json() -> None:
    assert ProcessRecord.from_dict(json.loads(json.dumps(record().to_dict()))) == record()


def test_a_cgroup_record_survives_json() -> None:
    caged = replace(record(), isolation=IsolationKind.CGROUP2, cgroup="/sys/fs/cgroup/p/bert:w0")
    assert ProcessRecord.from_dict(json.loads(json.dumps(caged.to_dict()))) == caged


def test_a_record_from_before_isolation_was_recorded_reads_as_rlimit() -> None:
    data = record().to_dict()
    del data["isolation"], data["cgroup"]
    read = ProcessRecord.from_dict(data)
    assert (read.isolation, read.cgroup) == (IsolationKind.RLIMIT, "")


def test_where_the_logs_were_written_survives_json_and_an_older_record_tells_it_from_workdir() -> (
    None
):
    written = replace(record(), logs="/old/tasks/bert/bert-worker-0")
    assert ProcessRecord.from_dict(json.loads(json.dumps(written.to_dict()))) == written
    assert written.log_dir == "/old/tasks/bert/bert-worker-0"
    data = record().to_dict()
    del data["logs"]
    older = ProcessRecord.from_dict(data)
    assert (older.logs, older.log_dir) == ("", "/data/tasks/bert/bert-worker-0")
    assert replace(older, container="c").log_dir == ""  # its workdir is the server's own


def test_a_group_is_recorded_exactly_for_cgroup_isolation() -> None:
    with pytest.raises(InvalidInput) as error:
        replace(record(), isolation=IsolationKind.CGROUP2)
    assert error.value.field == "cgroup"
    with pytest.raises(InvalidInput):
        replace(record(), cgroup="/sys/fs/cgroup/p/bert:w0")


def test_workload_and_gpus_may_be_left_out() -> None:
    data = record().to_dict()
    del data["workload"], data["gpus"]
    read = ProcessRecord.from_dict(data)
    assert (read.workload, read.gpus) == (ServiceClass.ONLINE, ())


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("job", ""),
        ("task", None),
        ("pid", "4242"),
        ("pid", True),
        ("pid", 0),
        ("start_time", -1.0),
        ("workload", "batch"),
        ("gpus", [0, "1"]),
        ("isolation", "docker"),
        ("cgroup", "relative/group"),
        ("cgroup", 7),
        ("logs", 3),
    ],
)
def test_bad_fields_are_named(field: str, value: Any) -> None:
    data: dict[str, Any] = dict(record().to_dict())
    data[field] = value
    with pytest.raises(InvalidInput) as error:
        ProcessRecord.from_dict(data)
    assert error.value.field == field


def test_a_record_file_reads_back_and_a_bad_one_reads_as_none(tmp_path: Path) -> None:
    path = tmp_path / "process.json"
    assert read_record(path) is None
    write_record(path, record())
    assert read_record(path) == record()
    path.write_text("{half")
    assert read_record(path) is None
