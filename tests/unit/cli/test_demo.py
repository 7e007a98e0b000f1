"""The demo's live table fits 80 columns and wraps reasons between words."""

from __future__ import annotations

from rich.console import Console

from phalanx.cli.demo import _table

REASON = (
    "needs 8 GPUs and 1 CPU for its minimum of 1 task; the most free on one node is 4 GPUs "
    "(gpu-0); fix: ask for fewer GPUs per task"
)


def test_the_table_fits_80_columns_and_keeps_every_word_of_a_reason_whole() -> None:
    jobs = [
        {
            "name": "too-big",
            "queue": "nlp",
            "phase": "Pending",
            "task_counts": {"Pending": 1},
            "nodes": [],
            "attempts": 0,
            "message": REASON,
        },
        {
            "name": "ddp-train",
            "queue": "vision",
            "phase": "Running",
            "task_counts": {"Running": 2},
            "nodes": ["gpu-0"],
            "attempts": 0,
            "message": "2 task(s) placed on gpu-0",
        },
    ]
    console = Console(width=120, record=True, color_system=None)
    console.print(_table(jobs))
    lines = console.export_text().splitlines()
    assert max(len(line) for line in lines) <= 80
    cells = " ".join(line.split("│")[-2].strip() for line in lines if line.count("│") >= 7)
    assert " ".join(cells.split()) == REASON  # wrapped, never cut inside a word
