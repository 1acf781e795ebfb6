"""The ``xmlsec1`` command line (Debian package xmlsec1; libxmlsec1 run as a program of its own) as an
independent signer for the signature tests: it signs a ``ds:Signature`` template written by the test, with
the payload parts given to it as files under the URIs the References use (``--url-map``), so that nothing
of the MSH's own code takes part in making the signature. Tests using it skip with :data:`SKIP_REASON`
where it is not installed (``scripts/test`` installs it when run as root)."""

from __future__ import annotations

import hashlib
import shutil
import subprocess
import urllib.parse
from collections.abc import Mapping
from pathlib import Path
from typing import Final

from cryptography import x509
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import dsa, rsa

XMLSEC1: Final = shutil.which("xmlsec1")
SKIP_REASON: Final = (
    "the xmlsec1 command line is not installed (apt-get install xmlsec1; scripts/test installs it when run as root)"
)


def run(args: list[str]) -> subprocess.CompletedProcess[str]:
    """``xmlsec1 args...``, its output captured."""
    assert XMLSEC1 is not None, SKIP_REASON
    return subprocess.run([XMLSEC1, *args], capture_output=True, text=True, timeout=60, check=False)


def _url_map(folder: Path, parts: Mapping[str, bytes]) -> list[str]:
    """``--url-map`` options for ``parts``; each URI also %-decoded, the form libxmlsec1 looks up first."""
    args = []
    for uri, content in parts.items():
        path = folder / f"part-{hashlib.sha256(uri.encode()).hexdigest()[:16]}"
        path.write_bytes(content)
        for form in dict.fromkeys((urllib.parse.unquote(uri), uri)):
            args += [f"--url-map:{form}", str(path)]
    return args


def xmlsec1_sign(
    template: bytes,
    folder: Path,
    key: rsa.RSAPrivateKey | dsa.DSAPrivateKey,
    certificate: x509.Certificate,
    parts: Mapping[str, bytes] | None = None,
    *,
    key_name: str | None = None,
) -> bytes:
    """``template`` (an XML document with an unsigned ``ds:Signature``) signed by xmlsec1 with ``key``
    (``certificate`` attached, for the KeyInfo it fills); ``parts`` maps each payload Reference URI to the
    content it names. ``key_name`` names the key (for a ``ds:KeyName``)."""
    (folder / "key.pem").write_bytes(
        key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    )
    (folder / "cert.pem").write_bytes(certificate.public_bytes(serialization.Encoding.PEM))
    (folder / "template.xml").write_bytes(template)
    option = f"--privkey-pem:{key_name}" if key_name else "--privkey-pem"
    done = run(
        [
            "--sign",
            option,
            f"{folder / 'key.pem'},{folder / 'cert.pem'}",
            *_url_map(folder, parts or {}),
            "--output",
            str(folder / "signed.xml"),
            str(folder / "template.xml"),
        ]
    )
    assert done.returncode == 0, f"xmlsec1 could not sign the template: {done.stderr}"
    return (folder / "signed.xml").read_bytes()


def xmlsec1_sign_hmac(template: bytes, folder: Path, secret: bytes, parts: Mapping[str, bytes] | None = None) -> bytes:
    """``template`` signed by xmlsec1 with an HMAC ``secret`` (a shared-secret MAC, not a signature)."""
    (folder / "hmac.bin").write_bytes(secret)
    (folder / "template.xml").write_bytes(template)
    done = run(
        [
            "--sign",
            "--hmackey",
            str(folder / "hmac.bin"),
            *_url_map(folder, parts or {}),
            "--output",
            str(folder / "signed.xml"),
            str(folder / "template.xml"),
        ]
    )
    assert done.returncode == 0, f"xmlsec1 could not sign the template: {done.stderr}"
    return (folder / "signed.xml").read_bytes()
