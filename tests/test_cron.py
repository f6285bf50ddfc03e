"""The cron parser of periodic jobs: syntax, the day rule, time zones and daylight saving time.

The schedules below are worked out by hand from a calendar and the tz database's transitions
(2025: Europe/Berlin gains an hour on 30 March at 02:00 and repeats 02:00-02:59 on 26 October;
America/New_York gains one on 9 March at 02:00 and repeats 01:00-01:59 on 2 November;
Australia/Sydney repeats 02:00-02:59 on 6 April and skips 02:00-02:59 on 5 October;
Australia/Lord_Howe moves by half an hour, repeating 01:30-01:59 on 6 April and skipping
02:00-02:29 on 5 October). Every expected occurrence is written as local time with its offset.
"""

from __future__ import annotations

import calendar
import time
from datetime import UTC, date, datetime, timedelta
from datetime import time as time_of_day
from zoneinfo import ZoneInfo

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from django_wurk.core.features.periodic.cron import Cron, CronError, parse_timezone

BERLIN = "Europe/Berlin"
NEW_YORK = "America/New_York"
SYDNEY = "Australia/Sydney"
LORD_HOWE = "Australia/Lord_Howe"

#: expression | time zone | moment | the next occurrences, local time with its offset;
#: an indented line goes on with the occurrences of the row above it.
SCHEDULES = """
# --- the macros; 2026-01-01 is a Thursday ---------------------------------------
@hourly           | UTC                 | 2026-01-01T00:00+00:00    | 2026-01-01T01:00+00:00  2026-01-01T02:00+00:00
@daily            | UTC                 | 2026-01-01T00:00+00:00    | 2026-01-02T00:00+00:00  2026-01-03T00:00+00:00
@midnight         | UTC                 | 2026-01-01T12:00+00:00    | 2026-01-02T00:00+00:00  2026-01-03T00:00+00:00
@weekly           | UTC                 | 2026-01-01T00:00+00:00    | 2026-01-04T00:00+00:00  2026-01-11T00:00+00:00
@monthly          | UTC                 | 2026-01-01T00:00+00:00    | 2026-02-01T00:00+00:00  2026-03-01T00:00+00:00
# strictly after: an occurrence at the moment itself is not the next one
@yearly           | UTC                 | 2026-01-01T00:00+00:00    | 2027-01-01T00:00+00:00  2028-01-01T00:00+00:00
@annually         | UTC                 | 2025-12-31T23:59:59+00:00 | 2026-01-01T00:00+00:00  2027-01-01T00:00+00:00
# --- numbers, ranges, lists, steps --------------------------------------------------
* * * * *         | UTC                 | 2026-01-01T00:00:30+00:00 | 2026-01-01T00:01+00:00  2026-01-01T00:02+00:00
5/15 * * * *      | UTC                 | 2026-01-01T00:00+00:00    | 2026-01-01T00:05+00:00  2026-01-01T00:20+00:00  2026-01-01T00:35+00:00
                                                                      2026-01-01T00:50+00:00  2026-01-01T01:05+00:00
*/20 9-17/4 * * * | UTC                 | 2026-01-01T00:00+00:00    | 2026-01-01T09:00+00:00  2026-01-01T09:20+00:00  2026-01-01T09:40+00:00
                                                                      2026-01-01T13:00+00:00  2026-01-01T13:20+00:00  2026-01-01T13:40+00:00
                                                                      2026-01-01T17:00+00:00  2026-01-01T17:20+00:00  2026-01-01T17:40+00:00
                                                                      2026-01-02T09:00+00:00
0,30 8 * * 1-5    | UTC                 | 2026-01-01T00:00+00:00    | 2026-01-01T08:00+00:00  2026-01-01T08:30+00:00  2026-01-02T08:00+00:00
                                                                      2026-01-02T08:30+00:00  2026-01-05T08:00+00:00
0 12 * * 7        | UTC                 | 2026-01-01T00:00+00:00    | 2026-01-04T12:00+00:00  2026-01-11T12:00+00:00
0 12 * * 5-7      | UTC                 | 2026-01-01T00:00+00:00    | 2026-01-02T12:00+00:00  2026-01-03T12:00+00:00  2026-01-04T12:00+00:00
                                                                      2026-01-09T12:00+00:00
# a field that moves on starts the finer fields from their first value
0 0 1 3 *         | UTC                 | 2026-01-15T12:30+00:00    | 2026-03-01T00:00+00:00  2027-03-01T00:00+00:00
15 5 10 * *       | UTC                 | 2026-01-05T08:40+00:00    | 2026-01-10T05:15+00:00  2026-02-10T05:15+00:00
# --- day-of-month and day-of-week ---------------------------------------------------
# both restricted: every 13th and every Friday (Friday 13 February fires once)
0 0 13 * 5        | UTC                 | 2026-01-01T00:00+00:00    | 2026-01-02T00:00+00:00  2026-01-09T00:00+00:00  2026-01-13T00:00+00:00
                                                                      2026-01-16T00:00+00:00  2026-01-23T00:00+00:00  2026-01-30T00:00+00:00
                                                                      2026-02-06T00:00+00:00  2026-02-13T00:00+00:00  2026-02-20T00:00+00:00
# a field starting with '*' makes both count (Vixie): odd days that are Mondays
0 0 */2 * 1       | UTC                 | 2026-01-01T00:00+00:00    | 2026-01-05T00:00+00:00  2026-01-19T00:00+00:00  2026-02-09T00:00+00:00
                                                                      2026-02-23T00:00+00:00
# ...while the same days written as a range are OR'd with the weekday: odd days or Mondays
0 0 1-31/2 * 1    | UTC                 | 2026-01-01T00:00+00:00    | 2026-01-03T00:00+00:00  2026-01-05T00:00+00:00  2026-01-07T00:00+00:00
                                                                      2026-01-09T00:00+00:00  2026-01-11T00:00+00:00  2026-01-12T00:00+00:00
                                                                      2026-01-13T00:00+00:00
0 0 * * 1         | UTC                 | 2026-01-01T00:00+00:00    | 2026-01-05T00:00+00:00  2026-01-12T00:00+00:00
0 0 1 * *         | UTC                 | 2026-01-01T00:00+00:00    | 2026-02-01T00:00+00:00  2026-03-01T00:00+00:00
# --- month ends, leap days, year rollover ---------------------------------------------
0 0 29 2 *        | UTC                 | 2026-01-01T00:00+00:00    | 2028-02-29T00:00+00:00  2032-02-29T00:00+00:00  2036-02-29T00:00+00:00
# 2100 is no leap year
0 0 29 2 *        | UTC                 | 2096-03-01T00:00+00:00    | 2104-02-29T00:00+00:00
# 29 February that is a Sunday ('*/7' is 0,7: Sunday, and starts with '*', so both count)
0 0 29 2 */7      | UTC                 | 2026-01-01T00:00+00:00    | 2032-02-29T00:00+00:00  2060-02-29T00:00+00:00
59 23 31 * *      | UTC                 | 2026-01-01T00:00+00:00    | 2026-01-31T23:59+00:00  2026-03-31T23:59+00:00  2026-05-31T23:59+00:00
                                                                      2026-07-31T23:59+00:00  2026-08-31T23:59+00:00  2026-10-31T23:59+00:00
                                                                      2026-12-31T23:59+00:00  2027-01-31T23:59+00:00
0 0 30 * *        | UTC                 | 2026-01-31T00:00+00:00    | 2026-03-30T00:00+00:00  2026-04-30T00:00+00:00
30 23 31 12 *     | UTC                 | 2026-12-31T23:30+00:00    | 2027-12-31T23:30+00:00
*/10 * * * *      | UTC                 | 2026-12-31T23:55+00:00    | 2027-01-01T00:00+00:00  2027-01-01T00:10+00:00
# --- time zones: the fields are local time; the moment may be in any zone ------------
0 9 * * *         | America/New_York    | 2026-01-01T00:00+00:00    | 2026-01-01T09:00-05:00  2026-01-02T09:00-05:00
0 9 * * *         | Europe/Berlin       | 2026-01-01T20:00-05:00    | 2026-01-02T09:00+01:00  2026-01-03T09:00+01:00
0 0 * * *         | Asia/Kathmandu      | 2026-01-01T00:00+00:00    | 2026-01-02T00:00+05:45
# --- Europe/Berlin, spring forward (02:00-02:59 on 30 March 2025 does not exist) -------
30 2 * * *        | Europe/Berlin       | 2025-03-29T00:00+01:00    | 2025-03-29T02:30+01:00  2025-03-31T02:30+02:00  2025-04-01T02:30+02:00
0 2 * * *         | Europe/Berlin       | 2025-03-29T12:00+01:00    | 2025-03-31T02:00+02:00
0 3 * * *         | Europe/Berlin       | 2025-03-29T12:00+01:00    | 2025-03-30T03:00+02:00  2025-03-31T03:00+02:00
*/15 * * * *      | Europe/Berlin       | 2025-03-30T01:30+01:00    | 2025-03-30T01:45+01:00  2025-03-30T03:00+02:00  2025-03-30T03:15+02:00
0 * * * *         | Europe/Berlin       | 2025-03-30T00:30+01:00    | 2025-03-30T01:00+01:00  2025-03-30T03:00+02:00  2025-03-30T04:00+02:00
# --- Europe/Berlin, fall back (02:00-02:59 on 26 October 2025 happens twice) -----------
30 2 * * *        | Europe/Berlin       | 2025-10-25T12:00+02:00    | 2025-10-26T02:30+02:00  2025-10-27T02:30+01:00
20,40 2 * * *     | Europe/Berlin       | 2025-10-26T02:30+02:00    | 2025-10-26T02:40+02:00  2025-10-27T02:20+01:00
# starting inside the second pass: a fixed-hour schedule has fired there already
20,40 2 * * *     | Europe/Berlin       | 2025-10-26T02:10+01:00    | 2025-10-27T02:20+01:00
0 */2 * * *       | Europe/Berlin       | 2025-10-26T00:30+02:00    | 2025-10-26T02:00+02:00  2025-10-26T04:00+01:00
# every-hour schedules follow the real clock: both passes fire, no instant twice
*/15 * * * *      | Europe/Berlin       | 2025-10-26T01:45+02:00    | 2025-10-26T02:00+02:00  2025-10-26T02:15+02:00  2025-10-26T02:30+02:00
                                                                      2025-10-26T02:45+02:00  2025-10-26T02:00+01:00  2025-10-26T02:15+01:00
                                                                      2025-10-26T02:30+01:00  2025-10-26T02:45+01:00  2025-10-26T03:00+01:00
*/15 * * * *      | Europe/Berlin       | 2025-10-26T02:20+01:00    | 2025-10-26T02:30+01:00  2025-10-26T02:45+01:00
0 * * * *         | Europe/Berlin       | 2025-10-26T00:30+02:00    | 2025-10-26T01:00+02:00  2025-10-26T02:00+02:00  2025-10-26T02:00+01:00
                                                                      2025-10-26T03:00+01:00
10 * * * *        | Europe/Berlin       | 2025-10-26T02:50+02:00    | 2025-10-26T02:10+01:00  2025-10-26T03:10+01:00
# --- America/New_York, spring forward (02:00-02:59 on 9 March 2025) --------------------
30 2 * * *        | America/New_York    | 2025-03-08T12:00-05:00    | 2025-03-10T02:30-04:00  2025-03-11T02:30-04:00
*/30 * * * *      | America/New_York    | 2025-03-09T01:15-05:00    | 2025-03-09T01:30-05:00  2025-03-09T03:00-04:00  2025-03-09T03:30-04:00
15 1-3 * * *      | America/New_York    | 2025-03-09T00:00-05:00    | 2025-03-09T01:15-05:00  2025-03-09T03:15-04:00  2025-03-10T01:15-04:00
# --- America/New_York, fall back (01:00-01:59 on 2 November 2025 happens twice) --------
30 1 * * *        | America/New_York    | 2025-11-01T12:00-04:00    | 2025-11-02T01:30-04:00  2025-11-03T01:30-05:00
15 1-3 * * *      | America/New_York    | 2025-11-02T00:00-04:00    | 2025-11-02T01:15-04:00  2025-11-02T02:15-05:00  2025-11-02T03:15-05:00
*/30 * * * *      | America/New_York    | 2025-11-02T00:45-04:00    | 2025-11-02T01:00-04:00  2025-11-02T01:30-04:00  2025-11-02T01:00-05:00
                                                                      2025-11-02T01:30-05:00  2025-11-02T02:00-05:00
# --- Australia/Sydney: fall back in April, spring forward in October -------------------
30 2 * * *        | Australia/Sydney    | 2025-04-05T12:00+11:00    | 2025-04-06T02:30+11:00  2025-04-07T02:30+10:00
0 * * * *         | Australia/Sydney    | 2025-04-06T00:30+11:00    | 2025-04-06T01:00+11:00  2025-04-06T02:00+11:00  2025-04-06T02:00+10:00
                                                                      2025-04-06T03:00+10:00
30 2 * * *        | Australia/Sydney    | 2025-10-04T12:00+10:00    | 2025-10-06T02:30+11:00
*/30 * * * *      | Australia/Sydney    | 2025-10-05T01:00+10:00    | 2025-10-05T01:30+10:00  2025-10-05T03:00+11:00  2025-10-05T03:30+11:00
# --- Australia/Lord_Howe: half-hour shifts ---------------------------------------------
45 1 * * *        | Australia/Lord_Howe | 2025-04-05T12:00+11:00    | 2025-04-06T01:45+11:00  2025-04-07T01:45+10:30
*/15 * * * *      | Australia/Lord_Howe | 2025-04-06T01:20+11:00    | 2025-04-06T01:30+11:00  2025-04-06T01:45+11:00  2025-04-06T01:30+10:30
                                                                      2025-04-06T01:45+10:30  2025-04-06T02:00+10:30
15 2 * * *        | Australia/Lord_Howe | 2025-10-04T12:00+10:30    | 2025-10-06T02:15+11:00
45 2 * * *        | Australia/Lord_Howe | 2025-10-04T12:00+10:30    | 2025-10-05T02:45+11:00
# --- a zone that moves its clocks at midnight: that day has no midnight -----------------
0 0 * * *         | America/Sao_Paulo   | 2018-11-03T12:00-03:00    | 2018-11-05T00:00-02:00  2018-11-06T00:00-02:00
"""


