"""xs:duration as a value (cpa.duration): reading, canonical text, and adding to an instant as XML Schema
Part 2 Appendix E does, with elementpath's XPath date arithmetic as an independent oracle."""

from __future__ import annotations

import calendar
from datetime import UTC, datetime, timedelta, timezone
from decimal import Decimal

import pytest
from elementpath.datatypes import DateTime, DayTimeDuration, Duration, YearMonthDuration
from hypothesis import given
from hypothesis import strategies as st

from cpa.duration import XsDuration, parse_duration

US = 1_000_000

instants = st.datetimes(
    min_value=datetime(1900, 1, 1), max_value=datetime(2200, 12, 31), timezones=st.just(UTC)
) | st.datetimes(min_value=datetime(1900, 1, 1), max_value=datetime(2200, 12, 31)).map(
    lambda d: d.replace(tzinfo=timezone(timedelta(hours=-5)))
)
month_counts = st.integers(-1200, 1200)
micro_counts = st.integers(-(10**15), 10**15)


@st.composite
def durations(draw: st.DrawFn) -> XsDuration:
    """Any xs:duration of up to a century: one sign for months and microseconds together."""
    months, micro = abs(draw(month_counts)), abs(draw(micro_counts))
    return XsDuration(months, micro) if draw(st.booleans()) else XsDuration(-months, -micro)


# --- reading and writing ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "months", "microseconds", "canonical"),
    [
        ("P1M", 1, 0, "P1M"),
        ("P180M", 180, 0, "P15Y"),
        ("P1Y", 12, 0, "P1Y"),
        ("P1Y2M3DT4H5M6.5S", 14, ((3 * 24 + 4) * 3600 + 5 * 60 + 6) * US + US // 2, "P1Y2M3DT4H5M6.5S"),
        ("-P1M", -1, 0, "-P1M"),
        ("-PT0.000001S", 0, -1, "-PT0.000001S"),
        ("PT90M", 0, 5400 * US, "PT1H30M"),
        ("PT36H", 0, 36 * 3600 * US, "P1DT12H"),
        ("P0Y0M0DT0H0M0S", 0, 0, "PT0S"),
        ("-P0D", 0, 0, "PT0S"),
        ("  P1D\n", 0, 86400 * US, "P1D"),  # xs:duration collapses white space
    ],
)
def test_reading_and_canonical_text(text: str, months: int, microseconds: int, canonical: str) -> None:
    value = XsDuration.parse(text)
    assert (value.months, value.microseconds) == (months, microseconds)
    assert str(value) == canonical
    assert repr(value) == f"XsDuration('{canonical}')"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "'' is not an xs:duration; write it like PT30S, P1D or P1M"),
        ("30s", "'30s' is not an xs:duration; write it like PT30S, P1D or P1M"),
        ("P", "'P' is not an xs:duration"),
        ("PT", "'PT' is not an xs:duration"),
        ("P1.5D", "'P1.5D' is not an xs:duration"),
        ("+P1D", "'+P1D' is not an xs:duration"),
        ("P99999999999Y", "'P99999999999Y' is too long to be used; give a shorter duration"),
    ],
)
def test_what_is_not_an_xs_duration_is_refused_with_what_to_write(text: str, message: str) -> None:
    with pytest.raises(ValueError) as caught:
        XsDuration.parse(text)
    assert str(caught.value).startswith(message)


def test_one_sign_for_the_whole_value() -> None:
    with pytest.raises(ValueError, match="same sign"):
        XsDuration(1, -1)
    with pytest.raises(ValueError, match="same sign"):
        XsDuration(-1, 1)
    with pytest.raises(TypeError, match="must be an int"):
        XsDuration(1.5, 0)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="must be an int"):
        XsDuration(True, 0)


