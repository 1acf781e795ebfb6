"""``msh message verify`` on a message whose signature leaves a payload part out (ebMS2 §4.1.3: "Each
payload object requiring signing SHALL be represented by a [XMLDSIG] Reference"): verified, and the part
not covered said, in the text and in the JSON."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
from cryptography.hazmat.primitives import serialization

from msh.cli import main
from msh.ebms.message import read_message_file
from msh.ebms.mime import AttachmentSpec, write_package
from msh.security import sign
from tests.support.security import NOW, RSA_SHA256, SHA256, certificate, rsa_key

SAMPLE = Path(__file__).resolve().parents[3] / "samples" / "messages" / "order-request.http"


def _envelope_only_capture(path: Path) -> list[str]:
    """The sample message signed as party A over its envelope alone, saved as a MIME package; its payloads'
    Content-IDs."""
    message = read_message_file(SAMPLE)
    try:
        soap = message.soap.replace(b"2026-11-01T09:30:00Z", NOW.strftime("%Y-%m-%dT%H:%M:%SZ").encode())
        signed = sign(soap, {}, rsa_key("party A"), certificate("party A"), RSA_SHA256, SHA256)
        specs = [
            AttachmentSpec(p.content_id or "", p.content_type, p.body, p.transfer_encoding) for p in message.payloads
        ]
        out = io.BytesIO()
        content_type = write_package(out, signed, specs, start_id="soap@a.example")
        cids = [p.content_id or "" for p in message.payloads]
    finally:
        message.close()
    path.write_bytes(b"Content-Type: " + content_type.encode() + b"\r\n\r\n" + out.getvalue())
    return cids


def test_verify_says_which_payloads_the_signature_does_not_cover(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cids = _envelope_only_capture(tmp_path / "envelope-only.eml")
    cert = tmp_path / "a.pem"
    cert.write_bytes(certificate("party A").public_bytes(serialization.Encoding.PEM))
    assert main(["message", "verify", "--cert", str(cert), str(tmp_path / "envelope-only.eml")]) == 0
    text = capsys.readouterr().out
    assert ": verified (signed by CN=party A" in text
    for cid in cids:
        assert f"warning: payload part cid:{cid} is not covered by the signature" in text
    assert main(["message", "verify", "--cert", str(cert), "--json", str(tmp_path / "envelope-only.eml")]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["unsignedPayloads"] == [f"cid:{cid}" for cid in cids]
    assert [w["location"] for w in result["warnings"]] == [f"cid:{cid}" for cid in cids]
