"""Certificates that expire: ours and those the agreements name, warned about before they stop working.

:func:`certificates_in_use` gathers them: our TLS certificate (``tls.certificate``, with its chain), our
signing certificate and its chain (``security.signing_certificate``), the extra trust anchors
(``tls.trusted``), and in each agreement in force every party's certificates (CPP/A 2.0 §8.4.33) and the
trust anchors of its SecurityDetails (§8.4.35). :func:`expiring` is the pure part: which of them expire
within a window at a given moment, soonest first, and :func:`not_yet_valid` those whose validity has not
begun. :class:`CertificateWatch` (started by ``msh serve``) logs them at start and then once a day
(``admin.certificate_warning``), with the agreements in force outside their validity window
(:func:`agreement_window_problem`); the admin port's ``/metrics`` shows every certificate's days to expiry
(:mod:`msh.admin.metrics`). :func:`agreement_warnings` is the same look at one agreement, for ``msh cpa
validate``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Final

from cryptography import x509

from cpa.model import Certificate, CollaborationProtocolAgreement
from msh.runtime.config import Settings
from msh.runtime.logfields import fields
from msh.security import load_certificates

__all__ = [
    "CertificateWatch",
    "Expiry",
    "NamedCertificate",
    "agreement_warnings",
    "agreement_window_problem",
    "certificates_in_use",
    "expiring",
    "not_yet_valid",
    "warn_agreement_windows",
    "warn_expiring",
    "warn_not_yet_valid",
]

log = logging.getLogger("msh.runtime.certificates")

_DAY: Final = timedelta(days=1)


@dataclass(frozen=True, slots=True)
class NamedCertificate:
    """A certificate and where it comes from: ``source`` (a setting, or ``agreement CPAID``) and ``name`` (the
    file, or the agreement's certId and party)."""

    source: str
    name: str
    subject: str
    not_after: datetime
    not_before: datetime | None = None

    def days_left(self, now: datetime) -> float:
        """Days until it expires at ``now`` (negative: it has expired)."""
        return (self.not_after - now) / _DAY


@dataclass(frozen=True, slots=True)
class Expiry:
    """A certificate that expires within the window, and in how many days (negative: expired)."""

    certificate: NamedCertificate
    days: float

    @property
    def expired(self) -> bool:
        return self.days <= 0

    def __str__(self) -> str:
        c = self.certificate
        when = (
            f"expired {c.not_after:%Y-%m-%d %H:%M} UTC"
            if self.expired
            else f"expires {c.not_after:%Y-%m-%d %H:%M} UTC (in {self.days:.1f} days)"
        )
        return f"certificate {c.name} ({c.source}; subject {c.subject}) {when}"


def expiring(certificates: Iterable[NamedCertificate], now: datetime, window: timedelta) -> tuple[Expiry, ...]:
    """The certificates that expire before ``now + window`` (the expired ones too), soonest first."""
    limit = now + window
    found = [Expiry(c, c.days_left(now)) for c in certificates if c.not_after <= limit]
    return tuple(sorted(found, key=lambda e: (e.certificate.not_after, e.certificate.source, e.certificate.name)))


def not_yet_valid(certificates: Iterable[NamedCertificate], now: datetime) -> tuple[NamedCertificate, ...]:
    """The certificates whose validity begins after ``now`` (RFC 5280 §4.1.2.5: unusable until then)."""
    return tuple(c for c in certificates if c.not_before is not None and now < c.not_before)


def agreement_window_problem(cpa: CollaborationProtocolAgreement, now: datetime) -> str | None:
    """What to say when ``now`` is outside ``cpa``'s validity window (CPP/A 2.0 §9.4.2 Start, §9.4.3 End:
    messages under it are refused), else None."""
    if cpa.is_valid_at(now):
        return None
    if now < cpa.start:
        return (
            f"agreement {cpa.cpaid} is not in force yet: it starts {cpa.start:%Y-%m-%d %H:%M} UTC (tp:Start); "
            "messages under it are refused until then"
        )
    return (
        f"agreement {cpa.cpaid} is no longer in force: it ended {cpa.end:%Y-%m-%d %H:%M} UTC (tp:End); messages "
        "under it are refused: agree a new one with the partner (a later tp:End)"
    )


def agreement_warnings(cpa: CollaborationProtocolAgreement, now: datetime) -> tuple[str, ...]:
    """Why ``cpa`` may not work at ``now``: outside its validity window, or a certificate in it expired or
    not yet valid (an expired partner certificate fails TLS and signature checks; ours, the partner's)."""
    found = [p for p in (agreement_window_problem(cpa, now),) if p is not None]
    certificates = _from_agreement(cpa, anchors=False)  # each certificate once, under the party declaring it
    found += [f"{e}: replace it in the agreement" for e in expiring(certificates, now, timedelta(0))]
    found += [
        f"certificate {c.name} ({c.source}; subject {c.subject}) is not valid before {c.not_before:%Y-%m-%d %H:%M} UTC"
        for c in not_yet_valid(certificates, now)
    ]
    return tuple(found)


def _named(certificate: x509.Certificate, source: str, name: str) -> NamedCertificate:
    return NamedCertificate(
        source,
        name,
        certificate.subject.rfc4514_string(),
        certificate.not_valid_after_utc,
        certificate.not_valid_before_utc,
    )


def _from_files(setting: str, paths: Iterable[Path]) -> list[NamedCertificate]:
    out = []
    for path in paths:
        try:
            chain = load_certificates(path)
        except Exception as exc:  # the settings checked it at start; a file changed since is said, not fatal
            log.warning("%s: %s cannot be read for its expiry: %s", setting, path, exc)
            continue
        for position, certificate in enumerate(chain):
            suffix = f" #{position + 1}" if position else ""
            out.append(_named(certificate, setting, f"{path.name}{suffix}"))
    return out


def _from_agreement(cpa: CollaborationProtocolAgreement, *, anchors: bool = True) -> list[NamedCertificate]:
    """The certificates of ``cpa``'s parties, and with ``anchors`` those of their SecurityDetails (each
    refers to a certificate some party declares: named again as the anchor the other party accepts)."""
    out = []
    for party in cpa.party_infos:
        named: list[Certificate] = list(party.certificates)
        for details in party.security_details if anchors else ():
            named.extend(details.trust_anchors)  # CPP/A 2.0 §8.4.35: the anchors a party accepts
        for certificate in named:
            for position, der in enumerate(certificate.x509):  # §8.4.33: the first is the party's own
                try:
                    parsed = x509.load_der_x509_certificate(der)
                except ValueError:
                    continue  # the agreement's loader has refused unreadable certificates already
                suffix = f" #{position + 1}" if position else ""
                out.append(
                    _named(parsed, f"agreement {cpa.cpaid}", f"{certificate.cert_id}{suffix} of {party.party_name}")
                )
    return out


def certificates_in_use(
    settings: Settings, agreements: Iterable[CollaborationProtocolAgreement]
) -> tuple[NamedCertificate, ...]:
    """Our certificates (settings) and those of ``agreements``, each once per source and name."""
    found: list[NamedCertificate] = []
    if settings.tls.certificate is not None:
        found += _from_files("tls.certificate", [settings.tls.certificate])
    if settings.security.signing_certificate is not None:
        found += _from_files("security.signing_certificate", [settings.security.signing_certificate])
    found += _from_files("tls.trusted", settings.tls.trusted)
    for cpa in agreements:
        found += _from_agreement(cpa)
    return tuple(dict.fromkeys(found))


def warn_expiring(found: Iterable[Expiry]) -> int:
    """Log each expiring certificate (an expired one at error level); how many were logged."""
    count = 0
    for expiry in found:
        extra = fields(event="certificate-expiry", cpa_id=expiry.certificate.source.removeprefix("agreement "))
        (log.error if expiry.expired else log.warning)("%s: renew it", expiry, extra=extra)
        count += 1
    return count


def warn_not_yet_valid(found: Iterable[NamedCertificate]) -> int:
    """Log each certificate not valid yet (a warning); how many were logged."""
    count = 0
    for c in found:
        cpa_id = c.source.removeprefix("agreement ") if c.source.startswith("agreement ") else None
        extra = fields(event="certificate-not-yet-valid", cpa_id=cpa_id)
        log.warning(
            "certificate %s (%s; subject %s) is not valid before %s UTC: it cannot be used until then",
            c.name,
            c.source,
            c.subject,
            f"{c.not_before:%Y-%m-%d %H:%M}",
            extra=extra,
        )
        count += 1
    return count


def warn_agreement_windows(agreements: Iterable[CollaborationProtocolAgreement], now: datetime) -> int:
    """Log each of ``agreements`` that is outside its validity window at ``now``; how many were logged."""
    count = 0
    for cpa in agreements:
        problem = agreement_window_problem(cpa, now)
        if problem is not None:
            log.warning("%s", problem, extra=fields(event="agreement-not-in-force", cpa_id=cpa.cpaid))
            count += 1
    return count


class CertificateWatch:
    """Warns about expiring and not yet valid certificates, and agreements outside their validity window,
    when started and then every ``every`` (a companion of ``msh serve``,
    :class:`msh.runtime.serving.Companion`); ``scan()`` gives the certificates in use and ``agreements()``
    the agreements at each look (they may change while it runs)."""

    def __init__(
        self,
        scan: Callable[[], Iterable[NamedCertificate]],
        window: timedelta,
        clock: Callable[[], datetime],
        *,
        every: timedelta = _DAY,
        agreements: Callable[[], Iterable[CollaborationProtocolAgreement]] = tuple,
    ) -> None:
        self.scan = scan
        self.window = window
        self.clock = clock
        self.every = every
        self.agreements = agreements
        self._task: asyncio.Task[None] | None = None

    def look(self) -> int:
        """Warn about what expires now, what is not valid yet, and the agreements not in force; how many
        warnings were logged."""
        now, found = self.clock(), tuple(self.scan())
        count = warn_expiring(expiring(found, now, self.window)) + warn_not_yet_valid(not_yet_valid(found, now))
        return count + warn_agreement_windows(self.agreements(), now)

    async def _run(self) -> None:
        while True:
            await asyncio.sleep(self.every.total_seconds())
            try:
                self.look()
            except Exception:  # never ends the MSH: said, and tried again the next day
                log.exception("the daily certificate check failed")

    async def start(self) -> None:
        self.look()
        self._task = asyncio.create_task(self._run(), name="msh-certificates")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
