"""Expiring certificates: the pure scan on a fake clock, what it finds in the sample settings and agreements,
and the warnings logged at start (and each day)."""

from __future__ import annotations

import asyncio
import logging
from datetime import UTC, datetime, timedelta

import pytest

from msh.runtime.agreements import load_agreements
from msh.runtime.certificates import CertificateWatch, NamedCertificate, certificates_in_use, expiring
from tests.unit.admin.conftest import settings

NOW = datetime(2026, 12, 1, 9, 0, tzinfo=UTC)


def cert(name: str, days: float) -> NamedCertificate:
    return NamedCertificate("tls.certificate", name, f"CN={name}", NOW + timedelta(days=days))


def test_the_scan_finds_what_expires_within_the_window_soonest_first() -> None:
    certificates = [cert("later", 45), cert("soon", 10), cert("gone", -2), cert("edge", 30)]
    found = expiring(certificates, NOW, timedelta(days=30))
    assert [(e.certificate.name, e.days, e.expired) for e in found] == [
        ("gone", -2, True),
        ("soon", 10, False),
        ("edge", 30, False),
    ]
    assert "expires 2026-12-11 09:00 UTC (in 10.0 days)" in str(found[1])
    assert "expired 2026-11-29 09:00 UTC" in str(found[0])
    # A day later on the fake clock, the same certificates: one more day gone from each.
    assert [e.days for e in expiring(certificates, NOW + timedelta(days=1), timedelta(days=30))] == [-3, 9, 29]
    assert [e.certificate.name for e in expiring(certificates, NOW, timedelta(0))] == ["gone"]


def test_ours_and_the_agreements_certificates_are_found() -> None:
    s = settings("a")
    agreements = load_agreements(s.agreements.files(), verify_signatures=s.agreements.verify_signatures)
    found = certificates_in_use(s, agreements)
    sources = {c.source for c in found}
    assert "tls.certificate" in sources
    assert {f"agreement {cpa.cpaid}" for cpa in agreements} <= sources
    assert all(c.not_after.tzinfo is not None and c.subject for c in found)


def test_the_watch_warns_at_start_with_the_event_field(caplog: pytest.LogCaptureFixture) -> None:
    certificates = [cert("soon", 3), cert("later", 300)]
    watch = CertificateWatch(lambda: certificates, timedelta(days=30), lambda: NOW)
    with caplog.at_level(logging.WARNING, logger="msh.runtime.certificates"):
        assert watch.look() == 1
    (record,) = caplog.records
    assert record.levelno == logging.WARNING
    assert "certificate soon (tls.certificate; subject CN=soon) expires" in record.getMessage()
    assert record.event == "certificate-expiry"  # type: ignore[attr-defined]
    expired = CertificateWatch(lambda: [cert("gone", -1)], timedelta(days=30), lambda: NOW)
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="msh.runtime.certificates"):
        assert expired.look() == 1
    assert caplog.records[0].levelno == logging.ERROR


def test_the_watch_looks_again_every_period_until_stopped(caplog: pytest.LogCaptureFixture) -> None:
    moments = iter(NOW + timedelta(days=n) for n in range(100))
    watch = CertificateWatch(lambda: [cert("soon", 5)], timedelta(days=30), lambda: next(moments), every=timedelta(0))

    async def main() -> None:
        await watch.start()  # the look at start
        for _ in range(20):
            await asyncio.sleep(0)  # the "daily" looks (every=0 here)
        await watch.stop()

    with caplog.at_level(logging.WARNING, logger="msh.runtime.certificates"):
        asyncio.run(main())
    days = [r.getMessage().split("(in ")[1].split(" days")[0] for r in caplog.records if "(in " in r.getMessage()]
    assert len(days) >= 3 and days[:3] == ["5.0", "4.0", "3.0"]  # each look on the clock of its day
    assert any("expired" in r.getMessage() for r in caplog.records)  # day 5 on: expired, at error level