def schedules() -> list[tuple[str, str, str, list[str]]]:
    rows: list[tuple[str, str, str, list[str]]] = []
    for line in SCHEDULES.splitlines():
        if not line.strip() or line.startswith("#"):
            continue
        if "|" not in line:
            rows[-1][3].extend(line.split())
            continue
        expression, zone, start, occurrences = (cell.strip() for cell in line.split("|"))
        rows.append((expression, zone, start, occurrences.split()))
    return rows


@pytest.mark.parametrize(("expression", "zone", "start", "expected"), schedules())
def test_next_occurrences(expression: str, zone: str, start: str, expected: list[str]) -> None:
    cron, tz = Cron.parse(expression), ZoneInfo(zone)
    moment, got = datetime.fromisoformat(start), []
    for _ in expected:
        moment = cron.next_after(moment, tz)
        assert moment.tzinfo is UTC
        assert moment.second == moment.microsecond == 0
        got.append(moment.astimezone(tz).isoformat(timespec="minutes"))
    assert got == expected


def test_fields_may_be_separated_by_any_whitespace() -> None:
    loose, tight = Cron.parse(" 0  6\t1,15  */3  * \n"), Cron.parse("0 6 1,15 */3 *")
    assert loose.expression == " 0  6\t1,15  */3  * \n"
    assert (loose.minutes, loose.hours, loose.days, loose.months, loose.weekdays) == (
        tight.minutes,
        tight.hours,
        tight.days,
        tight.months,
        tight.weekdays,
    )
    moment, got = datetime(2026, 1, 1, tzinfo=UTC), []
    for _ in range(5):
        moment = loose.next_after(moment, ZoneInfo("UTC"))
        got.append(moment)
    assert got == [
        datetime(2026, 1, 1, 6, tzinfo=UTC),
        datetime(2026, 1, 15, 6, tzinfo=UTC),
        datetime(2026, 4, 1, 6, tzinfo=UTC),
        datetime(2026, 4, 15, 6, tzinfo=UTC),
        datetime(2026, 7, 1, 6, tzinfo=UTC),
    ]


