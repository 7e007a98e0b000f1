"""The document reference covers Pipeline, with a meaning for every field."""

from __future__ import annotations

from pathlib import Path

from phalanx.spec.reference import render

ROOT = Path(__file__).resolve().parents[3]


def test_the_reference_describes_every_pipeline_field_and_is_committed() -> None:
    page = render()  # raises MissingMeaning for a field without a docstring
    for heading in ("## Pipeline", "### StepSpec", "### ForeachSpec", "### OutputParam"):
        assert heading in page
    assert (ROOT / "docs" / "reference.md").read_text() == page, (
        "run: .venv/bin/python -m phalanx.spec.reference > docs/reference.md"
    )
