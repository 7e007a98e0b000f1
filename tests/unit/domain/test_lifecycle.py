"""Lifecycle tables: every phase has a row, terminal phases have no way out, edges are enforced."""

from __future__ import annotations

import pytest

from phalanx.domain.errors import IllegalTransition
from phalanx.domain.job import JobPhase, TaskPhase
from phalanx.domain.lifecycle import (
    JOB_TRANSITIONS,
    TASK_TRANSITIONS,
    check_job_transition,
    check_task_transition,
)


def test_every_job_phase_has_a_row() -> None:
    assert set(JOB_TRANSITIONS) == set(JobPhase)


def test_every_task_phase_has_a_row() -> None:
    assert set(TASK_TRANSITIONS) == set(TaskPhase)


@pytest.mark.parametrize("phase", [JobPhase.SUCCEEDED, JobPhase.FAILED, JobPhase.CANCELLED])
def test_terminal_job_phases_are_final(phase: JobPhase) -> None:
    assert JOB_TRANSITIONS[phase] == frozenset()


def test_retry_edge_exists() -> None:
    check_job_transition(JobPhase.RUNNING, JobPhase.PENDING)  # evicted or failed with retries left


def test_illegal_edges_are_refused() -> None:
    with pytest.raises(IllegalTransition):
        check_job_transition(JobPhase.SUCCEEDED, JobPhase.RUNNING)
    with pytest.raises(IllegalTransition):
        check_task_transition(TaskPhase.PENDING, TaskPhase.RUNNING)
