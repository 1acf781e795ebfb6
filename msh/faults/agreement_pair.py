"""Two real MSH processes under an agreement someone else wrote: one ``msh serve`` per party, on loopback.

:func:`pair_from_agreement` copies a CPP/CPA 2.0 agreement into a work folder with two kinds of change only:

* each party's endpoints (``tp:Endpoint@uri``) point at a free port on 127.0.0.1, with the scheme (http or
  https) and the path the agreement gives;
* each party's certificates (every ``tp:Certificate`` of its PartyInfo) become the published demo
  certificate of ``samples/keys`` (``party-a`` for the first PartyInfo, ``party-b`` for the second), whose
  private keys the processes hold: the ``ds:KeyInfo`` keeps the elements the agreement wrote, with the demo
  certificate's values (X509Certificate, X509SubjectName, X509IssuerSerial, RSAKeyValue, KeyName).

Agreements written for tests often give both parties one and the same certificate, and each party's trust
anchors (the ``tp:TrustAnchors`` of its ``tp:SecurityDetails``, CPP/A 2.0 §8.4.35, which it applies to the
other party's signing and TLS certificates) then name a certificate of its own PartyInfo that happens to
be the other's too. With two certificates that is no longer so; to keep what
the anchors meant, each PartyInfo also gets the other party's certificate (a ``tp:Certificate`` with the
certId ``PARTYNAME_PartnerCert``, PARTYNAME made an NCName) and each of its TrustAnchors names it as well.

Everything else (CPAId, status, parties, services, actions, channels, sync modes, reliability, algorithms)
stays as written, except an End that has already passed: it is moved a year ahead and the change is listed
in :attr:`AgreementPair.adjustments` (so that a test can say so). It also writes one settings file per
party (its PartyId from the agreement, the copy, an SQLite store, its port, path and TLS, the demo keys for
TLS and signing) and returns a :class:`~msh.faults.pair.Partner` for each, not started
(:meth:`AgreementPair.start` starts both).
"""

from __future__ import annotations

import base64
import concurrent.futures
import json
import re
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

from cryptography import x509
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from lxml import etree

from msh.errors import ConfigurationError
from msh.faults.pair import SAMPLES, Partner, free_port
from msh.safexml import parse_xml
from msh.security import certificate_element

__all__ = ["AgreementPair", "AgreementParty", "pair_from_agreement"]

TP = "http://www.oasis-open.org/committees/ebxml-cppa/schema/cpp-cpa-2_0.xsd"
DS = "http://www.w3.org/2000/09/xmldsig#"
_KEYS = SAMPLES / "keys"


def _tp(name: str) -> str:
    return f"{{{TP}}}{name}"


def _ds(name: str) -> str:
    return f"{{{DS}}}{name}"


@dataclass(frozen=True)
class AgreementParty:
    """One party of the agreement and the ``msh serve`` that plays it.

    ``name`` is its ``partyName``, ``party_id`` its first PartyId (value, type), ``url`` its endpoint in the
    copy, ``key`` the demo key pair it uses (``a`` or ``b``)."""

    name: str
    party_id: tuple[str, str | None]
    url: str
    key: str
    partner: Partner


@dataclass(frozen=True)
class AgreementPair:
    """The copy of the agreement in ``work``, its two parties (in PartyInfo order), and what was adjusted
    besides endpoints and certificates (empty when nothing was)."""

    work: Path
    cpa: Path
    parties: tuple[AgreementParty, AgreementParty]
    adjustments: tuple[str, ...]

    def start(self, timeout: float = 30.0) -> None:
        """Start both ``msh serve`` processes (at once) and wait until each listens."""
        with concurrent.futures.ThreadPoolExecutor(2) as pool:
            for started in [pool.submit(p.partner.start, timeout) for p in self.parties]:
                started.result()

    def stop(self) -> None:
        for party in self.parties:
            party.partner.stop()


