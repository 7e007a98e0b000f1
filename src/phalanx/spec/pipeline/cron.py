"""Cron expressions of ``schedule.cron``: the five-field form of crontab(5).

``minute hour day-of-month month day-of-week``; each field a ``*``, a number, a range
``a-b``, a step ``*/n`` / ``a-b/n`` / ``a/n``, or a comma list of those; months and days
may be named (``jan``, ``mon``); day-of-week 0 and 7 are Sunday. The macros ``@hourly``,
``@daily`` (``@midnight``), ``@weekly``, ``@monthly`` and ``@yearly`` (``@annually``) are
accepted. As in cron, when both day fields are restricted a day matching either fires.

Guarantees: ``CronSchedule.parse`` raises ``CronError`` naming the field and the fix for
anything else, and for a schedule that can never fire (``0 0 30 2 *``). ``next_after`` is
pure (the time comes in as an argument), works in whole minutes of the ``datetime`` it is
given (give UTC) and always finds the next firing within five years.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Final

from phalanx.domain.errors import InvalidInput

_FIELDS: Final = (
    ("minute", 0, 59),
    ("hour", 0, 23),
    ("day of month", 1, 31),
    ("month", 1, 12),
    ("day of week", 0, 7),
)
_MONTHS: Final = [
    "jan",
    "feb",
    "mar",
    "apr",
    "may",
    "jun",
    "jul",
    "aug",
    "sep",
    "oct",
    "nov",
    "dec",
]
_DAYS: Final = ["sun", "mon", "tue", "wed", "thu", "fri", "sat"]
_MACROS: Final = {
    "@yearly": "0 0 1 1 *",
    "@annually": "0 0 1 1 *",
    "@monthly": "0 0 1 * *",
    "@weekly": "0 0 * * 0",
    "@daily": "0 0 * * *",
    "@midnight": "0 0 * * *",
    "@hourly": "0 * * * *",
}
_WINDOWS: Final = tuple(timedelta(days=d) for d in (1 / 24, 1, 32, 366, 5 * 366 + 1))
_LONGEST_MONTH: Final = (31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31)
_FORM: Final = (
    "write five fields 'minute hour day-of-month month day-of-week' such as '0 3 * * mon-fri' "
    "or '*/15 * * * *', or a macro (@hourly, @daily, @weekly, @monthly, @yearly)"
)


class CronError(InvalidInput):
    """A cron expression that does not parse, or never fires."""


def _number(text: str, field: int) -> int:
    name, _, _ = _FIELDS[field]
    lowered = text.lower()
    if field == 3 and lowered in _MONTHS:
        return _MONTHS.index(lowered) + 1
    if field == 4 and lowered in _DAYS:
        return _DAYS.index(lowered)
    if not text.isdigit() or len(text) > 4:
        raise CronError(f"{name}: {text[:20]!r} is not a number", fix=_FORM)
    return int(text)


def _part(text: str, field: int) -> set[int]:
    name, low, high = _FIELDS[field]
    span, _, step_text = text.partition("/")
    step = 1
    if step_text:
        step = _number(step_text, 0)
        if step < 1:
            raise CronError(f"{name}: a step of 0", fix="write a step of at least 1, e.g. */5")
    if span == "*":
        start, end = low, high
    elif "-" in span:
        first, _, last = span.partition("-")
        start, end = _number(first, field), _number(last, field)
    else:
        start = _number(span, field)
        end = high if step_text else start
    for value in (start, end):
        if not low <= value <= high:
            raise CronError(f"{name}: {value} is outside {low}-{high}", fix=f"use {low} to {high}")
    if start > end:
        raise CronError(f"{name}: the range {span!r} runs backwards", fix=f"write {end}-{start}")
    return set(range(start, end + 1, step))


@dataclass(frozen=True, slots=True)
class CronSchedule:
    """A parsed cron expression: the allowed values of each field."""

    text: str
    minutes: frozenset[int]
    hours: frozenset[int]
    days: frozenset[int]
    months: frozenset[int]
    weekdays: frozenset[int]  # 0 = Sunday
    any_day: bool  # day of month is *
    any_weekday: bool  # day of week is *

    @staticmethod
    def parse(text: str) -> CronSchedule:
        """Parse ``text``; raises ``CronError``."""
        fields = _MACROS.get(text.strip().lower(), text).split()
        if len(fields) != 5:
            raise CronError(f"{text[:60]!r} has {len(fields)} fields, not 5", fix=_FORM)
        values = [set().union(*(_part(p, i) for p in f.split(","))) for i, f in enumerate(fields)]
        weekdays = frozenset(d % 7 for d in values[4])
        schedule = CronSchedule(
            text=text,
            minutes=frozenset(values[0]),
            hours=frozenset(values[1]),
            days=frozenset(values[2]),
            months=frozenset(values[3]),
            weekdays=weekdays,
            any_day=fields[2] == "*",
            any_weekday=fields[4] == "*",
        )
        possible = any(day <= _LONGEST_MONTH[m - 1] for m in values[3] for day in values[2])
        if not possible and schedule.any_weekday:
            raise CronError(
                f"{text[:60]!r} never fires: no month of {fields[3]!r} has day {fields[2]!r}",
                fix="choose a day that the months have",
            )
        return schedule

    def _day_matches(self, moment: datetime) -> bool:
        in_month = moment.day in self.days
        in_week = (moment.isoweekday() % 7) in self.weekdays
        if self.any_day or self.any_weekday:
            return in_month and in_week
        return in_month or in_week

    def due(self, last: datetime, now: datetime) -> datetime | None:
        """The latest firing in ``(last, now]``, or None: what a scheduler starts at
        ``now`` when it last started at ``last`` (firings missed meanwhile, the server
        being down, say, are one run, not a burst)."""
        for window in _WINDOWS:  # the smallest window back from now with a firing in it
            start = max(last, now - window)
            moment = self.next_after(start)
            if moment > now:
                if start == last:
                    return None
                continue
            while (following := self.next_after(moment)) <= now:
                moment = following
            return moment
        return None

    def next_after(self, moment: datetime) -> datetime:
        """The first firing strictly after ``moment`` (to the minute)."""
        current = moment.replace(second=0, microsecond=0) + timedelta(minutes=1)
        limit = current + timedelta(days=5 * 366)
        while current < limit:
            if current.month not in self.months:
                month = current.month % 12 + 1
                year = current.year + (current.month == 12)
                current = current.replace(year=year, month=month, day=1, hour=0, minute=0)
            elif not self._day_matches(current):
                current = current.replace(hour=0, minute=0) + timedelta(days=1)
            elif current.hour not in self.hours:
                current = current.replace(minute=0) + timedelta(hours=1)
            elif current.minute not in self.minutes:
                current += timedelta(minutes=1)
            else:
                return current
        raise CronError(f"{self.text!r} does not fire within five years", fix=_FORM)