BAD_EXPRESSIONS: list[tuple[object, str]] = [
    ("", "empty cron expression"),
    ("   ", "empty cron expression"),
    ("* * * *", "4 fields"),
    ("0 * * * * *", "6 fields"),
    ("0 0 * * * 2026", "seconds and years are not supported"),
    ("61 * * * *", "minute field: 61 is out of range 0-59"),
    ("0 24 * * *", "hour field: 24 is out of range 0-23"),
    ("0 0 0 * *", "day-of-month field: 0 is out of range 1-31"),
    ("0 0 32 * *", "day-of-month field: 32 is out of range 1-31"),
    ("0 0 * 13 *", "month field: 13 is out of range 1-12"),
    ("0 0 * * 8", "day-of-week field: 8 is out of range 0-7"),
    ("0 0 * 0 *", "month field: 0 is out of range 1-12"),
    ("0 0 * JAN *", "month field: 'JAN': names are not supported, use numbers 1-12"),
    (
        "0 0 * * MON",
        "day-of-week field: 'MON': names are not supported, use numbers 0-7 (0 and 7 are Sunday)",
    ),
    ("0 0 * * mon-fri", "names are not supported"),
    ("0 0 L * *", "day-of-month field: 'L' is not supported (no L, W, # or ? extensions)"),
    ("0 0 15W * *", "'15W' is not supported"),
    ("0 0 LW * *", "'LW' is not supported"),
    ("0 0 * * 5L", "'5L' is not supported"),
    ("0 0 * * 5#3", "day-of-week field: '5#3' is not supported"),
    ("0 0 ? * 1", "day-of-month field: '?' is not supported"),
    ("0 0 H * *", "names are not supported"),
    ("*/0 * * * *", "minute field: step 0 is out of range 1-59"),
    ("*/60 * * * *", "minute field: step 60 is out of range 1-59"),
    ("0 */24 * * *", "hour field: step 24 is out of range 1-23"),
    ("30-10 * * * *", "minute field: range 30-10 runs backwards"),
    ("0 22-2 * * *", "hour field: range 22-2 runs backwards"),
    ("0 0 * * 7-1", "day-of-week field: range 7-1 runs backwards"),
    ("1,,2 * * * *", "minute field: empty item in list '1,,2'"),
    ("1, * * * *", "minute field: empty item in list '1,'"),
    ("*-5 * * * *", "minute field: '*-5' is not a range"),
    ("1.5 * * * *", "minute field: '1.5' is not a number, a range (a-b) or a step"),
    ("-1 * * * *", "minute field: '-1' is not a number"),
    ("+1 * * * *", "minute field: '+1' is not a number"),
    ("1-2-3 * * * *", "minute field: '1-2-3' is not a number"),
    ("*/5/2 * * * *", "minute field: '*/5/2' is not a number"),
    ("\u0661 * * * *", "minute field: '\u0661' is not a number"),  # an Arabic-Indic digit one
    ("9" * 50 + " * * * *", "minute field: " + "9" * 50 + " is out of range 0-59"),
    ("@reboot", "@reboot is not supported"),
    ("@every 5m", "unknown macro '@every'"),
    ("@weekdays", "unknown macro '@weekdays'; the macros are @yearly, @annually, @monthly, @weekly, @daily"),
    ("@daily 0", "@daily stands alone"),
    ("0 0 31 2 *", "'0 0 31 2 *' never fires: day-of-month 31 does not occur in month 2"),
    ("0 0 30,31 2 *", "never fires: day-of-month 30,31 does not occur in month 2"),
    ("0 0 31 4,6,9,11 *", "never fires: day-of-month 31 does not occur in month 4,6,9,11"),
    ("0 0 31 2 */7", "never fires"),
    ("* " * 600, "longer than 1000 characters"),
    (None, "a cron expression is a string, not NoneType"),
    (5, "a cron expression is a string, not int"),
]


