"""Generated certificates carry what TLS and signing need, and :func:`inspect_certificate` says what a
certificate fits and why not (RFC 5280 §4.2.1.3 keyUsage, §4.2.1.6 subjectAltName, §4.2.1.12
extendedKeyUsage; RFC 6125 host name checks)."""

from __future__ import annotations

import ipaddress
from datetime import UTC, datetime, timedelta

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from msh.errors import ConfigurationError
from msh.security.certinfo import Use, inspect_certificate
from msh.security.keys import KeyPair, generate_key_pair, subject_alternative_names
from tests.support.security import certificate, rsa_key

NOW = datetime(2026, 6, 1, 12, 0, tzinfo=UTC)


@pytest.fixture(scope="module")
def pair() -> KeyPair:
    return generate_key_pair("Party A", days=30, now=NOW, hosts=("msh.example.com", "192.0.2.10", "[2001:db8::1]"))


def _fits(cert: x509.Certificate, at: datetime = NOW) -> dict[Use, tuple[str, ...]]:
    return {fit.use: fit.reasons for fit in inspect_certificate(cert, at).fits}


def test_a_generated_certificate_names_its_hosts_and_fits_every_use(pair: KeyPair) -> None:
    cert = pair.certificate
    names = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert names.get_values_for_type(x509.DNSName) == ["msh.example.com"]
    assert names.get_values_for_type(x509.IPAddress) == [
        ipaddress.ip_address("192.0.2.10"),
        ipaddress.ip_address("2001:db8::1"),
    ]
    usage = cert.extensions.get_extension_for_class(x509.KeyUsage)
    assert usage.critical and usage.value.digital_signature and usage.value.key_encipherment
    assert not usage.value.key_cert_sign
    purposes = list(cert.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value)
    assert purposes == [ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH]
    assert cert.extensions.get_extension_for_class(x509.BasicConstraints).value.ca is False
    ski = cert.extensions.get_extension_for_class(x509.SubjectKeyIdentifier).value.digest
    assert cert.extensions.get_extension_for_class(x509.AuthorityKeyIdentifier).value.key_identifier == ski
    assert _fits(cert) == dict.fromkeys(Use, ())


def test_without_hosts_the_certificate_names_this_machine() -> None:
    cert = generate_key_pair("x", now=NOW).certificate
    names = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert [str(n.value) for n in names] == ["localhost", "127.0.0.1"]


@pytest.mark.parametrize("host", ["https://msh.example.com", "msh.example.com:8443", "a b", "-x.example", "1.2.3"])
def test_what_is_not_a_host_is_refused_in_one_line(host: str) -> None:
    with pytest.raises(ConfigurationError, match=r"is neither a host name nor an IP address") as exc:
        subject_alternative_names([host])
    assert "\n" not in str(exc.value) and repr(host) in str(exc.value)
    with pytest.raises(ConfigurationError, match="at least one host"):
        subject_alternative_names([])


def test_the_report_says_what_the_certificate_is(pair: KeyPair) -> None:
    report = inspect_certificate(pair.certificate, NOW)
    assert report.subject == report.issuer == "CN=Party A" and report.self_signed
    assert report.alt_names == ("DNS:msh.example.com", "IP:192.0.2.10", "IP:2001:db8::1")
    assert report.key == "RSA 2048 bits" and report.ca is False
    assert report.key_usage == ("digitalSignature", "contentCommitment", "keyEncipherment")
    assert report.extended_key_usage == ("serverAuth", "clientAuth")
    assert report.sha256 == pair.certificate.fingerprint(hashes.SHA256()).hex(":").upper()
    assert len(report.sha1.split(":")) == 20
    assert round(report.days_left) == 30 and not report.expired and "30 days left" in report.validity()
    text = "\n".join(report.lines())
    assert "TLS server: yes" in text and "subject alternative names: DNS:msh.example.com" in text
    data = report.to_json()
    assert data["subjectAltNames"] == list(report.alt_names) and data["fits"]["tlsServer"] == {  # type: ignore[index]
        "ok": True,
        "reasons": [],
    }


