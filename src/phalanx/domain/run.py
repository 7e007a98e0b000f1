"""The phases of a pipeline run and of its units: the vocabulary the workflow controller
records and every client reads (``phalanx.workflow.state`` holds the rules over them)."""

from __future__ import annotations

from enum import StrEnum


class Phase(StrEnum):
    """A unit's (and, aggregated, a step's) phase."""

    PENDING = "Pending"
    RUNNING = "Running"
    SUCCEEDED = "Succeeded"
    FAILED = "Failed"
    SKIPPED = "Skipped"
    CACHED = "Cached"  # succeeded by reusing an earlier result
    CANCELLED = "Cancelled"


class RunPhase(StrEnum):
    """A run's phase (``plan`` answers Running or a final one; Pending is the controller's:
    a run recorded and not yet planned)."""

    PENDING = "Pending"
    RUNNING = "Running"
    SUCCEEDED = "Succeeded"
    FAILED = "Failed"
    CANCELLED = "Cancelled"