@pytest.mark.parametrize(("expression", "fragment"), BAD_EXPRESSIONS)
def test_bad_expressions_are_refused_with_a_reason(expression: object, fragment: str) -> None:
    with pytest.raises(CronError) as raised:
        Cron.parse(expression)  # type: ignore[arg-type]
    assert fragment in str(raised.value)
    assert isinstance(raised.value, ValueError)


def test_impossible_day_with_a_weekday_of_its_own_still_fires() -> None:
    """31 February OR any Monday in February: the weekday alone makes it a schedule."""
    cron = Cron.parse("0 0 31 2 1")
    assert cron.next_after(datetime(2026, 1, 1, tzinfo=UTC), ZoneInfo("UTC")) == datetime(
        2026, 2, 2, tzinfo=UTC
    )


def test_fields_parse_to_the_values_they_name() -> None:
    cron = Cron.parse("5/15 */6 1-10/3,20 */5 5-7")
    assert cron.minutes == (5, 20, 35, 50)
    assert cron.hours == (0, 6, 12, 18)
    assert cron.days == (1, 4, 7, 10, 20)
    assert cron.months == (1, 6, 11)
    assert cron.weekdays == (0, 5, 6)  # 7 is Sunday, 0
    assert cron.either_day  # neither day field starts with '*'
    assert cron.expression == "5/15 */6 1-10/3,20 */5 5-7"
    assert Cron.parse("0 0 * * */2").weekdays == (0, 2, 4, 6)
    assert Cron.parse("0 0 * * 0,7").weekdays == (0,)
    assert Cron.parse("0 0 31/15 * *").days == (31,)
    assert Cron.parse("59/15 * * * *").minutes == (59,)


