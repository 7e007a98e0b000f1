"""Cron expressions: parsed with errors naming the field, next firing computed purely."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from phalanx.spec.pipeline.cron import CronError, CronSchedule

T0 = datetime(2026, 11, 25, 23, 15, 30, tzinfo=UTC)  # a Wednesday


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("* * * * *", datetime(2026, 11, 25, 23, 16, tzinfo=UTC)),
        ("*/15 * * * *", datetime(2026, 11, 25, 23, 30, tzinfo=UTC)),
        ("0 3 * * mon-fri", datetime(2026, 11, 26, 3, 0, tzinfo=UTC)),
        ("0 3 * * sat,sun", datetime(2026, 11, 28, 3, 0, tzinfo=UTC)),
        ("@daily", datetime(2026, 11, 26, 0, 0, tzinfo=UTC)),
        ("@hourly", datetime(2026, 11, 26, 0, 0, tzinfo=UTC)),
        ("@weekly", datetime(2026, 11, 29, 0, 0, tzinfo=UTC)),
        ("@monthly", datetime(2026, 12, 1, 0, 0, tzinfo=UTC)),
        ("@yearly", datetime(2027, 1, 1, 0, 0, tzinfo=UTC)),
        ("30 1 1,15 * *", datetime(2026, 12, 1, 1, 30, tzinfo=UTC)),
        ("0 0 29 feb *", datetime(2028, 2, 29, 0, 0, tzinfo=UTC)),
        ("0 12 13 * 5", datetime(2026, 11, 27, 12, 0, tzinfo=UTC)),  # the 13th or a Friday
        ("5-10/5 2 * jan-mar 7", datetime(2027, 1, 3, 2, 5, tzinfo=UTC)),
    ],
)
def test_next_firing(text: str, expected: datetime) -> None:
    assert CronSchedule.parse(text).next_after(T0) == expected


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("* * * *", "has 4 fields, not 5"),
        ("60 * * * *", "minute: 60 is outside 0-59"),
        ("* 24 * * *", "hour: 24 is outside 0-23"),
        ("* * 0 * *", "day of month: 0 is outside 1-31"),
        ("* * * 13 *", "month: 13 is outside 1-12"),
        ("* * * * 8", "day of week: 8 is outside 0-7"),
        ("*/0 * * * *", "a step of 0"),
        ("5-1 * * * *", "runs backwards"),
        ("x * * * *", "minute: 'x' is not a number"),
        ("* * * foo *", "month: 'foo' is not a number"),
        ("0 0 31 apr,jun *", "never fires"),
        ("@reboot", "has 1 fields"),
        ("1" * 50 + " * * * *", "is not a number"),
    ],
)
def test_bad_expressions_name_the_field_and_the_fix(text: str, message: str) -> None:
    with pytest.raises(CronError, match=message) as info:
        CronSchedule.parse(text)
    assert info.value.fix


def test_due_gives_the_latest_firing_since_the_last_start_and_missed_ones_once() -> None:
    daily = CronSchedule.parse("0 3 * * *")
    last = datetime(2026, 11, 20, 3, 0, tzinfo=UTC)
    assert daily.due(last, datetime(2026, 11, 20, 12, 0, tzinfo=UTC)) is None
    assert daily.due(last, datetime(2026, 11, 21, 3, 0, tzinfo=UTC)) == datetime(
        2026, 11, 21, 3, 0, tzinfo=UTC
    )
    # down for five days: one run, for the latest firing
    assert daily.due(last, T0) == datetime(2026, 11, 25, 3, 0, tzinfo=UTC)
    leap = CronSchedule.parse("0 0 29 2 *")
    assert leap.due(datetime(2020, 1, 1, tzinfo=UTC), T0) == datetime(2024, 2, 29, tzinfo=UTC)


@settings(max_examples=50, deadline=None)
@given(
    st.sampled_from(["* * * * *", "*/7 * * * *", "0 3 * * mon-fri", "15 */5 1,15 * *"]),
    st.integers(0, 10_000),
    st.integers(0, 100_000),
)
def test_due_agrees_with_stepping_through_every_firing(text: str, back: int, span: int) -> None:
    schedule = CronSchedule.parse(text)
    last = T0 - timedelta(minutes=back)
    now = last + timedelta(minutes=span)
    expected, moment = None, schedule.next_after(last)
    while moment <= now:
        expected, moment = moment, schedule.next_after(moment)
    assert schedule.due(last, now) == expected
