"""Cross-check with an independent implementation, the ``xmlsec1`` command line (Debian package xmlsec1):
messages signed here verify there, and messages it signs in the same profile verify here. ``cid:`` parts
are given to it with ``--url-map``. Skipped where ``xmlsec1`` is not installed (scripts/test installs it
where it can)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
from cryptography.hazmat.primitives import serialization
from lxml import etree

from msh.errors import SecurityError
from msh.security import DigestAlgorithm, SignatureAlgorithm, sign, verify
from msh.security.profile import ds, signature_template
from tests.support.security import (
    NEXT_SYNC_REPLY,
    PAYLOADS,
    RSA_SHA1,
    RSA_SHA256,
    SHA1,
    SHA256,
    certificate,
    envelope,
    rsa_key,
)

XMLSEC1 = shutil.which("xmlsec1")
pytestmark = pytest.mark.skipif(
    XMLSEC1 is None, reason="the xmlsec1 command line is not installed (apt-get install xmlsec1)"
)


def _files(folder: Path) -> list[str]:
    args = []
    for cid, data in PAYLOADS.items():
        path = folder / cid.replace("@", "_")
        path.write_bytes(data)
        args += [f"--url-map:cid:{cid}", str(path)]
    return args


def _run(args: list[str]) -> subprocess.CompletedProcess[str]:
    assert XMLSEC1 is not None
    return subprocess.run([XMLSEC1, *args], capture_output=True, text=True, timeout=60, check=False)


@pytest.mark.parametrize(("algorithm", "digest"), [(RSA_SHA1, SHA1), (RSA_SHA256, SHA256), (RSA_SHA256, SHA1)])
def test_messages_signed_here_verify_with_xmlsec1(tmp_path: Path, algorithm: str, digest: str) -> None:
    cert = certificate("party A")
    (tmp_path / "cert.pem").write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    signed = sign(envelope(), PAYLOADS, rsa_key("party A"), cert, algorithm, digest)
    (tmp_path / "signed.xml").write_bytes(signed)
    common = ["--verify", "--enabled-key-data", "key-name", "--pubkey-cert-pem", str(tmp_path / "cert.pem")]
    done = _run([*common, *_files(tmp_path), str(tmp_path / "signed.xml")])
    assert done.returncode == 0, done.stderr
    assert "OK" in done.stdout + done.stderr
    # A changed payload fails there too, and an element for the next node added on the way does not.
    files = _files(tmp_path)
    (tmp_path / "changed").write_bytes(b"changed")
    changed = [*files[:2], "--url-map:cid:scan@a.example", str(tmp_path / "changed")]
    assert _run([*common, *changed, str(tmp_path / "signed.xml")]).returncode != 0
    hop = signed.replace(b"</SOAP:Header>", NEXT_SYNC_REPLY.encode() + b"</SOAP:Header>")
    (tmp_path / "hop.xml").write_bytes(hop)
    assert _run([*common, *_files(tmp_path), str(tmp_path / "hop.xml")]).returncode == 0


def test_messages_signed_by_xmlsec1_in_the_profile_verify_here(tmp_path: Path) -> None:
    cert = certificate("party A")
    key = rsa_key("party A")
    (tmp_path / "key.pem").write_bytes(
        key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    )
    (tmp_path / "cert.pem").write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    # The template: the profile's ds:Signature, unsigned, in the SOAP Header (KeyInfo for xmlsec1 to fill).
    root = etree.fromstring(envelope())
    header = root[0]
    uris = [f"cid:{cid}" for cid in PAYLOADS]
    signature_template(header, SignatureAlgorithm.RSA_SHA256, DigestAlgorithm.SHA256, uris, key_info=True)
    (tmp_path / "template.xml").write_bytes(etree.tostring(root.getroottree(), xml_declaration=True, encoding="UTF-8"))
    done = _run(
        [
            "--sign",
            "--privkey-pem",
            f"{tmp_path / 'key.pem'},{tmp_path / 'cert.pem'}",
            *_files(tmp_path),
            "--output",
            str(tmp_path / "signed.xml"),
            str(tmp_path / "template.xml"),
        ]
    )
    assert done.returncode == 0, done.stderr
    signed = (tmp_path / "signed.xml").read_bytes()
    assert etree.fromstring(signed).find(f".//{ds('SignatureValue')}").text
    result = verify(signed, PAYLOADS, cert)
    assert [r.uri for r in result.references] == ["", *uris]
    with pytest.raises(SecurityError) as caught:
        verify(signed, {**PAYLOADS, "order@a.example": b"changed"}, cert)
    assert caught.value.location == "cid:order@a.example"
