"""The certificates an agreement names are trusted as they are (CPP/A 2.0 §8.4.33, §8.4.26, §8.4.31): a
partner's self-signed leaf from ``msh keys generate`` (no CA flag), a self-signed certificate with CA flags,
and a CA-issued leaf named without its CA. Host names are still verified. Each case is a real TLS handshake
between the contexts the MSH makes, in memory (no sockets)."""

from __future__ import annotations

import ssl
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from cryptography.x509.oid import NameOID

from cpa.model import CollaborationProtocolAgreement
from cpa.resolve import Exchange, resolve
from msh.faults.pair import ACTION, PARTY_A, PARTY_B, SERVICE
from msh.security.keys import KeyPair, generate_key_pair
from msh.transport.tls import ClientContexts, server_context, trust_anchors_pem
from tests.support.security import NOW, certificate, demo_agreement, rsa_key

DAY = timedelta(days=1)


def _files(tmp_path: Path, name: str, cert: x509.Certificate, key: rsa.RSAPrivateKey) -> tuple[Path, Path]:
    cert_path, key_path = tmp_path / f"{name}.cert.pem", tmp_path / f"{name}.key.pem"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(
        key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    )
    return cert_path, key_path


def _pem(*certs: x509.Certificate) -> str:
    return "".join(c.public_bytes(serialization.Encoding.PEM).decode() for c in certs)


def _client(anchors: str, own: tuple[Path, Path]) -> ssl.SSLContext:
    """A client context as :class:`ClientContexts` makes it for an agreement naming ``anchors``."""
    contexts = ClientContexts(certificate=own[0], private_key=own[1])
    return contexts._context(("cpa", "channel"), anchors_pem=anchors, trusted=(), system_cas=None)


def _handshake(client: ssl.SSLContext, server: ssl.SSLContext, host: str) -> None:
    """Run a TLS handshake between the two contexts over memory BIOs; raises the first side's SSLError."""
    c_in, c_out, s_in, s_out = ssl.MemoryBIO(), ssl.MemoryBIO(), ssl.MemoryBIO(), ssl.MemoryBIO()
    c = client.wrap_bio(c_in, c_out, server_hostname=host)
    s = server.wrap_bio(s_in, s_out, server_side=True)
    done = {"c": False, "s": False}
    for _ in range(20):
        for name, side, out, peer_in in (("c", c, c_out, s_in), ("s", s, s_out, c_in)):
            if not done[name]:
                try:
                    side.do_handshake()
                    done[name] = True
                except ssl.SSLWantReadError:
                    pass
            data = out.read()
            if data:
                peer_in.write(data)
        if all(done.values()):
            c.write(b"x")  # TLS 1.3: the server checks the client certificate after its own Finished
            s_in.write(c_out.read())
            assert s.read(1) == b"x"
            return
    raise AssertionError("the handshake did not finish")


@pytest.fixture(scope="module")
def partners() -> tuple[KeyPair, KeyPair]:
    return generate_key_pair("Party A", hosts=("127.0.0.1",)), generate_key_pair("Party B", hosts=("127.0.0.1",))


def test_generated_leaf_certificates_carry_mutual_tls(tmp_path: Path, partners: tuple[KeyPair, KeyPair]) -> None:
    """The contexts made from the demo agreement naming the generated certificates, as the MSH makes them."""
    a, b = partners
    a_files, b_files = _files(tmp_path, "a", a.certificate, a.key), _files(tmp_path, "b", b.certificate, b.key)
    cpa = demo_agreement({"A_Cert": a.certificate, "B_Cert": b.certificate})
    assert isinstance(cpa, CollaborationProtocolAgreement)
    # B's endpoint trusts A's leaf (refused at start before: "no agreement names a certificate to trust").
    anchors = trust_anchors_pem([cpa], PARTY_B)
    server = server_context(certificate=b_files[0], private_key=b_files[1], client_anchors_pem=anchors)
    # A sends to B: the context for the agreement's channel trusts B's certificate (ServerCertificateRef).
    params = resolve(cpa, Exchange(PARTY_A, PARTY_B, SERVICE, ACTION), now=datetime.now(UTC))
    client = ClientContexts(certificate=a_files[0], private_key=a_files[1]).for_parameters(params)
    assert client is not None and client.check_hostname
    assert client.cert_store_stats()["x509"] == 1  # the agreement's certificate only: no system CAs beside it
    _handshake(client, server, "127.0.0.1")


def test_host_names_are_still_verified(tmp_path: Path, partners: tuple[KeyPair, KeyPair]) -> None:
    a, b = partners
    a_files, b_files = _files(tmp_path, "a", a.certificate, a.key), _files(tmp_path, "b", b.certificate, b.key)
    server = server_context(certificate=b_files[0], private_key=b_files[1], client_anchors_pem=_pem(a.certificate))
    with pytest.raises(ssl.SSLCertVerificationError, match="IP address mismatch"):
        _handshake(_client(_pem(b.certificate), a_files), server, "127.0.0.2")
    with pytest.raises(ssl.SSLCertVerificationError, match="Hostname mismatch"):
        _handshake(_client(_pem(b.certificate), a_files), server, "msh.example.com")