def test_vixie_day_rule_reads_the_first_character() -> None:
    assert Cron.parse("0 0 1 * 1").either_day
    assert Cron.parse("0 0 1-31/2 * 1").either_day
    assert not Cron.parse("0 0 */2 * 1").either_day
    assert not Cron.parse("0 0 1 * *").either_day
    assert not Cron.parse("0 0 1 * */1").either_day


def test_macros_mean_their_five_fields() -> None:
    for macro, fields in [
        ("@hourly", "0 * * * *"),
        ("@daily", "0 0 * * *"),
        ("@midnight", "0 0 * * *"),
        ("@weekly", "0 0 * * 0"),
        ("@monthly", "0 0 1 * *"),
        ("@yearly", "0 0 1 1 *"),
        ("@annually", "0 0 1 1 *"),
        (" @DAILY\t", "0 0 * * *"),
    ]:
        parsed, plain = Cron.parse(macro), Cron.parse(fields)
        assert parsed.expression == macro
        assert (
            parsed.minutes,
            parsed.hours,
            parsed.days,
            parsed.months,
            parsed.weekdays,
            parsed.either_day,
        ) == (
            plain.minutes,
            plain.hours,
            plain.days,
            plain.months,
            plain.weekdays,
            plain.either_day,
        )


def test_a_naive_moment_is_refused() -> None:
    with pytest.raises(ValueError, match="aware"):
        Cron.parse("* * * * *").next_after(datetime(2026, 1, 1), ZoneInfo("UTC"))


