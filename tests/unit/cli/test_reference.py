"""The CLI reference page says every visible command with its options (that the
committed page is the generated one: tests/unit/test_docs.py)."""

from __future__ import annotations

from phalanx.cli.reference import render


def test_every_visible_command_has_a_section_with_its_options() -> None:
    page = render()
    for heading in ("## phalanx up", "## phalanx get jobs", "## phalanx pipeline resume"):
        assert f"\n{heading}\n" in page, heading
    assert "## phalanx get job\n" not in page  # the singular aliases are hidden
    up = page.split("\n## phalanx up\n", 1)[1].split("\n## ", 1)[0]
    assert "| `--port` | int range (1..65535) | `8080` |" in up
    assert "| `--shared-identity` | flag |" in up
    assert "install-completion" not in page
