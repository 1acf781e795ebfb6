"""The TLS client certificate must belong to the party the header claims (docs/design.md §7).

Unit tests of :func:`msh.transport.tls.client_certificate_issue` on certificates made here, and an end-to-end
test: party B's endpoint over mutual TLS, with agreements with A and with C, refuses a message that claims
to come from A but arrives with C's certificate (C is trusted, as B's partner in another agreement)."""

from __future__ import annotations

import base64
import contextlib
import http.client
import ssl
import tomllib
from collections.abc import Iterator
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.serialization import Encoding
from cryptography.x509.oid import NameOID
from lxml import etree

from cpa.model import Certificate, CollaborationProtocolAgreement
from msh.ebms import model as m
from msh.ebms.message import parse_message
from msh.errors import ErrorCode, Severity
from msh.runtime.config import settings_from_mapping
from msh.runtime.msh import Msh
from msh.testing.threaded import serving_in_thread
from msh.transport.tls import FROM_PARTY_ID, client_certificate_issue
from tests.support.cpa_factory import A_ID, B_ID, make_cpa
from tests.support.endpoint import valid_message

ROOT = Path(__file__).resolve().parents[2]
KEYS = ROOT / "samples" / "keys"
CONFIG_DIR = ROOT / "samples" / "config"
SOAP_CT = 'text/xml; charset="UTF-8"'
TIMEOUT = 20.0


# ------------------------------------------------------------------------------------------ certificates


def _name(common_name: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])


def _certificate(
    common_name: str, issuer: tuple[x509.Certificate, ec.EllipticCurvePrivateKey] | None = None, ca: bool = False
) -> tuple[x509.Certificate, ec.EllipticCurvePrivateKey]:
    key = ec.generate_private_key(ec.SECP256R1())
    issuer_name, signing_key = (issuer[0].subject, issuer[1]) if issuer is not None else (_name(common_name), key)
    now = datetime.now(UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(_name(common_name))
        .issuer_name(issuer_name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - timedelta(days=1))
        .not_valid_after(now + timedelta(days=30))
        .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True)
        .sign(signing_key, hashes.SHA256())
    )
    return cert, key


def _der(cert: x509.Certificate) -> bytes:
    return cert.public_bytes(Encoding.DER)


def _with_certificates(
    cpa: CollaborationProtocolAgreement, a: list[bytes], b: list[bytes]
) -> CollaborationProtocolAgreement:
    infos = []
    for info, ders in zip(cpa.party_infos, (a, b), strict=True):
        infos.append(replace(info, certificates=tuple(Certificate(f"cert{i}", (d,)) for i, d in enumerate(ders))))
    return replace(cpa, party_infos=tuple(infos))


FROM_A = m.Party((m.PartyId(A_ID.value, A_ID.type),))


def test_the_claimed_partys_own_certificate_belongs_to_it() -> None:
    a_cert, _ = _certificate("party A")
    b_cert, _ = _certificate("party B")
    cpa = _with_certificates(make_cpa(), [_der(a_cert)], [_der(b_cert)])
    assert client_certificate_issue(cpa, FROM_A, _der(a_cert)) is None


def test_another_partys_certificate_is_a_security_failure() -> None:
    a_cert, _ = _certificate("party A")
    b_cert, _ = _certificate("party B")
    cpa = _with_certificates(make_cpa(), [_der(a_cert)], [_der(b_cert)])
    issue = client_certificate_issue(cpa, FROM_A, _der(b_cert))
    assert issue is not None
    assert (issue.error_code, issue.severity, issue.location) == (
        ErrorCode.SECURITY_FAILURE,
        Severity.ERROR,
        FROM_PARTY_ID,
    )
    assert "CN=party B" in issue.description and A_ID.value in issue.description and "cpa-a-b" in issue.description


def test_a_certificate_issued_by_one_the_party_names_belongs_to_it() -> None:
    ca = _certificate("A's CA", ca=True)
    leaf, _ = _certificate("A's MSH", issuer=ca)
    impostor_ca = _certificate("someone's CA", ca=True)
    forged, _ = _certificate("A's MSH", issuer=impostor_ca)  # same subject and issuer name: a different CA key
    b_cert, _ = _certificate("party B")
    cpa = _with_certificates(make_cpa(), [_der(ca[0])], [_der(b_cert)])
    assert client_certificate_issue(cpa, FROM_A, _der(leaf)) is None
    assert client_certificate_issue(cpa, FROM_A, _der(forged)) is not None
    issue = client_certificate_issue(cpa, FROM_A, b"not a certificate")
    assert issue is not None and "unreadable" in issue.description


def test_no_binding_is_possible_where_the_agreement_names_no_certificate_for_the_party() -> None:
    other, _ = _certificate("anyone")
    cpa = _with_certificates(make_cpa(), [], [])
    assert client_certificate_issue(cpa, FROM_A, _der(other)) is None
    stranger = m.Party((m.PartyId("000", B_ID.type),))  # not in the agreement: check() reports that
    assert client_certificate_issue(_with_certificates(make_cpa(), [_der(other)], []), stranger, b"x") is None


# ------------------------------------------------------------------------------------- end to end (TLS)