def test_a_schedule_that_only_matches_skipped_times_raises_instead_of_looping() -> None:
    """The last Sunday of March at 02:30 is always inside Berlin's spring-forward gap."""
    cron = Cron.parse("30 2 25-31 3 */7")
    assert cron.next_after(datetime(2026, 1, 1, tzinfo=UTC), ZoneInfo("UTC")) == datetime(
        2026, 3, 29, 2, 30, tzinfo=UTC
    )
    with pytest.raises(CronError, match="no occurrence in Europe/Berlin within 400 years"):
        cron.next_after(datetime(2026, 1, 1, tzinfo=UTC), ZoneInfo(BERLIN))


def test_the_end_of_the_calendar_raises_instead_of_overflowing() -> None:
    with pytest.raises(CronError, match="no occurrence"):
        Cron.parse("0 0 1 1 *").next_after(datetime(9999, 6, 1, tzinfo=UTC), ZoneInfo("UTC"))
    with pytest.raises(CronError, match="no occurrence"):
        Cron.parse("* * * * *").next_after(datetime.max.replace(tzinfo=UTC), ZoneInfo("Pacific/Kiritimati"))
    last = Cron.parse("0 0 31 12 *").next_after(datetime(9999, 6, 1, tzinfo=UTC), ZoneInfo("UTC"))
    assert last == datetime(9999, 12, 31, tzinfo=UTC)


def test_rare_schedules_jump_instead_of_walking_minutes() -> None:
    """A minute-by-minute walk to the next 29 February is two million steps; a hundred of
    them would take minutes. Jumping by fields takes milliseconds, so this bound is loose."""
    cron, tz = Cron.parse("0 0 29 2 */7"), ZoneInfo(BERLIN)
    began = time.perf_counter()
    moment = datetime(2000, 1, 1, tzinfo=UTC)
    for _ in range(100):
        moment = cron.next_after(moment, tz)
    assert time.perf_counter() - began < 10
    assert moment.astimezone(tz).year > 2400


@pytest.mark.parametrize(
    "name", ["UTC", "Europe/Berlin", "America/New_York", "Australia/Lord_Howe", "Etc/GMT+5"]
)
def test_time_zones_by_iana_name(name: str) -> None:
    assert parse_timezone(name) == ZoneInfo(name)


@pytest.mark.parametrize(
    "name",
    [
        "",
        "Nowhere/City",
        "Europe",
        "europe/berlin ",
        " UTC",
        "../etc/passwd",
        "/etc/localtime",
        "localtime",
        "a\x00b",
    ],
)
def test_unknown_time_zones_are_refused(name: str) -> None:
    with pytest.raises(CronError, match="unknown time zone"):
        parse_timezone(name)