def test_equal_values_are_equal_however_written() -> None:
    assert XsDuration.parse("P1Y") == XsDuration.parse("P12M")
    assert XsDuration.parse("P1D") == XsDuration.parse("PT24H") == XsDuration.from_timedelta(timedelta(days=1))
    assert hash(XsDuration.parse("P1Y")) == hash(XsDuration(12))
    # Durations are only partially ordered: no < (P1M and P30D are neither shorter nor longer).
    with pytest.raises(TypeError):
        _ = XsDuration(1) < XsDuration(0, 30 * 86400 * US)  # type: ignore[operator]


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("P1M2D", "1 month 2 days"),
        ("P15Y", "15 years"),
        ("P1Y1M1DT1H1M1S", "1 year 1 month 1 day 1 hour 1 minute 1 second"),
        ("PT1.5S", "1.5 seconds"),
        ("-PT30S", "minus 30 seconds"),
        ("PT0S", "no time"),
    ],
)
def test_described_in_words(text: str, words: str) -> None:
    assert XsDuration.parse(text).describe() == words


@given(durations())
def test_the_canonical_text_reads_back_to_the_same_value(value: XsDuration) -> None:
    assert XsDuration.parse(str(value)) == value
    # elementpath reads the text we write as the same value.
    oracle = Duration.fromstring(str(value))
    assert (oracle.months, int(oracle.seconds * US)) == (value.months, value.microseconds)


# --- fixed lengths -----------------------------------------------------------------------------------------


def test_a_fixed_length_only_without_months() -> None:
    assert XsDuration.parse("P1DT0.5S").to_timedelta() == timedelta(days=1, milliseconds=500)
    assert XsDuration.parse("P0M").is_fixed_length
    with pytest.raises(ValueError, match="'P1M' counts months or years, which have no fixed length"):
        XsDuration.parse("P1M").to_timedelta()
    with pytest.raises(ValueError, match="too long"):
        XsDuration(0, 10**20).to_timedelta()


@given(st.timedeltas(min_value=timedelta(days=-99999), max_value=timedelta(days=99999)))
def test_timedeltas_go_through_unchanged(value: timedelta) -> None:
    assert XsDuration.from_timedelta(value).to_timedelta() == value


def test_parse_duration_is_for_fixed_non_negative_lengths() -> None:
    assert parse_duration("PT30S") == timedelta(seconds=30)
    with pytest.raises(ValueError, match="'P1M' counts months or years"):
        parse_duration("P1M")
    with pytest.raises(ValueError, match="'-PT1S' is negative"):
        parse_duration("-PT1S")
    with pytest.raises(ValueError) as caught:
        parse_duration("x")
    assert str(caught.value) == "'x' is not an xs:duration; write it like PT30S or P1D"


# --- adding to an instant (XML Schema Part 2 Appendix E) -------------------------------------------------------


@pytest.mark.parametrize(
    ("start", "text", "end"),
    [
        (datetime(2024, 1, 31, 12, tzinfo=UTC), "P1M", datetime(2024, 2, 29, 12, tzinfo=UTC)),  # leap year
        (datetime(2023, 1, 31, 12, tzinfo=UTC), "P1M", datetime(2023, 2, 28, 12, tzinfo=UTC)),
        (datetime(2024, 2, 29, tzinfo=UTC), "P1Y", datetime(2025, 2, 28, tzinfo=UTC)),
        (datetime(2024, 2, 29, tzinfo=UTC), "P4Y", datetime(2028, 2, 29, tzinfo=UTC)),
        (datetime(2024, 3, 31, tzinfo=UTC), "-P1M", datetime(2024, 2, 29, tzinfo=UTC)),
        (datetime(2024, 12, 15, tzinfo=UTC), "P1M", datetime(2025, 1, 15, tzinfo=UTC)),  # carry into the year
        (datetime(2024, 1, 15, tzinfo=UTC), "-P1M", datetime(2023, 12, 15, tzinfo=UTC)),
        # Months first, the day pinned, then the day-time part: Jan 31 + P1MT1H is Feb 29 01:00, not Mar 1.
        (datetime(2024, 1, 31, 23, 30, tzinfo=UTC), "P1MT1H", datetime(2024, 3, 1, 0, 30, tzinfo=UTC)),
        (datetime(2024, 1, 30, 12, tzinfo=UTC), "P1MT1H", datetime(2024, 2, 29, 13, tzinfo=UTC)),
        (datetime(2025, 1, 1, tzinfo=UTC), "P180M", datetime(2040, 1, 1, tzinfo=UTC)),
    ],
)
def test_adding_months_pins_the_day_to_the_end_of_the_month(start: datetime, text: str, end: datetime) -> None:
    assert XsDuration.parse(text).add_to(start) == end


