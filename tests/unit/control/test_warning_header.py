"""A warning line becomes a Warning header value any HTTP stack carries."""

from __future__ import annotations

from phalanx.control.api.jobs import warning_header


def test_quotes_backslashes_and_other_alphabets_are_escaped() -> None:
    line = 'f.yaml: spec["é"]: not honoured: say "no" \\ done\n'
    assert (
        warning_header(line)
        == '299 - "f.yaml: spec[\\"\\xe9\\"]: not honoured: say \\"no\\" \\\\ done "'
    )
    assert warning_header(line).isascii()
