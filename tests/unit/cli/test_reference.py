"""The CLI reference page is generated from the commands, and the committed one is it."""

from __future__ import annotations

from pathlib import Path

from phalanx.cli.reference import render

ROOT = Path(__file__).resolve().parents[3]


def test_the_committed_cli_reference_is_the_generated_one() -> None:
    committed = (ROOT / "docs" / "reference" / "cli.md").read_text()
    assert committed == render(), (
        "run: .venv/bin/python -m phalanx.cli.reference > docs/reference/cli.md"
    )


def test_every_visible_command_has_a_section_with_its_options() -> None:
    page = render()
    for heading in ("## phalanx up", "## phalanx get jobs", "## phalanx pipeline resume"):
        assert f"\n{heading}\n" in page, heading
    assert "## phalanx get job\n" not in page  # the singular aliases are hidden
    up = page.split("\n## phalanx up\n", 1)[1].split("\n## ", 1)[0]
    assert "| `--port` | int range (1..65535) | `8080` |" in up
    assert "| `--shared-identity` | flag |" in up
    assert "install-completion" not in page