def test_the_time_zone_is_kept() -> None:
    plus_two = timezone(timedelta(hours=2))
    result = XsDuration.parse("P1MT2H").add_to(datetime(2024, 1, 31, 23, 0, tzinfo=plus_two))
    assert result == datetime(2024, 3, 1, 1, 0, tzinfo=plus_two) and result.tzinfo is plus_two


def test_outside_the_years_1_to_9999_is_an_overflow() -> None:
    with pytest.raises(OverflowError, match=r"\+ P9000Y is outside the years 1 to 9999"):
        XsDuration.parse("P9000Y").add_to(datetime(2024, 1, 1, tzinfo=UTC))
    with pytest.raises(OverflowError, match="outside the years 1 to 9999"):
        XsDuration.parse("P3000000D").add_to(datetime(2024, 1, 1, tzinfo=UTC))
    with pytest.raises(OverflowError):
        XsDuration.parse("-P2025Y").add_to(datetime(2024, 1, 1, tzinfo=UTC))
    latest = datetime.max.replace(tzinfo=UTC)
    assert XsDuration.parse("P9000Y").add_to_or_latest(datetime(2024, 1, 1, tzinfo=UTC)) == latest
    assert XsDuration.parse("P1D").add_to_or_latest(datetime(2024, 1, 1, tzinfo=UTC)) == datetime(
        2024, 1, 2, tzinfo=UTC
    )
    with pytest.raises(OverflowError):  # before the year 1 is no deadline: it stays an error
        XsDuration.parse("-P2025Y").add_to_or_latest(datetime(2024, 1, 1, tzinfo=UTC))


def test_multiplying_multiplies_each_part() -> None:
    assert 3 * XsDuration.parse("P1MT5M") == XsDuration.parse("P3MT15M") == XsDuration.parse("P1MT5M") * 3
    assert -XsDuration.parse("P1M") == XsDuration.parse("-P1M")


@given(instants)
def test_zero_is_the_identity(instant: datetime) -> None:
    assert XsDuration().add_to(instant) == instant
    assert XsDuration.parse("P0M").add_to(instant) == instant


@given(instants, micro_counts)
def test_without_months_adding_is_adding_the_fixed_length(instant: datetime, micro: int) -> None:
    value = XsDuration(0, micro)
    assert value.add_to(instant) == instant + value.to_timedelta()


@given(instants, month_counts)
def test_months_move_the_month_and_pin_the_day(instant: datetime, months: int) -> None:
    result = XsDuration(months).add_to(instant)
    assert (result.year * 12 + result.month) - (instant.year * 12 + instant.month) == months
    assert result.day == min(instant.day, calendar.monthrange(result.year, result.month)[1])
    assert (result.time(), result.tzinfo) == (instant.time(), instant.tzinfo)


@given(instants, durations())
def test_adding_agrees_with_xpath_date_arithmetic(instant: datetime, value: XsDuration) -> None:
    # XPath 2.0 adds a yearMonthDuration and then a dayTimeDuration: Appendix E, done by another implementation.
    oracle = DateTime.fromdatetime(instant)
    if value.months:
        oracle = oracle + YearMonthDuration(months=value.months)
    if value.microseconds:
        # (seconds as a Decimal: elementpath's fromtimedelta misreads negative timedeltas)
        oracle = oracle + DayTimeDuration(seconds=Decimal(value.microseconds) / US)
    offset = oracle.tzinfo.utcoffset(None) if oracle.tzinfo is not None else None
    assert offset is not None
    expected = datetime(
        oracle.year,
        oracle.month,
        oracle.day,
        oracle.hour,
        oracle.minute,
        int(oracle.second),
        oracle.microsecond,
        tzinfo=timezone(offset),
    )
    result = value.add_to(instant)
    assert (result, result.utcoffset()) == (expected, expected.utcoffset())