def test_a_client_certificate_the_agreement_does_not_name_is_refused(
    tmp_path: Path, partners: tuple[KeyPair, KeyPair]
) -> None:
    a, b = partners
    stranger = generate_key_pair("Stranger", hosts=("127.0.0.1",))
    b_files = _files(tmp_path, "b", b.certificate, b.key)
    server = server_context(certificate=b_files[0], private_key=b_files[1], client_anchors_pem=_pem(a.certificate))
    with pytest.raises(ssl.SSLError):
        _handshake(
            _client(_pem(b.certificate), _files(tmp_path, "s", stranger.certificate, stranger.key)), server, "127.0.0.1"
        )


def _self_signed_ca_flags(name: str) -> tuple[x509.Certificate, rsa.RSAPrivateKey]:
    """A self-signed certificate with basicConstraints cA true (the demo keys' form)."""
    key = rsa_key(name)
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
    cert = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(NOW - DAY)
        .not_valid_after(NOW + 30 * DAY)
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(x509.SubjectAlternativeName([x509.DNSName("localhost")]), critical=False)
        .sign(key, hashes.SHA256())
    )
    return cert, key


def test_self_signed_with_ca_flags_and_a_ca_issued_leaf_named_alone_are_trusted(tmp_path: Path) -> None:
    server_cert, server_key = _self_signed_ca_flags("server with CA flags")
    client_pair = generate_key_pair("client")
    server = server_context(
        certificate=_files(tmp_path, "s", server_cert, server_key)[0],
        private_key=tmp_path / "s.key.pem",
        client_anchors_pem=_pem(client_pair.certificate),
    )
    client_files = _files(tmp_path, "c", client_pair.certificate, client_pair.key)
    _handshake(_client(_pem(server_cert), client_files), server, "localhost")

    # A CA-issued server certificate: the agreement names the leaf only, not its CA (partial chain).
    ca = certificate("Partner CA", ca=True)
    leaf_key = rsa_key("issued leaf")
    leaf = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "issued leaf")]))
        .issuer_name(ca.subject)
        .public_key(leaf_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(NOW - DAY)
        .not_valid_after(NOW + 30 * DAY)
        .add_extension(x509.SubjectAlternativeName([x509.DNSName("localhost")]), critical=False)
        .sign(rsa_key("Partner CA"), hashes.SHA256())
    )
    issued = server_context(
        certificate=_files(tmp_path, "leaf", leaf, leaf_key)[0],
        private_key=tmp_path / "leaf.key.pem",
        client_anchors_pem=_pem(client_pair.certificate),
    )
    _handshake(_client(_pem(leaf), client_files), issued, "localhost")
    _handshake(_client(_pem(ca), client_files), issued, "localhost")  # its CA named instead: trusted too


def test_a_server_that_trusts_nothing_still_refuses_to_start(tmp_path: Path, partners: tuple[KeyPair, KeyPair]) -> None:
    from msh.errors import ConfigurationError

    b = partners[1]
    b_files = _files(tmp_path, "b", b.certificate, b.key)
    with pytest.raises(ConfigurationError, match="no agreement names a certificate to trust"):
        server_context(certificate=b_files[0], private_key=b_files[1], client_anchors_pem="")


def test_after_a_reload_the_next_connection_trusts_the_server_certificate_the_agreement_names_now(
    tmp_path: Path, partners: tuple[KeyPair, KeyPair]
) -> None:
    """CPP/A 2.0 §8.4.31: the partner's server certificate is the one the agreement in force names; a context
    made under the agreement before its reload is reused only while it names the same certificates."""
    a, b = partners
    renewed = generate_key_pair("Party B renewed", hosts=("127.0.0.1",))
    a_files = _files(tmp_path, "a", a.certificate, a.key)
    contexts = ClientContexts(certificate=a_files[0], private_key=a_files[1])
    exchange = Exchange(PARTY_A, PARTY_B, SERVICE, ACTION)

    def loaded(server_certificate: x509.Certificate) -> ssl.SSLContext | None:
        cpa = demo_agreement({"A_Cert": a.certificate, "B_Cert": server_certificate})  # each time a new load
        return contexts.for_parameters(resolve(cpa, exchange, now=datetime.now(UTC)))

    before = loaded(b.certificate)
    assert before is not None
    assert loaded(b.certificate) is before  # reloaded with the same certificates: the context is kept
    after = loaded(renewed.certificate)
    assert after is not None and after is not before
    assert loaded(renewed.certificate) is after
    renewed_files = _files(tmp_path, "b2", renewed.certificate, renewed.key)
    server = server_context(
        certificate=renewed_files[0], private_key=renewed_files[1], client_anchors_pem=_pem(a.certificate)
    )
    _handshake(after, server, "127.0.0.1")
    with pytest.raises(ssl.SSLCertVerificationError, match="certificate verify failed"):
        _handshake(before, server, "127.0.0.1")  # the old agreement's context does not trust the new server
