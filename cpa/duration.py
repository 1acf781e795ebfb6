"""xs:duration as a value: months and an exact number of microseconds (XML Schema Part 2 §3.2.6).

An agreement's durations (RetryInterval, PersistDuration, BusinessTransactionCharacteristics@timeTo...) are
xs:duration, and a legal xs:duration may count months and years (``P1M``, ``P180M``, ``P1Y``), which have
no fixed length. :class:`XsDuration` keeps such a value as it is written (a number of months and a number
of microseconds, one sign for both) and gives an instant only where one is needed: :meth:`XsDuration.add_to`
adds it to the instant it starts from, as XML Schema Part 2 Appendix E defines ("Adding durations to
dateTimes": the months first, the day pinned to the last day of the resulting month, then the day-time
part). A fixed :class:`~datetime.timedelta` exists only when there are no months
(:meth:`XsDuration.to_timedelta`).

Durations are only partially ordered (XML Schema Part 2 §3.2.6.2: ``P1M`` and ``P30D`` are neither
shorter nor longer than each other): :class:`XsDuration` has no ``<``; compare the instants that
:meth:`~XsDuration.add_to` gives from the same starting instant.

    >>> d = XsDuration.parse("P1M")
    >>> d.add_to(datetime(2024, 1, 31, 12, tzinfo=UTC)).isoformat()
    '2024-02-29T12:00:00+00:00'
    >>> str(XsDuration.parse("P180M")), str(XsDuration.parse("PT90M"))
    ('P15Y', 'PT1H30M')
"""

from __future__ import annotations

import calendar
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Final

from elementpath.datatypes import Duration

__all__ = ["XsDuration", "parse_duration"]

_US_PER_SECOND: Final = 1_000_000
_US_PER_DAY: Final = 86_400 * _US_PER_SECOND
_LATEST: Final = datetime.max.replace(tzinfo=UTC)


@dataclass(frozen=True, slots=True)
class XsDuration:
    """An xs:duration: ``months`` (a year is 12) and ``microseconds`` (a day is 86,400 seconds).

    Both parts have the sign of the duration (XML Schema Part 2 §3.2.6.1: one sign for the whole value), so
    a negative duration has ``months <= 0`` and ``microseconds <= 0``. Fractions of a second finer than a
    microsecond (the resolution of :class:`~datetime.datetime`, hence of every instant the MSH computes)
    are dropped when reading. Equal values are equal however written (``P1Y`` == ``P12M``, ``P1D`` ==
    ``PT24H``).
    """

    months: int = 0
    microseconds: int = 0

    def __post_init__(self) -> None:
        for name in ("months", "microseconds"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int):
                raise TypeError(f"XsDuration.{name} must be an int, got {value!r}")
        # XML Schema Part 2 §3.2.6.1: the sign applies to every field at once.
        if (self.months < 0 < self.microseconds) or (self.microseconds < 0 < self.months):
            raise ValueError(
                f"XsDuration months ({self.months}) and microseconds ({self.microseconds}) must have the same sign"
            )

    # -- construction --------------------------------------------------------------------------------

    @classmethod
    def parse(cls, text: str) -> XsDuration:
        """The xs:duration ``text`` (``"PT30S"``, ``"P1M"``, ``"-P1DT2H"``; surrounding blanks are ignored).

        Raises :class:`ValueError` whose message starts with the quoted text and says what to write
        instead, when ``text`` is not in the xs:duration lexical space (``""``, ``"30s"``, ``"P1.5D"``) or
        counts more months than any calendar holds.
        """
        return _read(text, "PT30S, P1D or P1M")

    @classmethod
    def from_timedelta(cls, value: timedelta) -> XsDuration:
        """The fixed-length duration ``value`` (no months)."""
        return cls(0, (value.days * 86_400 + value.seconds) * _US_PER_SECOND + value.microseconds)

    # -- properties ----------------------------------------------------------------------------------

    @property
    def is_negative(self) -> bool:
        """True for a duration below zero (``-P1D``)."""
        return self.months < 0 or self.microseconds < 0

    @property
    def is_fixed_length(self) -> bool:
        """True when it counts no months, so it has a fixed length (:meth:`to_timedelta` works)."""
        return self.months == 0

    def to_timedelta(self) -> timedelta:
        """The fixed length of a duration without months.

        Raises :class:`ValueError` when it counts months or years (XML Schema Part 2 §3.2.6.2: they have no
        fixed number of seconds) or is too long for a timedelta.
        """
        if self.months:
            raise ValueError(
                f"'{self}' counts months or years, which have no fixed length; "
                "express it in days, hours, minutes or seconds (e.g. P30D instead of P1M)"
            )
        try:
            return timedelta(microseconds=self.microseconds)
        except OverflowError:
            raise ValueError(f"'{self}' is too long to be used; give a shorter duration") from None

    # -- arithmetic ----------------------------------------------------------------------------------

    def add_to(self, instant: datetime) -> datetime:
        """``instant`` plus this duration, as XML Schema Part 2 Appendix E adds a duration to a dateTime.

        The months first: the year and month move, and the day is pinned to the last day of the resulting
        month (2024-01-31 + P1M is 2024-02-29); then the days, hours, minutes and seconds are added as a
        fixed length. The time zone of ``instant`` is kept. Raises :class:`OverflowError` when the result
        is outside the years 1 to 9999.
        """
        result = instant
        if self.months:
            # XML Schema Part 2 Appendix E: months first, with carry into the year.
            year, month0 = divmod(instant.year * 12 + instant.month - 1 + self.months, 12)
            if not 1 <= year <= 9999:
                raise OverflowError(f"{instant.isoformat()} + {self} is outside the years 1 to 9999")
            # Appendix E: the day is pinned to the last day of the resulting month.
            day = min(instant.day, calendar.monthrange(year, month0 + 1)[1])
            result = instant.replace(year=year, month=month0 + 1, day=day)
        try:
            # Appendix E: then the day-time part, with carries (fixed-length arithmetic on the fields).
            return result + timedelta(microseconds=self.microseconds)
        except OverflowError:
            raise OverflowError(f"{instant.isoformat()} + {self} is outside the years 1 to 9999") from None

    def add_to_or_latest(self, instant: datetime) -> datetime:
        """:meth:`add_to`, or the latest representable instant (9999-12-31T23:59:59.999999 UTC) when the
        result is later than that: "not within any time the MSH can represent", for a deadline."""
        try:
            return self.add_to(instant)
        except OverflowError:
            if self.is_negative:
                raise
            return _LATEST

    def __mul__(self, factor: int) -> XsDuration:
        """Each part times ``factor`` (as XPath's op:multiply-yearMonthDuration/-dayTimeDuration do)."""
        if isinstance(factor, bool) or not isinstance(factor, int):
            return NotImplemented
        return XsDuration(self.months * factor, self.microseconds * factor)

    __rmul__ = __mul__

    def __neg__(self) -> XsDuration:
        return XsDuration(-self.months, -self.microseconds)

    # -- text ----------------------------------------------------------------------------------------

    def __str__(self) -> str:
        """The canonical lexical form (XML Schema 1.1 Part 2 §3.3.6.2): ``P1Y2M``, ``PT1H30M``, ``-P1DT0.5S``,
        ``PT0S`` for zero."""
        sign = "-" if self.is_negative else ""
        months, micro = abs(self.months), abs(self.microseconds)
        years, months = divmod(months, 12)
        date = (f"{years}Y" if years else "") + (f"{months}M" if months else "")
        days, micro = divmod(micro, _US_PER_DAY)
        hours, micro = divmod(micro, 3600 * _US_PER_SECOND)
        minutes, micro = divmod(micro, 60 * _US_PER_SECOND)
        seconds, fraction = divmod(micro, _US_PER_SECOND)
        date += f"{days}D" if days else ""
        time = (f"{hours}H" if hours else "") + (f"{minutes}M" if minutes else "")
        if seconds or fraction:
            time += f"{seconds}.{fraction:06d}".rstrip("0") + "S" if fraction else f"{seconds}S"
        if not date and not time:
            return "PT0S"
        return f"{sign}P{date}" + (f"T{time}" if time else "")

    def __repr__(self) -> str:
        return f"XsDuration('{self}')"

    def describe(self) -> str:
        """The duration in words for people: ``1 month 2 days``, ``1 year``, ``30 seconds``, ``1.5 seconds``,
        ``no time`` for zero."""
        months, micro = abs(self.months), abs(self.microseconds)
        years, months = divmod(months, 12)
        days, micro = divmod(micro, _US_PER_DAY)
        hours, micro = divmod(micro, 3600 * _US_PER_SECOND)
        minutes, micro = divmod(micro, 60 * _US_PER_SECOND)
        seconds = Decimal(micro) / _US_PER_SECOND
        parts = [
            f"{count} {unit}{'' if count == 1 else 's'}"
            for count, unit in ((years, "year"), (months, "month"), (days, "day"), (hours, "hour"), (minutes, "minute"))
            if count
        ]
        if seconds:
            text = f"{seconds.normalize():f}"
            parts.append(f"{text} second{'' if seconds == 1 else 's'}")
        if not parts:
            return "no time"
        return ("minus " if self.is_negative else "") + " ".join(parts)