def test_a_time_zone_name_must_be_a_string() -> None:
    with pytest.raises(CronError, match="unknown time zone 5"):
        parse_timezone(5)  # type: ignore[arg-type]


# --- the property: next_after finds exactly the next firing instant ------------------------

ZONES = ["UTC", BERLIN, NEW_YORK, SYDNEY, LORD_HOWE, "Asia/Kathmandu", "America/Sao_Paulo"]
#: Offset changes in ZONES, to start near and inside gaps and overlaps: (zone, first instant after).
TRANSITIONS = [
    (BERLIN, datetime(2025, 3, 30, 1, tzinfo=UTC)),
    (BERLIN, datetime(2025, 10, 26, 1, tzinfo=UTC)),
    (NEW_YORK, datetime(2025, 3, 9, 7, tzinfo=UTC)),
    (NEW_YORK, datetime(2025, 11, 2, 6, tzinfo=UTC)),
    (SYDNEY, datetime(2025, 4, 5, 16, tzinfo=UTC)),
    (SYDNEY, datetime(2025, 10, 4, 16, tzinfo=UTC)),
    (LORD_HOWE, datetime(2025, 4, 5, 15, tzinfo=UTC)),
    (LORD_HOWE, datetime(2025, 10, 4, 15, 30, tzinfo=UTC)),
    ("America/Sao_Paulo", datetime(2018, 11, 4, 3, tzinfo=UTC)),
    ("America/Sao_Paulo", datetime(2019, 2, 17, 2, tzinfo=UTC)),
]
#: Hour fields naming the local hours those transitions touch (midnight to 3 o'clock).
NIGHT_HOURS = [
    ("*", set(range(24))),
    ("0-23", set(range(24))),
    ("*/2", set(range(0, 24, 2))),
    ("0", {0}),
    ("23,0", {23, 0}),
    ("1", {1}),
    ("2", {2}),
    ("1-3", {1, 2, 3}),
    ("1,2", {1, 2}),
    ("2-4/2", {2, 4}),
]
#: How far past the moment the walk looks for a firing instant next_after missed.
WINDOW = timedelta(days=2)


@st.composite
def field(draw: st.DrawFn, low: int, high: int) -> tuple[str, set[int]]:
    """A field's text and the values it names, worked out here independently of the parser."""
    items: list[str] = []
    values: set[int] = set()
    for _ in range(draw(st.integers(1, 3))):
        a = draw(st.integers(low, high))
        b = draw(st.integers(a, high))
        step = draw(st.integers(1, high))
        kind = draw(st.sampled_from(["*", "*/n", "a", "a-b", "a-b/n", "a/n"]))
        text, first, last, every = {
            "*": ("*", low, high, 1),
            "*/n": (f"*/{step}", low, high, step),
            "a": (f"{a}", a, a, 1),
            "a-b": (f"{a}-{b}", a, b, 1),
            "a-b/n": (f"{a}-{b}/{step}", a, b, step),
            "a/n": (f"{a}/{step}", a, high, step),
        }[kind]
        items.append(text)
        values.update(range(first, last + 1, every))
    return ",".join(items), values


def day_matches(day: date, fields: list[tuple[str, set[int]]]) -> bool:
    """Whether ``day`` is one of the fields' days, by Vixie's rule for the two day fields."""
    _, _, (day_text, days), (_, months), (weekday_text, weekdays) = fields
    by_date = day.day in days
    by_weekday = day.isoweekday() % 7 in {w % 7 for w in weekdays}
    either = not (day_text.startswith("*") or weekday_text.startswith("*"))
    return day.month in months and ((by_date or by_weekday) if either else (by_date and by_weekday))


def fires(instant: datetime, tz: ZoneInfo, fields: list[tuple[str, set[int]]]) -> bool:
    """Whether a periodic job with these fields fires at ``instant``, by the documented rules."""
    (_, minutes), (_, hours) = fields[:2]
    local = instant.astimezone(tz)
    if local.second or local.microsecond:
        return False
    if not (local.minute in minutes and local.hour in hours and day_matches(local.date(), fields)):
        return False
    repeated = local.replace(fold=1 - local.fold).utcoffset() != local.utcoffset()
    return not repeated or local.fold == 0 or hours == set(range(24))


