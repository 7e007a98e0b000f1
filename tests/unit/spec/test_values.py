"""Durations, quantities and network templates: the small parsers behind documents."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from phalanx.domain.errors import DocumentError
from phalanx.domain.resources import Resources
from phalanx.spec import QueueDocument, parse_duration, resources_of
from phalanx.spec.template import IndexTemplate


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("8h", 28800.0),
        ("30m", 1800.0),
        ("45s", 45.0),
        ("90s", 90.0),
        ("1h30m", 5400.0),
        ("2d", 172800.0),
        ("1d2h3m4s", 93784.0),
        ("1.5h", 5400.0),
        ("90", 90.0),
        (" 10m ", 600.0),
        (90, 90.0),
        (0.5, 0.5),
    ],
)
def test_durations_parse_to_seconds(text: object, seconds: float) -> None:
    assert parse_duration(text) == seconds


@pytest.mark.parametrize(
    "text", ["", "h", "8x", "30m1h", "1h 30m", "-5", 0, -1, True, "nan", float("inf"), [1]]
)
def test_bad_durations_are_refused_with_a_fix(text: object) -> None:
    with pytest.raises(DocumentError, match="fix: write seconds"):
        parse_duration(text)


def queue_with(capability: dict[str, object]) -> QueueDocument:
    return QueueDocument.model_validate(
        {
            "apiVersion": "phalanx/v1",
            "kind": "Queue",
            "metadata": {"name": "q"},
            "spec": {"capability": capability},
        }
    )


BINARY = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40}


@settings(deadline=None)  # no wall-time dependence
@given(amount=st.integers(min_value=0, max_value=2**20), suffix=st.sampled_from(sorted(BINARY)))
def test_memory_quantities_round_trip_to_exact_bytes(amount: int, suffix: str) -> None:
    queue = queue_with({"memory": f"{amount}{suffix}"}).to_domain()
    assert queue.capability == Resources.of({"memory": amount * BINARY[suffix]})


@settings(deadline=None)  # no wall-time dependence
@given(millicores=st.integers(min_value=0, max_value=10**7))
def test_cpu_quantities_round_trip_in_millicores(millicores: int) -> None:
    as_milli = resources_of({"cpu": f"{millicores}m"})
    as_cores = resources_of({"cpu": millicores / 1000})
    assert as_milli == as_cores == Resources.of({"cpu": millicores})


@settings(deadline=None)  # no wall-time dependence
@given(devices=st.integers(min_value=0, max_value=64), half=st.booleans())
def test_gpu_quantities_allow_fractions(devices: int, half: bool) -> None:
    amount = devices + (0.5 if half else 0.0)
    assert resources_of({"gpu": amount}).get("gpu") == amount


@pytest.mark.parametrize(
    ("template", "index", "text"),
    [
        ("tor-{index // 16}", 33, "tor-2"),
        ("{index % 4}-{index * 2 + 1}", 7, "3-15"),
        ("r-{ (index - 1) // 2 }", 5, "r-2"),
        ("spine", 9, "spine"),
        ("{{literal}}-{index}", 1, "{literal}-1"),
    ],
)
def test_templates_render_integer_arithmetic(template: str, index: int, text: str) -> None:
    assert IndexTemplate.parse(template).render(index) == text


@pytest.mark.parametrize(
    "template",
    [
        "{__import__('os').system('true')}",
        "{index.real}",
        "{index ** 100}",
        "{index / 2}",
        "{-index}",
        "{1.5}",
        "{True}",
        "{other}",
        "{index:03d}",
        "{index!r}",
        "{index",
        "tor-}",
        "{" + "1+" * 60 + "1}",
        "{}",
    ],
)
def test_templates_refuse_anything_else(template: str) -> None:
    with pytest.raises(DocumentError, match="fix: "):
        IndexTemplate.parse(template)


def test_division_by_zero_is_reported_for_the_index() -> None:
    with pytest.raises(DocumentError, match="divides by zero for index 3"):
        IndexTemplate.parse("{index // (index - 3)}").render(3)