def _cpa_with_c(tmp_path: Path) -> Path:
    """An agreement between C and B: the demo agreement with A's PartyId and certificate replaced by C's."""
    tree = etree.parse(str(ROOT / "samples" / "cpas" / "demo-a-b.xml"))
    a_der = ssl.PEM_cert_to_DER_cert((KEYS / "party-a.cert.pem").read_text())
    c_der = ssl.PEM_cert_to_DER_cert((KEYS / "party-c.cert.pem").read_text())
    replaced = 0
    for el in tree.iter("{http://www.w3.org/2000/09/xmldsig#}X509Certificate"):
        if base64.b64decode("".join((el.text or "").split())) == a_der:
            el.text = base64.b64encode(c_der).decode()
            replaced += 1
    assert replaced == 1, "the demo agreement carries A's certificate once"
    text = etree.tostring(tree, encoding="unicode")
    text = text.replace("cpa-demo-a-b", "cpa-demo-c-b").replace("123456789", "555555555")
    path = tmp_path / "demo-c-b.xml"
    path.write_text(text, encoding="utf-8")
    return path


@contextlib.contextmanager
def _serving_b(tmp_path: Path, agreements: list[Path]) -> Iterator[tuple[Msh, int]]:
    data = tomllib.loads((CONFIG_DIR / "party-b.toml").read_text(encoding="utf-8"))
    data["server"] = {**data["server"], "tls": True, "port": 0, "host": "127.0.0.1"}
    data["store"] = {"url": str(tmp_path / "party-b.sqlite")}
    data["agreements"] = {**data["agreements"], "paths": [str(p) for p in agreements]}
    settings = settings_from_mapping(data, base_dir=CONFIG_DIR, source="test", env={})
    msh = Msh(settings)
    try:
        with serving_in_thread(settings, msh, timeout=TIMEOUT) as port:
            yield msh, port
    finally:
        msh.close()


def _connect(port: int, client: str) -> http.client.HTTPSConnection:
    """A connection to B presenting ``client``'s certificate (samples/keys), trusting B's."""
    context = ssl.create_default_context(cafile=str(KEYS / "party-b.cert.pem"))
    context.check_hostname = False
    context.load_cert_chain(str(KEYS / f"{client}.cert.pem"), str(KEYS / f"{client}.key.pem"))
    return http.client.HTTPSConnection("127.0.0.1", port, timeout=TIMEOUT, context=context)


def _post(port: int, client: str, body: bytes, content_type: str) -> tuple[int, bytes]:
    conn = _connect(port, client)
    try:
        conn.request("POST", "/msh", body=body, headers={"Content-Type": content_type, "SOAPAction": '"ebXML"'})
        response = conn.getresponse()
        return response.status, response.read()
    finally:
        conn.close()


def test_a_partner_cannot_send_as_another_partner(tmp_path: Path) -> None:
    agreements = [ROOT / "samples" / "cpas" / "demo-a-b.xml", _cpa_with_c(tmp_path)]
    with _serving_b(tmp_path, agreements) as (b, port):
        content_type, body = valid_message(b, "claims-a@party-c.example")
        status, reply = _post(port, "party-c", body, content_type)  # C's certificate, From: A
        assert status == 200
        envelope = parse_message(reply, SOAP_CT).envelope
        assert envelope.error_list is not None and not envelope.acknowledgments
        [error] = envelope.error_list.errors
        assert (error.error_code, error.severity.value, error.location) == ("SecurityFailure", "Error", FROM_PARTY_ID)
        assert b.inbox(None) == []
        with b.store.transaction(readonly=True) as tx:
            assert tx.find_inbound("claims-a@party-c.example") is None

        content_type, body = valid_message(b, "really-a@party-a.example")
        status, reply = _post(port, "party-a", body, content_type)  # A's certificate, From: A
        assert status == 200
        ack = parse_message(reply, SOAP_CT).envelope
        assert [a.ref_to_message_id for a in ack.acknowledgments] == ["really-a@party-a.example"]
        assert [e.message_id for e in b.inbox(None)] == ["really-a@party-a.example"]
        assert b.counters["certificate-mismatches"] == 1


@pytest.mark.parametrize("client", ["party-a", "party-c"])
def test_the_certificate_reaches_the_endpoint_on_every_request_of_a_connection(tmp_path: Path, client: str) -> None:
    """Keep-alive: the binding is checked on the second request of a connection too."""
    agreements = [ROOT / "samples" / "cpas" / "demo-a-b.xml", _cpa_with_c(tmp_path)]
    with _serving_b(tmp_path, agreements) as (b, port):
        conn = _connect(port, client)
        try:
            codes = []
            for i in range(2):
                content_type, body = valid_message(b, f"keepalive-{i}@party-a.example")
                conn.request("POST", "/msh", body=body, headers={"Content-Type": content_type, "SOAPAction": '"ebXML"'})
                envelope = parse_message(conn.getresponse().read(), SOAP_CT).envelope
                codes.append("ack" if envelope.acknowledgments else envelope.error_list.errors[0].error_code)  # type: ignore[union-attr]
        finally:
            conn.close()
        assert codes == (["ack", "ack"] if client == "party-a" else ["SecurityFailure", "SecurityFailure"])
