"""What ``msh serve`` warns about at start besides expiring certificates: certificates not valid yet
(RFC 5280 §4.1.2.5) and agreements outside their validity window (CPP/A 2.0 §9.4.2 Start, §9.4.3 End), on a
fake clock; and :func:`agreement_warnings`, the same look at one agreement for ``msh cpa validate``."""

from __future__ import annotations

import logging
from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest
from cryptography.hazmat.primitives.serialization import Encoding

from cpa.model import Certificate
from msh.runtime.certificates import (
    CertificateWatch,
    NamedCertificate,
    agreement_warnings,
    agreement_window_problem,
    not_yet_valid,
)
from tests.support.cpa_factory import make_cpa
from tests.support.security import certificate

NOW = datetime(2026, 12, 1, 9, 0, tzinfo=UTC)


def named(name: str, *, starts: float, ends: float) -> NamedCertificate:
    return NamedCertificate("tls.trusted", name, f"CN={name}", NOW + timedelta(days=ends), NOW + timedelta(days=starts))


def test_certificates_whose_validity_has_not_begun_are_found() -> None:
    found = not_yet_valid([named("now", starts=-1, ends=9), named("next", starts=2, ends=99)], NOW)
    assert [c.name for c in found] == ["next"]
    assert not_yet_valid([NamedCertificate("s", "no start known", "CN=x", NOW)], NOW) == ()


def test_an_agreement_outside_its_window_is_said_with_its_bound() -> None:
    cpa = make_cpa(start=NOW - timedelta(days=10), end=NOW + timedelta(days=10))
    assert agreement_window_problem(cpa, NOW) is None
    ended = agreement_window_problem(cpa, NOW + timedelta(days=10))  # §9.4.3: End itself is outside
    assert ended is not None and "is no longer in force: it ended 2026-12-11 09:00 UTC (tp:End)" in ended
    early = agreement_window_problem(cpa, NOW - timedelta(days=11))
    assert early is not None and "is not in force yet: it starts 2026-11-21 09:00 UTC (tp:Start)" in early


def test_the_watch_warns_at_start_for_not_yet_valid_certificates_and_agreements_not_in_force(
    caplog: pytest.LogCaptureFixture,
) -> None:
    ended = make_cpa(cpaid="cpa-ended", start=NOW - timedelta(days=100), end=NOW - timedelta(days=1))
    current = make_cpa(cpaid="cpa-current", start=NOW - timedelta(days=1), end=NOW + timedelta(days=100))
    watch = CertificateWatch(
        lambda: [named("next", starts=3, ends=400), named("fine", starts=-3, ends=400)],
        timedelta(days=30),
        lambda: NOW,
        agreements=lambda: [ended, current],
    )
    with caplog.at_level(logging.WARNING, logger="msh.runtime.certificates"):
        assert watch.look() == 2
    messages = {r.event: r.getMessage() for r in caplog.records}  # type: ignore[attr-defined]
    assert (
        "certificate next (tls.trusted; subject CN=next) is not valid before 2026-12-04 09:00 UTC"
        in (messages["certificate-not-yet-valid"])
    )
    assert messages["agreement-not-in-force"].startswith("agreement cpa-ended is no longer in force")
    assert all(r.levelno == logging.WARNING for r in caplog.records)


def test_agreement_warnings_name_each_certificate_once() -> None:
    old = certificate("old A", not_before=NOW - timedelta(days=60), not_after=NOW - timedelta(days=1))
    cpa = make_cpa(start=NOW - timedelta(days=1), end=NOW + timedelta(days=1))
    a, b = cpa.party_infos
    a = replace(a, certificates=(Certificate("A_Cert", (old.public_bytes(Encoding.DER),)),))
    cpa = replace(cpa, party_infos=(a, b))
    [warning] = agreement_warnings(cpa, NOW)
    assert warning.startswith("certificate A_Cert of ") and "subject CN=old A) expired 2026-11-30 09:00 UTC" in warning
    assert len(agreement_warnings(cpa, NOW + timedelta(days=2))) == 2  # and the agreement has ended