def _read(text: str, examples: str) -> XsDuration:
    """``text`` read by elementpath's xs:duration reader (XML Schema Part 2 §3.2.6.1 lexical space)."""
    try:
        value = Duration.fromstring(text)
    except ValueError:
        raise ValueError(f"'{text}' is not an xs:duration; write it like {examples}") from None
    except OverflowError:
        raise ValueError(f"'{text}' is too long to be used; give a shorter duration") from None
    seconds: Decimal = value.seconds
    return XsDuration(int(value.months), int(seconds * _US_PER_SECOND))


def parse_duration(text: str) -> timedelta:
    """The fixed-length xs:duration ``text`` (``"PT30S"``, ``"PT0.5S"``, ``"P1DT2H"``) as a timedelta.

    For the values that must have a fixed length: the MSH settings' timeouts and intervals
    (:mod:`msh.runtime.config`). Zero (``"PT0S"``) is accepted; fractions of a second beyond microseconds
    are dropped. An agreement's durations are read with :meth:`XsDuration.parse` instead, which keeps
    months.

    Raises :class:`ValueError` whose message starts with the quoted text and says what is wrong and what
    to write instead, when ``text`` is not an xs:duration (e.g. ``""`` or ``"30s"``), counts months or
    years (``"P1M"``, ``"P1Y"``: XML Schema Part 2 §3.2.6.2 gives them no fixed number of seconds, so no
    exact timedelta exists), is negative (``"-PT1S"``), or is too long for a timedelta.
    """
    value = _read(text, "PT30S or P1D")
    if value.months:
        raise ValueError(
            f"'{text}' counts months or years, which have no fixed length; "
            "express it in days, hours, minutes or seconds (e.g. P30D instead of P1M)"
        )
    if value.is_negative:
        raise ValueError(f"'{text}' is negative; give a positive duration")
    try:
        return timedelta(microseconds=value.microseconds)
    except OverflowError:
        raise ValueError(f"'{text}' is too long to be used; give a shorter duration") from None
