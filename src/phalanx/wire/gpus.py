"""What the API says of GPUs at work: a job's use of its cards, and a card's cordon."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from phalanx.wire.views import View


class GpuUseView(View):
    """A job's use of its cards over a span: utilisation in percent (mean over its card
    readings; peak of any one card), memory in bytes (mean and peak of all its cards)."""

    start: float
    end: float
    samples: int  # card readings
    cards: int
    utilisation: float
    utilisation_peak: float
    memory: float
    memory_peak: float


class TaskGpuView(View):
    """One task's use of its cards at the latest reading of its node."""

    task: str
    node: str
    gpus: list[int]
    utilisation: float  # percent
    memory: int  # bytes
    read_at: float


class JobGpusView(View):
    """What a job did with its GPUs: over its life so far (``summary``, None before a
    first reading), window by window (about a minute each, oldest first: the chart), and
    each task's latest; ``idle_since`` is set while its queue's ``idleGpus`` watch finds
    all its cards below the threshold (the mark), from the first such reading."""

    job: str
    summary: GpuUseView | None = None
    windows: list[GpuUseView] = Field(default_factory=list)
    tasks: list[TaskGpuView] = Field(default_factory=list)
    idle_since: float | None = None


class CardCordonRequest(BaseModel):
    """Why an admin takes a card out of scheduling."""

    model_config = ConfigDict(extra="forbid")

    reason: str = Field(
        default="cordoned by an admin", min_length=1, max_length=500, description="said with it"
    )


class CardCordonView(View):
    """A card out of scheduling: why, by whom (its health or an admin), since when."""

    node: str
    gpu: int
    reason: str
    source: Literal["health", "admin"]
    since: float


class CardUncordonView(View):
    """A card back in scheduling; ``was_cordoned`` False when it was not out."""

    node: str
    gpu: int
    was_cordoned: bool
