"""ElasticRun: an elastic job through a simulated run (restart delay, rescale, suspend,
completion, reports), on the hand-sized profile of test_elastic."""

from __future__ import annotations

import pytest

from phalanx.sim.elastic import fixed_batch, progress_rate
from phalanx.sim.elastic.tracker import PAST_END, ElasticRun
from tests.unit.sim.elastic.test_elastic import make_profile


def _run(delay: float = 30.0) -> ElasticRun:
    return ElasticRun(profile=make_profile(), batch_size=32, delay=delay)


def test_every_start_and_rescale_costs_the_delay_and_keeps_progress() -> None:
    run = _run()
    assert run.move([1], 0.0)
    rate = progress_rate(run.profile, (1,), fixed_batch(run.profile, 1, 32), 0)
    assert rate is not None
    run.advance(20.0)
    assert run.job.position.progress == 0.0  # still restarting
    run.advance(40.0)
    assert run.job.position.progress == pytest.approx(10.0 * rate)
    assert not run.move([1], 40.0)  # the same placement: no restart
    assert run.move([0, 4], 50.0)  # grown to one node of 4: 30 s again
    kept = run.job.position.progress
    assert kept == pytest.approx(20.0 * rate)
    run.advance(79.0)
    assert run.job.position.progress == pytest.approx(kept)
    four = progress_rate(run.profile, (4,), fixed_batch(run.profile, 4, 32), 0)
    assert four is not None
    run.advance(90.0)
    assert run.job.position.progress == pytest.approx(kept + 10.0 * four)


def test_a_suspended_job_keeps_its_progress_and_plans_nothing() -> None:
    run = _run()
    run.move([1], 0.0)
    run.advance(50.0)
    before = run.job.position
    assert run.move([], 50.0)
    run.advance(500.0)
    assert run.job.position == before
    assert run.next_change() is None


def test_the_next_change_is_the_epoch_end_and_completion_is_exact() -> None:
    run = _run(delay=0.0)
    run.move([1], 0.0)
    config = fixed_batch(run.profile, 1, 32)
    first = progress_rate(run.profile, (1,), config, 0)
    second = progress_rate(run.profile, (1,), config, 1)
    assert first is not None and second is not None
    end0 = 100.0 / first
    assert run.next_change() == pytest.approx(end0 + PAST_END)
    run.advance(end0 + PAST_END)
    assert run.job.position.epoch == 1
    done = end0 + 140.0 / second  # the second epoch ends at progress 240 (the least)
    run.advance(done + 5.0)
    assert run.completed_at == pytest.approx(done)
    assert run.next_change() is None
    assert not run.move([4], done + 10.0)  # a complete job does not move


def test_the_report_carries_timings_gradients_and_bounds() -> None:
    run = _run()
    run.move([1], 0.0)
    run.advance(60.0)
    report = run.report(60.0)
    assert report.time == 60.0
    # 32 on one replica: two micro-steps of 16
    assert [(t.nodes, t.replicas, t.local_batch) for t in report.timings] == [(1, 1, 16)]
    assert report.batch_size == 32 and report.grad_sqr == 1.0 and report.grad_var == 6.0
    assert report.init_batch_size == 8 and report.max_batch_size == 32
    assert report.local_batch_bounds == (8, 16)
    assert report.samples_per_second is not None and report.samples_per_second > 0
    assert report.samples is not None and report.total_samples is not None
    assert 0 < report.samples < report.total_samples  # the target: its last epoch's end
