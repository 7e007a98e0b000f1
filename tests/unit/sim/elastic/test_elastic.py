"""The elastic ground truth on a profile small enough to work out by hand."""

from __future__ import annotations

import numpy as np
import pytest

from phalanx.sim.elastic import (
    AppProfile,
    ElasticJob,
    JobProgress,
    StepLog,
    advance,
    build_profile,
    fixed_batch,
    step_times,
)
from phalanx.sim.traces.pollux import profile_duration


def curve(*points: tuple[float, float, float]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    table = np.array(points, dtype=np.float64)
    return table[:, 0], table[:, 1], table[:, 2]


def make_profile() -> AppProfile:
    """Two epochs (ending at progress 100 and 240), batch sizes 8 and 32; placements
    "1" and "4" and "22"; scalability 2 nodes x 8 and 4 nodes x 16 replicas."""
    return build_profile(
        "toy",
        placements={
            1: curve((8, 0.5, 0.1), (16, 0.9, 0.1)),
            4: curve((8, 0.6, 0.2), (16, 1.0, 0.2)),
            22: curve((8, 0.8, 0.4), (16, 1.2, 0.4)),
        },
        scalability={
            (2, 8): curve((4, 0.7, 0.3), (8, 0.8, 0.3)),
            (4, 16): curve((2, 0.9, 0.5), (4, 1.0, 0.5)),
        },
        validation={
            8: np.array([[100, 1, 3], [250, 1, 1]], dtype=np.float64),
            32: np.array([[110, 1, 6], [240, 1, 4]], dtype=np.float64),
        },
    )


def test_a_placement_is_read_in_any_rotation_and_by_its_shape() -> None:
    toy = make_profile()
    assert step_times(toy, (2, 2), 12) == pytest.approx((1.0, 0.4))
    assert step_times(toy, (0, 4, 0), 8) == pytest.approx((0.6, 0.2))
    assert step_times(toy, (4, 4), 8) == pytest.approx((0.8, 0.3))  # scalability 2 x 8
    assert step_times(toy, (4, 4), 16) is None  # beyond the measured local batch
    assert step_times(toy, (), 8) is None


def test_an_unmeasured_shape_is_linear_between_node_counts_at_equal_density() -> None:
    toy = make_profile()
    # 3 nodes x 12 replicas: halfway between 2 x 8 and 4 x 16 (4 GPUs a node each).
    assert step_times(toy, (4, 4, 4), 4) is None
    found = step_times(toy, (4, 4, 4), 4, interpolate=True)
    assert found == pytest.approx(((0.7 + 1.0) / 2, (0.3 + 0.5) / 2))


def test_a_job_alone_at_a_fixed_batch_takes_the_fixed_duration() -> None:
    toy = make_profile()
    job = ElasticJob(batch_size=32).placed(toy, (4,))
    assert job.config == fixed_batch(toy, 4, 32)
    job = job.run(toy, 10_000.0)
    assert job.complete(toy)
    assert job.trained == pytest.approx(profile_duration(toy, 4, 32))


def test_advance_stops_at_the_end_of_an_epoch() -> None:
    toy = make_profile()
    config = fixed_batch(toy, 4, 32)
    # Gain at 32 in epoch 0: (6 + 1) / (6 / 4 + 1) = 2.8 per 0.6 s iteration.
    moved = advance(toy, JobProgress(), (4,), config, 1_000.0)
    assert moved is not None
    assert moved.state == JobProgress(progress=100.0, epoch=1)
    assert moved.seconds == pytest.approx(100 * 0.6 / 2.8)
    part = advance(toy, JobProgress(), (4,), config, 6.0)
    assert part is not None
    assert part.state.progress == pytest.approx(6.0 * 2.8 / 0.6)


def test_an_adaptive_job_fits_its_model_from_what_it_ran() -> None:
    toy = make_profile()
    job = ElasticJob().placed(toy, (4,))
    assert job.perf is None and job.model(toy) is None
    job = job.run(toy, 5.0)
    assert job.perf is not None
    assert len(job.log.rows) == 1
    assert job.model(toy) is not None


def test_a_suspended_job_does_not_move_and_a_log_keeps_first_measurements() -> None:
    toy = make_profile()
    job = ElasticJob(batch_size=32).placed(toy, ())
    assert job.run(toy, 100.0) == job
    log = StepLog().record(toy, (4,), 8)
    assert log.record(toy, (4,), 8) is log
    assert log.record(toy, (8,), 8) is log  # beyond what the profile brackets
    obs = log.observations("")
    assert obs is not None
    assert obs.accum_time.tolist() == pytest.approx([0.4])
    assert obs.sync_time.tolist() == pytest.approx([0.6])
