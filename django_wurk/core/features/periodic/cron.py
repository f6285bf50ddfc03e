"""Cron expressions: parse one, and find when it next fires in a time zone.

Written here, not taken from PyPI: croniter and cronsim both fire a time that a
spring-forward gap skips (periodic jobs' rule is that it does not fire) and accept syntax we
refuse (seconds, names, ``L W # ?``); see "Why this parser" in ``docs/periodic.md``.

The syntax is Vixie cron's five fields, ``minute hour day-of-month month day-of-week``,
with ``*``, numbers, ranges ``a-b``, lists ``a,b``, steps ``*/n`` and ``a-b/n``, Vixie's
``a/n`` (``a-max/n``), day-of-week 0-7 (0 and 7 are Sunday) and the macros in ``MACROS``.
Anything else is refused at parse time with a ``CronError`` that names the field, as is an
expression that can never fire (``0 0 31 2 *``): a schedule is checked when it is
registered, not discovered to be wrong on the leader a year later.

Day-of-month and day-of-week follow Vixie cron (and cronie, and Debian's cron) exactly:
when either field starts with ``*`` a day must match both (so ``*`` leaves the other field
alone), otherwise a day matching either fires. ``0 0 */2 * 1`` is therefore "odd days that
are Mondays"; write ``1-31/2`` for "odd days or Mondays". Same expression, same days as the
crontab it was copied from.

Time is local wall-clock time in the schedule's ``ZoneInfo``; daylight saving time:

- A local time that a spring-forward gap skips does not exist, so it does not fire:
  ``30 2 * * *`` in Europe/Berlin has no run on 30 March 2025, and no catch-up run at 03:00
  either, since the job was not due at any instant that existed.
- A local time that a fall-back overlap repeats fires once, at its first occurrence, when
  the hour field names hours (``30 1 * * *``, ``0 */2 * * *``, ``*/15 1 * * *``): those
  schedules name wall-clock times, and a time of day happens once a day.
- A schedule whose hour field is every hour (``*/15 * * * *``, ``0 * * * *``) follows the
  real clock through the overlap and fires in both passes of the repeated hour: it says
  "every so many minutes", and the two passes are different instants. Firing once would
  leave a two-hour hole in an hourly job; firing in both never fires one instant twice.

``next_after`` jumps field by field (month, day, hour, minute), so a schedule that fires
once in four years (``0 0 29 2 *``) costs a few dozen steps, not a minute-by-minute walk.
Engine code: no Django, no Redis, and the time zone comes from ``zoneinfo`` only, never
from the process's ``TZ``.
"""

from __future__ import annotations

import calendar
import math
import re
from bisect import bisect_left
from dataclasses import dataclass
from datetime import MAXYEAR, UTC, datetime, timedelta
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

#: The macros Vixie cron knows, each as the five fields it stands for (``@reboot`` excluded).
MACROS: dict[str, str] = {
    "@yearly": "0 0 1 1 *",
    "@annually": "0 0 1 1 *",
    "@monthly": "0 0 1 * *",
    "@weekly": "0 0 * * 0",
    "@daily": "0 0 * * *",
    "@midnight": "0 0 * * *",
    "@hourly": "0 * * * *",
}

#: A search for the next occurrence gives up after this many years: the Gregorian calendar
#: repeats every 400 years, so a schedule with no occurrence in 400 years has none at all.
SEARCH_YEARS = 400

#: Longer is not a schedule anyone writes (every value of every field listed is ~400).
MAX_LENGTH = 1000

_MINUTE = timedelta(minutes=1)
_ITEM = re.compile(r"(?P<first>\*|[0-9]+)(?:-(?P<last>[0-9]+))?(?:/(?P<step>[0-9]+))?")
_QUARTZ = re.compile(r"[0-9]*[LW]+[0-9]*|.*[#?].*", re.IGNORECASE)


class CronError(ValueError):
    """A cron expression or time zone that cannot be used; the message says what is wrong."""


