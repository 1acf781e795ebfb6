"""Certificate rotation as docs/certificates.md describes it: with the new certificate beside the old in the
sending party's PartyInfo and in the receiver's trust anchors (CPP/A 2.0 §8.4.33, §8.4.35), both the old
and the new one are accepted, for signatures (ebMS2 §4.1.3) and as the TLS client certificate of the party;
once the old one is removed from the agreement, it is refused."""

from __future__ import annotations

from pathlib import Path

import pytest
from cryptography.hazmat.primitives.serialization import Encoding
from lxml import etree

from cpa import load
from msh.cli import main
from msh.ebms import model as m
from msh.security.keys import CPPA, certificate_element
from msh.transport.tls import client_certificate_issue
from tests.support.security import certificate, demo_agreement_bytes, signed_sample_capture

A = m.Party((m.PartyId("123456789", "urn:oasis:names:tc:ebcore:partyid-type:iso6523:0088"),))


def _step_one(old_and_new: bytes) -> bytes:
    """The agreement of step 1: ``A_Cert_2`` beside ``A_Cert`` in A's PartyInfo and B's anchors."""
    root = etree.fromstring(old_and_new)
    [old] = root.iterfind(f".//{{{CPPA}}}Certificate[@{{{CPPA}}}certId='A_Cert']")
    old.addnext(etree.fromstring(certificate_element(certificate("A new"), "A_Cert_2")))
    [anchor] = root.iterfind(f".//{{{CPPA}}}AnchorCertificateRef[@{{{CPPA}}}certId='A_Cert']")
    anchor.addnext(etree.Element(f"{{{CPPA}}}AnchorCertificateRef", {f"{{{CPPA}}}certId": "A_Cert_2"}))
    return etree.tostring(root)


@pytest.fixture
def files(tmp_path: Path) -> dict[str, Path]:
    old, new = certificate("A old"), certificate("A new")
    made = {
        "step1.xml": _step_one(demo_agreement_bytes({"A_Cert": old})),
        "step3.xml": demo_agreement_bytes({"A_Cert": new}),  # the old one removed (the new under its certId)
        "signed-old.http": signed_sample_capture("A old", old),
        "signed-new.http": signed_sample_capture("A new", new),
    }
    for name, data in made.items():
        (tmp_path / name).write_bytes(data)
    return {name: tmp_path / name for name in made}


def test_during_rotation_both_signatures_verify_and_after_it_only_the_new(
    files: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    step1, step3 = str(files["step1.xml"]), str(files["step3.xml"])
    assert main(["cpa", "validate", step1]) == 0
    assert main(["message", "verify", "--cpa", step1, str(files["signed-old.http"])]) == 0
    assert main(["message", "verify", "--cpa", step1, str(files["signed-new.http"])]) == 0
    capsys.readouterr()
    assert main(["message", "verify", "--cpa", step3, str(files["signed-new.http"])]) == 0
    assert main(["message", "verify", "--cpa", step3, str(files["signed-old.http"])]) == 1
    assert "not verified" in capsys.readouterr().out


def test_during_rotation_both_tls_client_certificates_belong_to_the_party(files: dict[str, Path]) -> None:
    old, new = (certificate(n).public_bytes(Encoding.DER) for n in ("A old", "A new"))
    during, after = load(files["step1.xml"].read_bytes()), load(files["step3.xml"].read_bytes())
    assert client_certificate_issue(during, A, old) is None
    assert client_certificate_issue(during, A, new) is None
    assert client_certificate_issue(after, A, new) is None
    refused = client_certificate_issue(after, A, old)
    assert refused is not None and "CN=A old" in refused.description
