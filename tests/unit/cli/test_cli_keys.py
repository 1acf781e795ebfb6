"""``msh keys generate --host``, ``msh keys show`` and ``msh keys import`` (docs/certificates.md)."""

from __future__ import annotations

import ipaddress
import json
from datetime import timedelta
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.x509.oid import NameOID
from lxml import etree

from cpa import load
from msh.cli import main
from msh.security.keys import CPPA, load_certificates
from tests.support.agreement_files import demo_bytes
from tests.support.json_keys import count_keys, keys_off_convention
from tests.support.security import NOW, certificate, rsa_key

DS = "http://www.w3.org/2000/09/xmldsig#"


def _pem(path: Path, *certs: x509.Certificate) -> Path:
    path.write_bytes(b"".join(c.public_bytes(serialization.Encoding.PEM) for c in certs))
    return path


def _der(cert: x509.Certificate) -> bytes:
    return cert.public_bytes(serialization.Encoding.DER)


def _issued(name: str, issuer: x509.Certificate, issuer_key: str, *, ca: bool = False) -> x509.Certificate:
    key = rsa_key(name)
    return (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)]))
        .issuer_name(issuer.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(NOW - timedelta(days=1))
        .not_valid_after(NOW + timedelta(days=90))
        .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True)
        .add_extension(x509.SubjectAlternativeName([x509.DNSName("msh.partner.example")]), critical=False)
        .sign(rsa_key(issuer_key), hashes.SHA256())
    )


# ----------------------------------------------------------------------------------------------- generate


