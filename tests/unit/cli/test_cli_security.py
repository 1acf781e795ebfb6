"""``msh message verify`` and ``msh keys generate``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from cryptography.hazmat.primitives import serialization

from cpa.loader import load
from msh.cli import main
from tests.support.agreement_files import DEMO_A_B
from tests.support.security import certificate, demo_agreement_bytes, signed_sample_capture

SAMPLES = Path(__file__).resolve().parents[3] / "samples"


@pytest.fixture
def files(tmp_path: Path) -> dict[str, Path]:
    a = certificate("party A")
    paths = {
        "cpa": tmp_path / "cpa.xml",
        "signed": tmp_path / "signed.http",
        "tampered": tmp_path / "tampered.http",
        "forged": tmp_path / "forged.http",
        "cert": tmp_path / "a.pem",
    }
    paths["cpa"].write_bytes(demo_agreement_bytes({"A_Cert": a}))
    paths["signed"].write_bytes(signed_sample_capture("party A", a))
    paths["tampered"].write_bytes(signed_sample_capture("party A", a, change=(b"PO-1001", b"PO-1002")))
    paths["forged"].write_bytes(signed_sample_capture("party C", certificate("party C")))
    paths["cert"].write_bytes(a.public_bytes(serialization.Encoding.PEM))
    return paths


def test_verify_with_the_agreement(files: dict[str, Path], capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["message", "verify", "--cpa", str(files["cpa"]), str(files["signed"])]) == 0
    out = capsys.readouterr().out
    assert (
        "signed.http: verified (signed by CN=party A, rsa-sha256; References: the envelope, cid:order@a.example" in out
    )


def test_a_changed_payload_names_the_reference(files: dict[str, Path], capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["message", "verify", "--cpa", str(files["cpa"]), str(files["signed"]), str(files["tampered"])]) == 1
    out = capsys.readouterr().out
    assert "tampered.http: not verified: the digest of payload part cid:order@a.example" in out
    assert "(at cid:order@a.example)" in out


def test_another_partys_signature_and_json(files: dict[str, Path], capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["message", "verify", "--cert", str(files["cert"]), "--json", str(files["forged"])]) == 1
    result = json.loads(capsys.readouterr().out)
    assert result["verified"] is False and result["certificateFrom"] == "certificate file"
    assert result["errors"][0]["location"] == "//Header/Signature"
    assert "SignatureValue does not verify with the key of CN=party A" in result["errors"][0]["description"]


def test_what_does_not_verify_is_shown_with_its_header(
    files: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    # A message under another agreement is a verdict on that file: the others are still checked.
    other = files["signed"].with_name("other.http")
    other.write_bytes(files["signed"].read_bytes().replace(b"cpa-demo-a-b", b"cpa-other", 1))
    files_checked = [str(files["tampered"]), str(other), str(files["signed"])]
    assert main(["message", "verify", "--cpa", str(files["cpa"]), *files_checked]) == 1
    out = capsys.readouterr().out.split("\n")
    tampered = out.index(next(line for line in out if line.startswith(f"{files['tampered']}: not verified")))
    assert (
        out[tampered + 1] == "  from: 123456789 (type urn:oasis:names:tc:ebcore:partyid-type:iso6523:0088), role Buyer"
    )
    assert out[tampered + 3] == "  cpa: cpa-demo-a-b   conversation: conv-20261101-0001"
    refused = out.index(next(line for line in out if line.startswith(f"{other}: not verified")))
    assert out[refused] == (
        f"{other}: not verified: agreement cpa-demo-a-b does not govern this message (CPAId 'cpa-other' names no "
        "agreement known here (ebMS2 §3.1.2))"
    )
    assert out[refused + 3] == "  cpa: cpa-other   conversation: conv-20261101-0001"
    assert any(line.startswith(f"{files['signed']}: verified (signed by CN=party A") for line in out)

    assert main(["message", "verify", "--cpa", str(files["cpa"]), "--json", str(other), str(files["signed"])]) == 1
    refused_json, verified_json = json.loads(capsys.readouterr().out)
    assert refused_json["verified"] is False and refused_json["messageHeader"]["cpaId"] == "cpa-other"
    assert "does not govern this message" in refused_json["errors"][0]["description"]
    assert verified_json["signatureAlgorithm"].endswith("rsa-sha256") and verified_json["checkedAt"]
    assert {r["digestAlgorithm"] for r in verified_json["references"]} == {"http://www.w3.org/2001/04/xmlenc#sha256"}
    assert verified_json["messageHeader"]["messageId"] == "order-0001@a.example"


def test_a_rejected_message_is_shown_with_what_could_be_read(
    files: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    rejected = files["signed"].with_name("rejected.http")
    rejected.write_bytes(files["signed"].read_bytes().replace(b"<eb:Action>NewOrder</eb:Action>", b"", 1))
    assert main(["message", "verify", "--cert", str(files["cert"]), str(rejected)]) == 1
    out = capsys.readouterr().out.splitlines()
    assert out[0] == f"{rejected}: not verified: MessageHeader has no Action (at //Header/MessageHeader/Action)"
    assert "  service: urn:example:services:ordering   action: (absent)" in out
    assert "  message id: order-0001@a.example" in out[5]


def test_keyinfo_says_what_it_proves(files: dict[str, Path], capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["message", "verify", "--keyinfo", str(files["forged"])]) == 0
    out = capsys.readouterr().out
    assert "verified (signed by CN=party C" in out and "not who sent it" in out


def test_an_unsigned_message(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["message", "verify", "--keyinfo", str(SAMPLES / "messages" / "order-request.http")]) == 1
    assert "not verified: the message is not signed" in capsys.readouterr().out


def test_usage_errors_are_one_line(files: dict[str, Path], capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["message", "verify", str(files["signed"])])
    assert exc.value.code == 2
    assert "one of the arguments --cpa --cert --keyinfo is required" in capsys.readouterr().err
    assert main(["message", "verify", "--cert", str(files["signed"]), str(files["signed"])]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "holds no readable X.509 certificate" in err
    assert main(["message", "verify", "--cpa", str(files["cpa"]), str(files["cpa"]) + ".missing"]) == 2
    assert "no such file" in capsys.readouterr().err


def test_keys_generate_prints_an_element_the_agreement_accepts(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["keys", "generate", "party A", "--out", str(tmp_path), "--days", "30", "--cert-id", "A_Cert"]) == 0
    captured = capsys.readouterr()
    assert "wrote" in captured.err and (tmp_path / "party_A.key.pem").exists()
    element = captured.out.strip()
    assert element.startswith("<tp:Certificate") and 'tp:certId="A_Cert"' in element
    # Pasted into an agreement in place of A's Certificate, it loads and is A's certificate.
    demo = DEMO_A_B.read_bytes()
    start = demo.index(b'<tp:Certificate tp:certId="A_Cert">')
    end = demo.index(b"</tp:Certificate>", start) + len(b"</tp:Certificate>")
    element_bytes = element.replace(
        ' xmlns:tp="http://www.oasis-open.org/committees/ebxml-cppa/schema/cpp-cpa-2_0.xsd"', ""
    )
    element_bytes = element_bytes.replace(' xmlns:ds="http://www.w3.org/2000/09/xmldsig#"', "")
    cpa = load(demo[:start] + element_bytes.encode() + demo[end:])
    pem = (tmp_path / "party_A.cert.pem").read_bytes()
    owner = cpa.party_infos[0].certificates[0]
    assert owner.cert_id == "A_Cert"
    from cryptography import x509

    assert owner.x509[0] == x509.load_pem_x509_certificate(pem).public_bytes(serialization.Encoding.DER)
    assert main(["keys", "generate", "party A", "--out", str(tmp_path)]) == 2
    assert "exists; move it away" in capsys.readouterr().err


def test_cpa_validate_refuses_a_digital_envelope_the_msh_lacks(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    demo = DEMO_A_B.read_bytes()
    smime = demo.replace(
        b"</tp:SenderNonRepudiation>\n      </tp:ebXMLSenderBinding>",
        b'</tp:SenderNonRepudiation>\n<tp:SenderDigitalEnvelope><tp:DigitalEnvelopeProtocol tp:version="3.0">S/MIME'
        b"</tp:DigitalEnvelopeProtocol><tp:EncryptionAlgorithm>http://www.w3.org/2001/04/xmlenc#aes128-cbc"
        b"</tp:EncryptionAlgorithm></tp:SenderDigitalEnvelope>\n      </tp:ebXMLSenderBinding>",
        1,
    )
    (tmp_path / "smime.xml").write_bytes(smime)
    assert main(["cpa", "validate", str(tmp_path / "smime.xml")]) == 1
    out = capsys.readouterr().out
    assert "SenderDigitalEnvelope/DigitalEnvelopeProtocol 'S/MIME' version 3.0 is not implemented" in out
    assert main(["cpa", "validate", str(DEMO_A_B)]) == 0


def test_a_file_without_a_certificate_is_a_verdict_and_the_batch_goes_on(
    files: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # ebMS2 §4.1.3 (XML Signature's KeyInfo): under --keyinfo the certificate comes from the message; a
    # signature whose KeyInfo carries none fails that one file, and the files after it are still checked.
    data = files["signed"].read_bytes()
    start, end = data.index(b"<ds:X509Data>"), data.index(b"</ds:X509Data>") + len(b"</ds:X509Data>")
    bare = tmp_path / "no-certificate.http"
    bare.write_bytes(data[:start] + data[end:])
    assert main(["message", "verify", "--keyinfo", str(bare), str(files["forged"]), str(files["signed"])]) == 1
    out = capsys.readouterr().out
    assert "no-certificate.http: not verified: the signature's KeyInfo carries no X509Certificate" in out
    assert "forged.http: verified" in out and "signed.http: verified" in out
    assert main(["message", "verify", "--keyinfo", "--json", str(bare), str(files["signed"])]) == 1
    results = json.loads(capsys.readouterr().out)
    assert [r["verified"] for r in results] == [False, True]
    assert results[0]["errors"][0]["location"] == "//Header/Signature/KeyInfo"


def test_files_that_cannot_be_read_are_verdicts_and_the_batch_goes_on(
    files: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Each file gets its verdict, a rejected one with what could still be read of it, and the next file is
    # checked: an envelope that is not XML, a file that is no message, a message refused for a missing part.
    signed = files["signed"].read_bytes()
    not_xml = tmp_path / "not-xml.http"
    not_xml.write_bytes(signed.replace(b"</eb:Action>", b"</eb:Acton>", 1))
    notes = tmp_path / "notes.txt"
    notes.write_bytes(b"just some notes about ebXML\n")
    missing_part = tmp_path / "missing-part.http"
    missing_part.write_bytes(signed.replace(b"Content-ID: <scan@a.example>", b"Content-ID: <other@a.example>", 1))
    checked = [not_xml, notes, missing_part, files["signed"]]
    assert main(["message", "verify", "--cert", str(files["cert"]), *map(str, checked)]) == 1
    out = capsys.readouterr().out.splitlines()
    verdicts = [line for line in out if not line.startswith("  ")]
    assert [line.split(": ", 1)[0] for line in verdicts] == [str(path) for path in checked]
    assert verdicts[0].startswith(f"{not_xml}: not verified: SOAP envelope is not well-formed XML")
    assert verdicts[1] == f"{notes}: not verified: message has no Content-Type and is neither XML nor MIME (at /)"
    assert verdicts[2] == (
        f"{missing_part}: not verified: Manifest references cid:scan@a.example but the message has no part with "
        "that Content-ID (at cid:scan@a.example)"
    )
    assert verdicts[3].startswith(f"{files['signed']}: verified (signed by CN=party A")
    # The refused message is shown with its header, read again from the file.
    assert out[out.index(verdicts[2]) + 3] == "  cpa: cpa-demo-a-b   conversation: conv-20261101-0001"