def test_an_expired_or_not_yet_valid_certificate_fits_nothing(pair: KeyPair) -> None:
    later = NOW + timedelta(days=31)
    report = inspect_certificate(pair.certificate, later)
    assert report.expired and report.validity().startswith("EXPIRED on")
    assert all(any("expired on" in r for r in reasons) for reasons in _fits(pair.certificate, later).values())
    early = inspect_certificate(pair.certificate, NOW - timedelta(days=1))
    assert early.not_yet_valid and "NOT YET VALID" in early.validity()
    assert all(any("not valid before" in r for r in reasons) for reasons in _fits(pair.certificate, early.at).values())


def test_a_certificate_without_subject_alt_name_cannot_serve_tls() -> None:
    cert = certificate("old style", not_before=NOW - timedelta(days=1), not_after=NOW + timedelta(days=1))
    fits = _fits(cert)
    assert any("no subjectAltName" in r for r in fits[Use.TLS_SERVER])
    assert fits[Use.TLS_CLIENT] == fits[Use.SIGNING] == ()  # no keyUsage or EKU: not restricted


def _restricted(usage: x509.KeyUsage | None, purposes: list[x509.ObjectIdentifier] | None) -> x509.Certificate:
    key = rsa_key("restricted")
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "restricted")])
    builder = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(1)
        .not_valid_before(NOW - timedelta(days=1))
        .not_valid_after(NOW + timedelta(days=1))
        .add_extension(x509.SubjectAlternativeName([x509.DNSName("r.example")]), critical=False)
    )
    if usage is not None:
        builder = builder.add_extension(usage, critical=True)
    if purposes is not None:
        builder = builder.add_extension(x509.ExtendedKeyUsage(purposes), critical=False)
    return builder.sign(key, hashes.SHA256())


def _usage(**on: bool) -> x509.KeyUsage:
    names = ("digital_signature", "content_commitment", "key_encipherment", "data_encipherment", "key_agreement")
    flags = {n: on.get(n, False) for n in names}
    return x509.KeyUsage(**flags, key_cert_sign=False, crl_sign=False, encipher_only=False, decipher_only=False)


def test_key_usages_and_purposes_decide_each_use() -> None:
    client_only = _fits(_restricted(_usage(digital_signature=True), [ExtendedKeyUsageOID.CLIENT_AUTH]))
    assert client_only[Use.TLS_SERVER] == ("extendedKeyUsage has not serverAuth",)
    assert client_only[Use.TLS_CLIENT] == client_only[Use.SIGNING] == ()
    assert client_only[Use.ENCRYPTION] == ("keyUsage has not keyEncipherment",)
    encipher_only = _fits(_restricted(_usage(key_encipherment=True), None))
    assert encipher_only[Use.TLS_SERVER] == ()  # RSA key exchange (TLS 1.2)
    assert encipher_only[Use.TLS_CLIENT] == ("keyUsage has not digitalSignature",)
    assert encipher_only[Use.SIGNING] == ("keyUsage has not digitalSignature nor contentCommitment",)


def test_an_ec_key_signs_and_serves_tls_but_cannot_receive_encrypted_payloads() -> None:
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "ec")])
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(2)
        .not_valid_before(NOW - timedelta(days=1))
        .not_valid_after(NOW + timedelta(days=1))
        .add_extension(x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), False)
        .sign(key, hashes.SHA256())
    )
    fits = _fits(cert)
    assert fits[Use.TLS_SERVER] == fits[Use.SIGNING] == ()
    assert fits[Use.ENCRYPTION] == (
        "EC secp256r1 (256 bits): payloads are encrypted for an RSA key (XML Encryption key transport)",
    )
    assert inspect_certificate(cert, NOW).key == "EC secp256r1 (256 bits)"