def test_generate_names_the_hosts_given(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    args = ["keys", "generate", "Party B", "--out", str(tmp_path), "--host", "msh.b.example", "--host", "192.0.2.7"]
    assert main(args) == 0
    captured = capsys.readouterr()
    assert "names msh.b.example, 192.0.2.7" in captured.err and "no --host given" not in captured.err
    [cert] = load_certificates(tmp_path / "Party_B.cert.pem")
    names = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert names.get_values_for_type(x509.DNSName) == ["msh.b.example"]
    assert names.get_values_for_type(x509.IPAddress) == [ipaddress.ip_address("192.0.2.7")]
    element = etree.fromstring(captured.out.strip())
    assert element.get(f"{{{CPPA}}}certId") == "Party_B_Cert"  # an xs:ID: the space became _


def test_generate_without_hosts_says_what_it_names_and_never_overwrites(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["keys", "generate", "A", "--out", str(tmp_path)]) == 0
    err = capsys.readouterr().err
    assert "note: no --host given, so the certificate names localhost and 127.0.0.1 only" in err
    before = (tmp_path / "A.cert.pem").read_bytes(), (tmp_path / "A.key.pem").read_bytes()
    assert main(["keys", "generate", "A", "--out", str(tmp_path), "--host", "x.example"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "exists; move it away" in err
    assert ((tmp_path / "A.cert.pem").read_bytes(), (tmp_path / "A.key.pem").read_bytes()) == before


def test_generate_refuses_a_url_as_host_in_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["keys", "generate", "A", "--out", str(tmp_path), "--host", "https://msh.example.com/msh"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "is neither a host name nor an IP address" in err
    assert not list(tmp_path.iterdir())


# ------------------------------------------------------------------------------------------------- show


def test_show_prints_what_the_certificate_is_and_fits(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["keys", "generate", "A", "--out", str(tmp_path), "--host", "127.0.0.1"]) == 0
    capsys.readouterr()
    path = tmp_path / "A.cert.pem"
    assert main(["keys", "show", str(path)]) == 0
    out = capsys.readouterr().out
    [cert] = load_certificates(path)
    for line in (
        "subject: CN=A",
        "issuer: CN=A (self-signed)",
        "subject alternative names: IP:127.0.0.1",
        "key: RSA 2048 bits",
        "key usage: digitalSignature, contentCommitment, keyEncipherment",
        "extended key usage: serverAuth, clientAuth",
        f"SHA-256 fingerprint: {cert.fingerprint(hashes.SHA256()).hex(':').upper()}",
        "TLS server: yes",
        "TLS client: yes",
        "signing: yes",
        "encryption: yes",
    ):
        assert line in out.splitlines(), line
    assert "(valid now, 365 days left)" in out


def test_show_json_and_a_chain_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    ca = certificate("Partner CA", ca=True)
    old = certificate("old leaf", not_before=NOW - timedelta(days=60), not_after=NOW - timedelta(days=1))
    path = _pem(tmp_path / "chain.pem", old, ca)
    assert main(["keys", "show", str(path), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert keys_off_convention(data) == [] and count_keys(data) > 40
    first, second = data["certificates"]
    assert first["subject"] == "CN=old leaf" and first["expired"] is True and first["daysLeft"] < 0
    assert first["fits"]["signing"]["ok"] is False and "expired on" in first["fits"]["signing"]["reasons"][0]
    assert second["ca"] is True and second["subjectAltNames"] == []
    assert set(first) >= {"notBefore", "notAfter", "sha256", "sha1", "keyUsage", "extendedKeyUsage", "selfSigned"}
    assert main(["keys", "show", str(path)]) == 0
    out = capsys.readouterr().out
    assert "certificate 1 of 2 (the certificate)" in out and "certificate 2 of 2 (its chain)" in out
    assert "EXPIRED on" in out and "TLS server: no: it expired on" in out


def test_show_refuses_what_is_not_a_certificate_in_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["keys", "generate", "A", "--out", str(tmp_path)]) == 0
    capsys.readouterr()
    assert main(["keys", "show", str(tmp_path / "A.key.pem")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "holds no readable X.509 certificate but a private key" in err
    (tmp_path / "notes.txt").write_text("hello")
    assert main(["keys", "show", str(tmp_path / "notes.txt")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "holds no readable X.509 certificate" in err


# ----------------------------------------------------------------------------------------------- import


def _paste(element_text: str, cert_id: str = "A_Cert") -> bytes:
    """The demo agreement with A's Certificate element replaced by ``element_text``."""
    tree = etree.fromstring(demo_bytes())
    [old] = tree.iterfind(f".//{{{CPPA}}}Certificate[@{{{CPPA}}}certId='{cert_id}']")
    old.getparent().replace(old, etree.fromstring(element_text))
    return etree.tostring(tree)


def test_import_prints_the_element_with_its_chain(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = certificate("Partner Root", ca=True)
    intermediate = _issued("Partner Issuing CA", root, "Partner Root", ca=True)
    leaf = _issued("msh.partner.example", intermediate, "Partner Issuing CA")
    cert = _pem(tmp_path / "leaf.pem", leaf)
    chain = _pem(tmp_path / "chain.pem", intermediate, root)
    assert main(["keys", "import", str(cert), "--chain", str(chain), "--cert-id", "A_Cert"]) == 0
    captured = capsys.readouterr()
    element = etree.fromstring(captured.out.strip())
    assert element.get(f"{{{CPPA}}}certId") == "A_Cert"
    assert element.findtext(f"{{{DS}}}KeyInfo/{{{DS}}}KeyName") == "CN=msh.partner.example"
    # One X509Data, the leaf first, then its issuers in order (XML-DSig §4.4.4).
    [data] = element.iterfind(f"{{{DS}}}KeyInfo/{{{DS}}}X509Data")
    assert len(data) == 3
    assert "with 2 chain certificates" in captured.err and "whatever its chain's CAs issue" in captured.err
    # Pasted into the agreement, it loads, and the party's Certificate holds the three, leaf first.
    cpa = load(_paste(captured.out.strip()))
    [named] = [c for c in cpa.party_infos[0].certificates if c.cert_id == "A_Cert"]
    assert named.x509 == (_der(leaf), _der(intermediate), _der(root))


def test_import_without_chain_and_default_cert_id(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    leaf = certificate("partner one", not_before=NOW - timedelta(days=1), not_after=NOW + timedelta(days=9))
    assert main(["keys", "import", str(_pem(tmp_path / "leaf.pem", leaf))]) == 0
    captured = capsys.readouterr()
    element = etree.fromstring(captured.out.strip())
    assert element.get(f"{{{CPPA}}}certId") == "partner_one_Cert"
    assert len(list(element.iter(f"{{{DS}}}X509Certificate"))) == 1
    assert "trusts this certificate for this party" in captured.err
    assert "note: not fit for TLS server: no subjectAltName" in captured.err


def test_import_refuses_a_chain_out_of_order_or_a_non_certificate(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = certificate("Partner Root", ca=True)
    intermediate = _issued("Partner Issuing CA", root, "Partner Root", ca=True)
    leaf = _issued("msh.partner.example", intermediate, "Partner Issuing CA")
    cert = _pem(tmp_path / "leaf.pem", leaf)
    assert main(["keys", "import", str(cert), "--chain", str(_pem(tmp_path / "wrong.pem", root, intermediate))]) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and captured.err.count("\n") == 1
    assert "certificate 2 (CN=Partner Root) did not issue certificate 1 (CN=msh.partner.example" in captured.err
    key = tmp_path / "key.pem"
    key.write_bytes(
        rsa_key("k").private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )
    )
    assert main(["keys", "import", str(key)]) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and captured.err.count("\n") == 1 and "but a private key" in captured.err


def test_keys_help_lists_the_subcommands(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["keys", "--help"])
    out = capsys.readouterr().out
    assert all(name in out for name in ("generate", "show", "import"))
    with pytest.raises(SystemExit):
        main(["keys", "generate", "--help"])
    assert "--host NAME|IP" in capsys.readouterr().out


@pytest.mark.parametrize("encoding", [serialization.Encoding.PEM, serialization.Encoding.DER])
def test_import_reads_a_pkcs7_bundle_in_any_order(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], encoding: serialization.Encoding
) -> None:
    from cryptography.hazmat.primitives.serialization import pkcs7

    root = certificate("Partner Root", ca=True)
    intermediate = _issued("Partner Issuing CA", root, "Partner Root", ca=True)
    leaf = _issued("msh.partner.example", intermediate, "Partner Issuing CA")
    bundle = tmp_path / "chain.p7b"
    bundle.write_bytes(pkcs7.serialize_certificates([root, leaf, intermediate], encoding))  # as CAs deliver it
    assert main(["keys", "import", str(bundle), "--cert-id", "A_Cert"]) == 0
    captured = capsys.readouterr()
    assert "certificate CN=msh.partner.example" in captured.err and "with 2 chain certificates" in captured.err
    der = [
        "".join((node.text or "").split())
        for node in etree.fromstring(captured.out.strip()).iter(f"{{{DS}}}X509Certificate")
    ]
    import base64

    assert [base64.b64decode(d) for d in der] == [_der(leaf), _der(intermediate), _der(root)]