@dataclass(frozen=True)
class _Field:
    name: str
    low: int
    high: int
    hint: str = ""

    def parse(self, text: str) -> frozenset[int]:
        values: set[int] = set()
        for item in text.split(","):
            values.update(self._item(item, text))
        return frozenset(values)

    def _item(self, item: str, text: str) -> range:
        if not item:
            raise CronError(f"{self.name} field: empty item in list {text!r}")
        if _QUARTZ.fullmatch(item):
            raise CronError(f"{self.name} field: {item!r} is not supported (no L, W, # or ? extensions)")
        if any(c.isalpha() for c in item):
            raise CronError(
                f"{self.name} field: {item!r}: names are not supported, "
                f"use numbers {self.low}-{self.high}{self.hint}"
            )
        match = _ITEM.fullmatch(item)
        if match is None:
            raise CronError(
                f"{self.name} field: {item!r} is not a number, a range (a-b) or a step (*/n, a-b/n, a/n)"
            )
        first, last, step = match.group("first", "last", "step")
        if first == "*":
            if last is not None:
                raise CronError(f"{self.name} field: {item!r} is not a range: '*' has no end")
            low, high = self.low, self.high
        else:
            low = self._number(first)
            # Vixie's a/n: from a to the field's end in steps of n.
            high = self._number(last) if last is not None else (self.high if step is not None else low)
            if low > high:
                raise CronError(f"{self.name} field: range {low}-{high} runs backwards")
        every = 1
        if step is not None:
            every = int(step)
            if not 1 <= every <= self.high:
                raise CronError(f"{self.name} field: step {every} is out of range 1-{self.high}")
        return range(low, high + 1, every)

    def _number(self, digits: str) -> int:
        number = int(digits)
        if not self.low <= number <= self.high:
            raise CronError(f"{self.name} field: {number} is out of range {self.low}-{self.high}")
        return number


_MINUTES = _Field("minute", 0, 59)
_HOURS = _Field("hour", 0, 23)
_DAYS = _Field("day-of-month", 1, 31)
_MONTHS = _Field("month", 1, 12)
_WEEKDAYS = _Field("day-of-week", 0, 7, " (0 and 7 are Sunday)")


