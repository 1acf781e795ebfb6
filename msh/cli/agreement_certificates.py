"""The certificates of an agreement as ``msh cpa show`` and ``msh cpa validate`` report them.

``show`` prints each certificate a party's PartyInfo names (CPP/A 2.0 §8.4.33) with its subject and expiry,
and its JSON form (``--json``, camelCase keys) carries the same; ``validate`` warns for an agreement outside
its validity window (§9.4.2 Start, §9.4.3 End) or a certificate that has expired or is not valid yet
(:func:`msh.runtime.certificates.agreement_warnings`, the look ``msh serve`` takes at start).
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Final

if TYPE_CHECKING:
    from cryptography import x509

    from cpa.model import Certificate, CollaborationProtocolAgreement, PartyInfo

__all__ = ["agreement_json", "certificate_lines", "validity_warnings", "window_state"]

_DAY: Final = timedelta(days=1)


def _parsed(der: bytes) -> x509.Certificate | None:
    from cpa.trust import load_certificate

    return load_certificate(der)


def _expiry(certificate: x509.Certificate, now: datetime) -> str:
    """``expires 2027-11-28 (in 364 days)``, ``EXPIRED on ...``, ``NOT YET VALID (from ...)``."""
    after, before = certificate.not_valid_after_utc, certificate.not_valid_before_utc
    if now > after:
        return f"EXPIRED on {after:%Y-%m-%d %H:%M} UTC"
    if now < before:
        return f"NOT YET VALID (from {before:%Y-%m-%d %H:%M} UTC)"
    return f"expires {after:%Y-%m-%d %H:%M} UTC (in {(after - now) / _DAY:.0f} days)"


def certificate_lines(party: PartyInfo, now: datetime) -> list[str]:
    """One line per certificate ``party`` names: its certId, subject and expiry at ``now``, then one
    indented line per chain certificate in the same element (the first X509Certificate is the party's)."""
    if not party.certificates:
        return ["certificates: none"]
    lines = []
    for named in party.certificates:
        for position, der in enumerate(named.x509):
            certificate = _parsed(der)
            what = (
                f"{certificate.subject.rfc4514_string() or '(empty subject)'}, {_expiry(certificate, now)}"
                if certificate is not None
                else "unreadable"
            )
            lines.append(f"certificate {named.cert_id}: {what}" if position == 0 else f"  chain: {what}")
        if not named.x509:
            lines.append(f"certificate {named.cert_id}: no X509Certificate (a KeyName only)")
    return lines


def _certificate_json(named: Certificate, now: datetime) -> dict[str, object]:
    chain: list[dict[str, object]] = []
    for der in named.x509:
        certificate = _parsed(der)
        if certificate is None:
            chain.append({"readable": False})
            continue
        chain.append(
            {
                "readable": True,
                "subject": certificate.subject.rfc4514_string(),
                "issuer": certificate.issuer.rfc4514_string(),
                "notBefore": certificate.not_valid_before_utc.isoformat(),
                "notAfter": certificate.not_valid_after_utc.isoformat(),
                "expired": now > certificate.not_valid_after_utc,
                "notYetValid": now < certificate.not_valid_before_utc,
                "daysLeft": round((certificate.not_valid_after_utc - now) / _DAY, 1),
            }
        )
    head = chain[0] if chain else {}
    return {"certId": named.cert_id, **{k: v for k, v in head.items() if k != "readable"}, "chain": chain[1:]}


def window_state(agreement: CollaborationProtocolAgreement, now: datetime) -> str:
    """``in force now``, ``not yet in force`` or ``expired``: the agreement's window seen at ``now``."""
    if agreement.is_valid_at(now):
        return "in force now"
    return "not yet in force" if now < agreement.start else "expired"


def agreement_json(agreement: CollaborationProtocolAgreement, now: datetime) -> dict[str, object]:
    """The summary ``msh cpa show --json`` prints: the agreement's identity, window, parties, their
    PartyIds, actions and certificates (subject and expiry), and the warnings ``cpa validate`` gives."""
    parties = []
    for party in agreement.party_infos:
        roles = []
        for role in party.collaboration_roles:
            binding = role.service_binding
            roles.append(
                {
                    "role": role.role,
                    "service": binding.service,
                    "serviceType": binding.service_type,
                    "sends": [a.action for a in binding.can_send],
                    "receives": [a.action for a in binding.can_receive],
                }
            )
        parties.append(
            {
                "partyName": party.party_name,
                "partyIds": [{"value": p.value, "type": p.type} for p in party.party_ids],
                "roles": roles,
                "certificates": [_certificate_json(c, now) for c in party.certificates],
            }
        )
    return {
        "file": str(agreement.source),
        "cpaId": agreement.cpaid,
        "version": agreement.version,
        "status": agreement.status.value,
        "start": agreement.start.isoformat(),
        "end": agreement.end.isoformat(),
        "window": window_state(agreement, now),
        "signed": agreement.signed,
        "parties": parties,
        "warnings": [str(w) for w in agreement.warnings] + list(validity_warnings(agreement, now)),
    }


def validity_warnings(agreement: CollaborationProtocolAgreement, now: datetime) -> tuple[str, ...]:
    """The agreement's window and certificates at ``now``, as warnings (empty when all is in force)."""
    from msh.runtime.certificates import agreement_warnings

    return agreement_warnings(agreement, now)
