"""How the console's usage page writes its figures: two decimals, and a short job's
hours never shown as 0."""

from __future__ import annotations

import pytest

from phalanx.web.views.usage import figure


@pytest.mark.parametrize(
    ("value", "shown"),
    [
        (0.0, "0"),
        (0.5, "0.50"),
        (0.01, "0.01"),
        (1234.567, "1,234.57"),
        (0.0099, "0.0099"),
        (0.00028, "0.00028"),
        (2.8e-05, "0.000028"),
        (-0.004, "-0.0040"),
    ],
)
def test_a_figure_keeps_two_significant_digits_below_a_hundredth(value: float, shown: str) -> None:
    assert figure(value) == shown