def fires_that_day(day: date, tz: ZoneInfo, fields: list[tuple[str, set[int]]]) -> bool:
    """Whether the fields fire at least once on the local date ``day`` (a matching day with a
    matching time of day that no spring-forward gap skips)."""
    (_, minutes), (_, hours) = fields[:2]
    if not day_matches(day, fields):
        return False
    for hour in sorted(hours):
        for minute in sorted(minutes):
            wall = datetime.combine(day, time_of_day(hour, minute))
            before = wall.replace(tzinfo=tz, fold=0).utcoffset()
            after = wall.replace(tzinfo=tz, fold=1).utcoffset()
            assert before is not None and after is not None
            if before >= after:
                return True
    return False


def assert_next_after_is_the_first_firing_instant(
    fields: list[tuple[str, set[int]]], zone: str, moment: datetime
) -> None:
    expression = " ".join(text for text, _ in fields)
    try:
        cron = Cron.parse(expression)
    except CronError as error:
        # only a day that must match both day fields can be impossible, and only by date
        (day_text, days), (_, months), (weekday_text, _) = fields[2:]
        assert "never fires" in str(error)
        assert day_text.startswith("*") or weekday_text.startswith("*")
        assert all(day > calendar.monthrange(2000, month)[1] for day in days for month in months)
        assume(False)
        return
    tz = ZoneInfo(zone)
    found = cron.next_after(moment, tz)
    assert found > moment
    assert fires(found, tz, fields), f"{expression} in {zone}: {found.astimezone(tz)} should not fire"
    # Minute by minute after the moment (every zone here has whole-minute offsets, so local
    # minutes start on UTC minutes)...
    step = moment.replace(second=0, microsecond=0) + timedelta(minutes=1)
    while step < min(found, moment + WINDOW):
        assert not fires(step, tz, fields), (
            f"{expression} in {zone}: {step.astimezone(tz)} fires before {found}"
        )
        step += timedelta(minutes=1)
    if found <= moment + WINDOW:
        return
    # ...then, for an occurrence further away, day by day up to the found day...
    day, last = moment.astimezone(tz).date() + timedelta(days=1), found.astimezone(tz).date()
    while day < last:
        assert not fires_that_day(day, tz, fields), f"{expression} in {zone}: {day} fires before {found}"
        day += timedelta(days=1)
    # ...and minute by minute through the found day up to the occurrence.
    step = max(step, found - timedelta(hours=26))
    while step < found:
        assert not fires(step, tz, fields), (
            f"{expression} in {zone}: {step.astimezone(tz)} fires before {found}"
        )
        step += timedelta(minutes=1)


@settings(derandomize=True, max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.tuples(field(0, 59), field(0, 23), field(1, 31), field(1, 12), field(0, 7)),
    st.sampled_from(ZONES),
    st.datetimes(min_value=datetime(1990, 1, 1), max_value=datetime(2060, 1, 1), timezones=st.just(UTC)),
)
def test_next_after_is_the_first_firing_instant_after_the_moment(
    drawn: tuple[tuple[str, set[int]], ...], zone: str, moment: datetime
) -> None:
    assert_next_after_is_the_first_firing_instant(list(drawn), zone, moment)


#: Minute fields that fire often and seldom inside an hour.
SOME_MINUTES = [
    ("0", {0}),
    ("30", {30}),
    ("45", {45}),
    ("*/15", {0, 15, 30, 45}),
    ("*", set(range(60))),
    ("10,50", {10, 50}),
]


@settings(derandomize=True, max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.one_of(st.sampled_from(SOME_MINUTES), field(0, 59)),
    st.sampled_from(NIGHT_HOURS),
    st.sampled_from(TRANSITIONS),
    # from two hours before the change to one after, off the minute; uniform, where
    # st.integers would favour values near 0
    st.sampled_from(range(-2 * 3600, 3600, 37)),
)
def test_next_after_is_the_first_firing_instant_around_clock_changes(
    minutes: tuple[str, set[int]],
    hours: tuple[str, set[int]],
    transition: tuple[str, datetime],
    seconds: int,
) -> None:
    zone, changed_at = transition
    every_day = [("*", set(range(1, 32))), ("*", set(range(1, 13))), ("*", set(range(8)))]
    moment = changed_at + timedelta(seconds=seconds)
    assert_next_after_is_the_first_firing_instant([minutes, hours, *every_day], zone, moment)
