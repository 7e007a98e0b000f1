"""``-o json|yaml``: quantities as documents write them, times in RFC 3339 UTC, and the
API's values kept in each object's ``canonical``."""

from __future__ import annotations

import json

import pytest
import yaml

from phalanx.cli import machine, remote
from phalanx.client import JobView, QueueView, TaskView

NOV_25 = 1795647720.25  # 2026-11-25T23:02:00.25Z


@pytest.mark.parametrize(
    ("name", "amount", "shown"),
    [
        ("cpu", 32000.0, "32"),
        ("cpu", 500.0, "500m"),
        ("cpu", 1500.0, "1500m"),
        ("memory", 256 * 2**30, "256Gi"),
        ("memory", 1.5 * 2**30, "1.5Gi"),
        ("memory", 1_000_000_001.0, "1000000001"),
        ("memory", 0.0, "0"),
        ("gpu-memory", 16 * 2**30, "16Gi"),
        ("gpu", 0.5, "0.5"),
        ("gpu", 1.0, "1"),
        ("rdma/hca", 2.0, "2"),
        ("gpu", float("inf"), "unlimited"),
    ],
)
def test_quantities_are_written_as_documents_write_them(
    name: str, amount: float, shown: str
) -> None:
    assert machine.quantity(name, amount) == shown


def test_a_job_has_written_quantities_and_times_and_keeps_the_canonical_ones() -> None:
    job = JobView(
        name="half",
        queue="q",
        user="u",
        phase="Running",
        created_at=NOV_25,
        started_at=NOV_25 + 60,
        requests={"cpu": 64000.0, "memory": 512 * 2**30, "gpu": 1.0},
        allocated={"gpu": 1.0},
        tasks=[TaskView(name="half-w-0", role="w", index=0, phase="Running", started_at=NOV_25)],
        document={"spec": {"roles": [{"resources": {"cpu": "32", "gpu": 0.5}}]}},
    )
    out = machine.written(job.model_dump(mode="json"))
    assert out["requests"] == {"cpu": "64", "memory": "512Gi", "gpu": "1"}
    assert out["allocated"] == {"gpu": "1"}
    assert (out["created_at"], out["started_at"], out["finished_at"]) == (
        "2026-11-25T23:02:00Z",
        "2026-11-25T23:03:00Z",
        None,
    )
    assert out["canonical"] == {
        "requests": job.requests,
        "allocated": job.allocated,
        "created_at": NOV_25,
        "started_at": NOV_25 + 60,
    }
    assert out["tasks"][0]["started_at"] == "2026-11-25T23:02:00Z"
    assert out["tasks"][0]["canonical"] == {"started_at": NOV_25}
    assert out["document"] == job.document  # as its user wrote it, untouched


def test_json_and_yaml_print_the_same_rule(capsys: pytest.CaptureFixture[str]) -> None:
    queue = QueueView(
        name="q",
        parent="root",
        weight=1,
        guarantee={"gpu": 2.0},
        deserved={"cpu": 128000.0},
        capability={},
        allocated={"memory": 2**40},
        document={},
    )
    remote.emit([queue], remote.Output.JSON)
    as_json = json.loads(capsys.readouterr().out)
    remote.emit(queue, remote.Output.YAML)
    as_yaml = yaml.safe_load(capsys.readouterr().out)
    assert as_json == [as_yaml]
    assert as_yaml["guarantee"] == {"gpu": "2"} and as_yaml["allocated"] == {"memory": "1Ti"}
    assert as_yaml["deserved"] == {"cpu": "128"} and as_yaml["capability"] == {}
    assert as_yaml["canonical"]["allocated"] == {"memory": 2**40}