@dataclass(frozen=True)
class Cron:
    """A parsed cron expression; build it with ``Cron.parse``.

    The field sets are sorted tuples of the values that match; ``weekdays`` counts from
    Sunday = 0 (a 7 in the expression is folded into 0). ``either_day`` is True when a day
    fires if it matches day-of-month *or* day-of-week (neither field starts with ``*``).
    """

    expression: str
    minutes: tuple[int, ...]
    hours: tuple[int, ...]
    days: tuple[int, ...]
    months: tuple[int, ...]
    weekdays: tuple[int, ...]
    either_day: bool

    @classmethod
    def parse(cls, expression: str) -> Cron:
        """The schedule ``expression`` describes; ``CronError`` names what is wrong with it."""
        if not isinstance(expression, str):
            raise CronError(f"a cron expression is a string, not {type(expression).__name__}")
        if len(expression) > MAX_LENGTH:
            raise CronError(f"cron expression is longer than {MAX_LENGTH} characters")
        fields = expression.split()
        if not fields:
            raise CronError("empty cron expression")
        if fields[0].startswith("@"):
            fields = _expand_macro(fields)
        if len(fields) != 5:
            raise CronError(
                f"{len(fields)} fields in {expression!r}: a cron expression has 5 "
                "(minute hour day-of-month month day-of-week); seconds and years are not supported"
            )
        minute, hour, day, month, weekday = fields
        cron = cls(
            expression=expression,
            minutes=tuple(sorted(_MINUTES.parse(minute))),
            hours=tuple(sorted(_HOURS.parse(hour))),
            days=tuple(sorted(_DAYS.parse(day))),
            months=tuple(sorted(_MONTHS.parse(month))),
            weekdays=tuple(sorted({w % 7 for w in _WEEKDAYS.parse(weekday)})),
            # Vixie's rule: a field "restricts" the day unless it starts with '*'.
            either_day=not (day.startswith("*") or weekday.startswith("*")),
        )
        cron._check_it_fires()
        return cron

    def next_after(self, moment: datetime, tz: ZoneInfo) -> datetime:
        """The first occurrence strictly after ``moment``, in UTC, reading the fields in ``tz``.

        ``moment`` is an aware datetime in any zone. Raises ``CronError`` only when no
        occurrence exists within ``SEARCH_YEARS`` (a schedule whose every match falls in a
        daylight-saving gap of ``tz``) or before the end of ``datetime``'s calendar.
        """
        if moment.tzinfo is None or moment.utcoffset() is None:
            raise ValueError(f"moment must be an aware datetime, got {moment!r}")
        try:
            return self._next_after(moment, tz)
        except OverflowError:  # a moment at the very end of datetime's calendar
            raise CronError(f"{self.expression!r} has no occurrence in {tz} after {moment}") from None

    def _next_after(self, moment: datetime, tz: ZoneInfo) -> datetime:
        local = moment.astimezone(tz)
        wall = local.replace(tzinfo=None)
        start = wall.replace(second=0, microsecond=0) + _MINUTE
        overlap = _overlap(wall, tz)
        if overlap is not None:
            first, end = overlap
            found = self._in_overlap(start, first, end, local.fold, tz)
            if found is not None:
                return found
            start = max(start, end)
        return self._first_from(start, tz)

    # --- searching -------------------------------------------------------------------

    def _in_overlap(
        self, start: datetime, first: datetime, end: datetime, fold: int, tz: ZoneInfo
    ) -> datetime | None:
        """The next occurrence inside the repeated hour ``[first, end)``, ``start`` being in it.

        In the first pass (``fold`` 0) the rest of the first pass comes first, then, for an
        every-hour schedule, the whole second pass; in the second pass only an every-hour
        schedule has anything left to fire.
        """
        every_hour = len(self.hours) == 24
        if fold == 0:
            wall = self._next_wall(start, until=end)
            if wall is not None:
                return _instant(wall, tz, fold=0)
            start = first
        if every_hour:
            wall = self._next_wall(start, until=end)
            if wall is not None:
                return _instant(wall, tz, fold=1)
        return None

    def _first_from(self, start: datetime, tz: ZoneInfo) -> datetime:
        """The first occurrence at a local time from ``start`` on, ``start`` being outside
        any repeated hour: times in a gap are skipped, a repeated time fires its first pass."""
        until = _year_after(start, SEARCH_YEARS)
        wall = self._next_wall(start, until)
        while wall is not None:
            if not _skipped(wall, tz):
                return _instant(wall, tz, fold=0)
            wall = self._next_wall(wall + _MINUTE, until)
        raise CronError(
            f"{self.expression!r} has no occurrence in {tz} within {SEARCH_YEARS} years of {start}"
        )

    def _next_wall(self, start: datetime, until: datetime) -> datetime | None:
        """The first local (naive) time at or after ``start`` matching every field, if it is
        before ``until``: each field that does not match moves to its next matching value
        and resets the finer fields, so the search takes steps of months, days and hours."""
        year, month, day, hour, minute = start.year, start.month, start.day, start.hour, start.minute
        while year <= until.year:
            month_ = _at_or_after(self.months, month)
            if month_ is None:
                year, month, day, hour, minute = year + 1, 1, 1, 0, 0
                continue
            if month_ != month:
                month, day, hour, minute = month_, 1, 0, 0
            day_ = self._day_at_or_after(year, month, day)
            if day_ is None:
                month, day, hour, minute = month + 1, 1, 0, 0
                continue
            if day_ != day:
                day, hour, minute = day_, 0, 0
            hour_ = _at_or_after(self.hours, hour)
            if hour_ is None:
                day, hour, minute = day + 1, 0, 0
                continue
            if hour_ != hour:
                hour, minute = hour_, 0
            minute_ = _at_or_after(self.minutes, minute)
            if minute_ is None:
                hour, minute = hour + 1, 0
                continue
            found = datetime(year, month, day, hour, minute_)
            return found if found < until else None
        return None

    def _day_at_or_after(self, year: int, month: int, day: int) -> int | None:
        first_weekday, length = calendar.monthrange(year, month)
        sunday_based = (first_weekday + 1) % 7  # calendar counts from Monday = 0
        for candidate in range(day, length + 1):
            by_date = candidate in self.days
            by_weekday = (sunday_based + candidate - 1) % 7 in self.weekdays
            if (by_date or by_weekday) if self.either_day else (by_date and by_weekday):
                return candidate
        return None

    def _check_it_fires(self) -> None:
        """Refuse an expression whose days never exist, as ``0 0 31 2 *``.

        Only a day that must match both fields can be impossible (with either, every month
        has every weekday), and then only by date: any month-and-day that exists falls on
        every weekday over the years (a 29 February too).
        """
        if self.either_day:
            return
        longest = {month: 29 if month == 2 else calendar.monthrange(2001, month)[1] for month in self.months}
        if any(day <= longest[month] for month in self.months for day in self.days):
            return
        days = ",".join(map(str, self.days))
        months = ",".join(map(str, self.months))
        raise CronError(
            f"{self.expression!r} never fires: day-of-month {days} does not occur in month {months}"
        )


