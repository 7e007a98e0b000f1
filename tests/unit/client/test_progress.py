"""The SDK's progress report, the executor's careful read of it, and its validation."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from pydantic import ValidationError

from phalanx.client import progress
from phalanx.executors.taskenv import read_report
from phalanx.spec.progress import ProgressReport


def test_a_report_is_written_whole_and_reads_back_as_the_domain_progress(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    target = tmp_path / "progress.json"
    monkeypatch.setenv(progress.PROGRESS_FILE, str(target))
    timing = progress.Timing(nodes=1, replicas=2, local_batch=64, step_seconds=0.25)
    assert progress.report(
        step=12, samples=6144, total_samples=60_000, samples_per_second=512.0, timings=[timing]
    )
    assert [p.name for p in tmp_path.iterdir()] == ["progress.json"]  # no partial left
    found = read_report(target, 1024)
    assert found is not None
    report = ProgressReport.model_validate_json(found[1]).to_domain(time=5.0)
    assert (report.step, report.samples_per_second, report.time) == (12, 512.0, 5.0)
    assert (report.samples, report.total_samples) == (6144, 60_000)
    assert report.timings[0].replicas == 2 and report.timings[0].accumulation == 1
    assert report.grad_sqr is None


def test_outside_phalanx_a_report_does_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(progress.PROGRESS_FILE, raising=False)
    assert not progress.report(step=1)


def test_a_report_with_a_typo_or_a_bad_value_is_refused_naming_the_field() -> None:
    with pytest.raises(ValidationError, match="stepz"):
        ProgressReport.model_validate_json(json.dumps({"stepz": 3}))
    with pytest.raises(ValidationError, match="stepSeconds"):
        ProgressReport.model_validate_json(
            json.dumps(
                {"timings": [{"nodes": 1, "replicas": 1, "localBatch": 8, "stepSeconds": 0}]}
            )
        )


def test_the_reader_follows_no_link_and_reads_no_pipe(tmp_path: Path) -> None:
    secret = tmp_path / "secret"
    secret.write_text("not yours")
    link = tmp_path / "link.json"
    link.symlink_to(secret)
    assert read_report(link, 1024) is None
    pipe = tmp_path / "pipe.json"
    os.mkfifo(pipe)
    assert read_report(pipe, 1024) is None  # and it did not block
    assert read_report(tmp_path / "missing.json", 1024) is None
    big = tmp_path / "big.json"
    big.write_text("x" * 5000)
    found = read_report(big, 100)
    assert found is not None and len(found[1]) == 100