def _instant(text: str) -> datetime:
    """An xs:dateTime of the agreement (without a zone: UTC)."""
    moment = datetime.fromisoformat(text.strip().replace("Z", "+00:00"))
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def _int_b64(value: int) -> str:
    return _b64(value.to_bytes((value.bit_length() + 7) // 8, "big"))


def _replace_certificate(key_info: etree._Element, certificate: x509.Certificate, where: str) -> None:
    """Give each element of ``key_info`` the value it has for ``certificate`` (XML-DSig §4.4)."""
    public = certificate.public_key()
    values = {
        _ds("X509Certificate"): _b64(certificate.public_bytes(serialization.Encoding.DER)),
        _ds("X509SubjectName"): certificate.subject.rfc4514_string(),
        _ds("X509IssuerName"): certificate.issuer.rfc4514_string(),
        _ds("X509SerialNumber"): str(certificate.serial_number),
        _ds("KeyName"): certificate.subject.rfc4514_string(),
    }
    if isinstance(public, rsa.RSAPublicKey):
        numbers = public.public_numbers()
        values[_ds("Modulus")] = _int_b64(numbers.n)
        values[_ds("Exponent")] = _int_b64(numbers.e)
    found = False
    for element in key_info.iter(etree.Element):
        if element.tag in values:
            element.text = values[element.tag]
            found = found or element.tag == _ds("X509Certificate")
        elif len(element) == 0 and (element.text or "").strip():
            raise ConfigurationError(f"{where}: ds:KeyInfo holds {element.tag}, which this copy cannot replace")
    if not found:
        raise ConfigurationError(f"{where}: no ds:X509Certificate to replace")


def _anchor_partner(info: etree._Element, partner: x509.Certificate, name: str) -> None:
    """Add ``partner`` to ``info`` (a PartyInfo) as a Certificate and name it in each of its TrustAnchors."""
    certs = info.findall(_tp("Certificate"))
    anchors = list(info.iterfind(f"{_tp('SecurityDetails')}/{_tp('TrustAnchors')}"))
    if not certs or not anchors:
        return
    cert_id = re.sub(r"[^A-Za-z0-9_.-]", "_", name or "party")
    cert_id = f"{cert_id if cert_id[0].isalpha() or cert_id[0] == '_' else '_' + cert_id}_PartnerCert"
    certs[-1].addnext(etree.fromstring(certificate_element(partner, cert_id)))
    for trust in anchors:
        etree.SubElement(trust, _tp("AnchorCertificateRef")).set(_tp("certId"), cert_id)


def _settings_text(party: AgreementParty, cpa: Path, options: dict[str, str]) -> str:
    split = urlsplit(party.url)
    partner, key, cert = party.partner, _KEYS / f"party-{party.key}.key.pem", _KEYS / f"party-{party.key}.cert.pem"
    q = json.dumps  # a TOML basic string
    lines = [
        "[identity]",
        f"party_id = {q(party.party_id[0])}",
        *([f"party_id_type = {q(party.party_id[1])}"] if party.party_id[1] is not None else []),
        f"message_id_domain = {q(f'party-{party.key}.test')}",
        "[agreements]",
        f"paths = [{q(str(cpa))}]",
        "[store]",
        f"url = {q(str(partner.store))}",
        "[server]",
        'host = "127.0.0.1"',
        f"port = {partner.port}",
        f"path = {q(split.path or '/')}",
        f"tls = {'true' if split.scheme == 'https' else 'false'}",
        "[tls]",
        f"certificate = {q(str(cert))}",
        f"private_key = {q(str(key))}",
        "[security]",
        f"signing_key = {q(str(key))}",
        f"signing_certificate = {q(str(cert))}",
        "[sending]",
        f"http_timeout = {q(options['http_timeout'])}",
        "[timers]",
        f"poll_interval = {q(options['poll'])}",
        f"lease = {q(options['lease'])}",
    ]
    return "\n".join(lines) + "\n"


def pair_from_agreement(
    source: Path | bytes,
    work: Path,
    *,
    http_timeout: str = "PT10S",
    poll: str = "PT0.2S",
    lease: str = "PT30S",
    now: datetime | None = None,
) -> AgreementPair:
    """Write the copy of ``source`` (a file, or an agreement's bytes) and both settings files into ``work``
    (see the module docs). :class:`ConfigurationError` when the agreement does not have two PartyInfos, or a
    party has endpoints with different schemes or paths (one ``msh serve`` has one of each)."""
    work.mkdir(parents=True, exist_ok=True)
    data = source if isinstance(source, bytes) else source.read_bytes()
    root = parse_xml(data, what="agreement")
    infos = root.findall(_tp("PartyInfo"))
    if len(infos) != 2:
        raise ConfigurationError(f"the agreement has {len(infos)} PartyInfo elements; two parties are needed")
    adjustments: list[str] = []
    end = root.find(_tp("End"))
    now = now or datetime.now(UTC)
    if end is not None and end.text and _instant(end.text) <= now:
        later = (now + timedelta(days=365)).replace(microsecond=0).strftime("%Y-%m-%dT%H:%M:%SZ")
        adjustments.append(f"End {end.text.strip()} had passed: moved to {later}")
        end.text = later
    parties: list[AgreementParty] = []
    certificates = [x509.load_pem_x509_certificate((_KEYS / f"party-{k}.cert.pem").read_bytes()) for k in "ab"]
    for index, (info, key) in enumerate(zip(infos, ("a", "b"), strict=True)):
        name = info.get(_tp("partyName"), "")
        certificate = certificates[index]
        for cert in info.iterfind(_tp("Certificate")):
            key_info = cert.find(_ds("KeyInfo"))
            where = f"party {name!r}: Certificate {cert.get(_tp('certId'))!r}"
            if key_info is None:
                raise ConfigurationError(f"{where}: no ds:KeyInfo")
            _replace_certificate(key_info, certificate, where)
        _anchor_partner(info, certificates[1 - index], name)
        port = free_port()
        urls = set()
        for endpoint in info.iter(_tp("Endpoint")):
            split = urlsplit(endpoint.get(_tp("uri"), ""))
            url = urlunsplit((split.scheme, f"127.0.0.1:{port}", split.path, "", ""))
            endpoint.set(_tp("uri"), url)
            urls.add(url)
        if len(urls) != 1:
            raise ConfigurationError(f"party {name!r}: endpoints {sorted(urls)}; one scheme and path are needed")
        party_id = info.find(_tp("PartyId"))
        if party_id is None or not (party_id.text or "").strip():
            raise ConfigurationError(f"party {name!r}: no PartyId")
        ident = ((party_id.text or "").strip(), party_id.get(_tp("type")))
        folder = work / f"party-{key}"
        partner = Partner(name or key, folder / "msh.toml", folder / "store.sqlite", port, folder / "msh.log")
        parties.append(AgreementParty(name, ident, urls.pop(), key, partner))
    cpa = work / "agreement.xml"
    cpa.write_bytes(etree.tostring(root.getroottree(), xml_declaration=True, encoding="UTF-8"))
    options = {"http_timeout": http_timeout, "poll": poll, "lease": lease}
    for party in parties:
        party.partner.config.parent.mkdir(parents=True, exist_ok=True)
        party.partner.config.write_text(_settings_text(party, cpa, options), encoding="utf-8")
    return AgreementPair(work, cpa, (parties[0], parties[1]), tuple(adjustments))