def parse_timezone(name: str) -> ZoneInfo:
    """The IANA time zone ``name`` (``"Europe/Berlin"``), or ``CronError`` naming it.

    ``localtime`` is refused: it is whatever this machine is set to, and a schedule must
    mean the same on every host of the fleet.
    """
    if not isinstance(name, str) or not name or name.strip() != name or name == "localtime":
        raise CronError(f"unknown time zone {name!r}: name an IANA zone such as 'Europe/Berlin'")
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError, OSError) as exc:
        raise CronError(f"unknown time zone {name!r}: name an IANA zone such as 'Europe/Berlin'") from exc


def _expand_macro(fields: list[str]) -> list[str]:
    macro = fields[0].lower()
    if macro == "@reboot":
        raise CronError("@reboot is not supported: periodic jobs run on a schedule, not at start-up")
    if macro not in MACROS:
        raise CronError(f"unknown macro {fields[0]!r}; the macros are {', '.join(MACROS)}")
    if len(fields) > 1:
        raise CronError(f"{fields[0]} stands alone: nothing may follow it, found {' '.join(fields[1:])!r}")
    return MACROS[macro].split()


def _at_or_after(values: tuple[int, ...], value: int) -> int | None:
    index = bisect_left(values, value)
    return values[index] if index < len(values) else None


def _year_after(start: datetime, years: int) -> datetime:
    """``years`` after ``start``'s year began, or the end of ``datetime``'s calendar."""
    if start.year + years > MAXYEAR:
        return datetime.max
    return datetime(start.year + years, 1, 1)


def _skipped(wall: datetime, tz: ZoneInfo) -> bool:
    """Whether a spring-forward gap skips the local time ``wall`` (PEP 495: in a gap, fold 0
    reads it with the offset before the change, which is the smaller one)."""
    before = wall.replace(tzinfo=tz, fold=0).utcoffset()
    after = wall.replace(tzinfo=tz, fold=1).utcoffset()
    assert before is not None and after is not None
    return before < after


def _instant(wall: datetime, tz: ZoneInfo, fold: int) -> datetime:
    return wall.replace(tzinfo=tz, fold=fold).astimezone(UTC)


def _overlap(wall: datetime, tz: ZoneInfo) -> tuple[datetime, datetime] | None:
    """The repeated local times ``[first, end)`` (whole minutes) around ``wall``, if a
    fall-back transition repeats ``wall``; None when ``wall`` happens once or never.

    ``zoneinfo`` has no list of transitions, so the transition instant is found by bisection
    between the two instants ``wall`` stands for (the first pass is before it, the second at
    or after it): a whole second, as every transition in the tz database is.
    """
    before = wall.replace(tzinfo=tz, fold=0).utcoffset()
    after = wall.replace(tzinfo=tz, fold=1).utcoffset()
    assert before is not None and after is not None
    if before <= after:
        return None
    low = math.floor((wall - before).replace(tzinfo=UTC).timestamp())
    high = math.floor((wall - after).replace(tzinfo=UTC).timestamp())
    while high - low > 1:
        middle = (low + high) // 2
        if datetime.fromtimestamp(middle, tz).utcoffset() == before:
            low = middle
        else:
            high = middle
    transition = datetime.fromtimestamp(high, UTC).replace(tzinfo=None)
    return _ceil_minute(transition + after), _ceil_minute(transition + before)


def _ceil_minute(wall: datetime) -> datetime:
    floor = wall.replace(second=0, microsecond=0)
    return floor if floor == wall else floor + _MINUTE
