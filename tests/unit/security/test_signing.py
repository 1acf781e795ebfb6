"""Signing in the ebMS2 §4.1.3 profile: round trips for every algorithm pair, and the signature's shape."""

from __future__ import annotations

import io

import pytest
from cryptography import x509
from lxml import etree

from msh.ebms.mime import PartBody
from msh.errors import ConfigurationError, SecurityError
from msh.security import fast_verifying, sign, verify, verifying
from msh.security.algorithms import EBMS_XPATH
from msh.security.profile import ds
from tests.support.security import (
    NEXT_MSH_ACKNOWLEDGMENT,
    PAYLOADS,
    RSA_SHA1,
    RSA_SHA256,
    SHA1,
    SHA256,
    certificate,
    envelope,
    rsa_key,
)

C14N = "http://www.w3.org/TR/2001/REC-xml-c14n-20010315"
ENVELOPED = "http://www.w3.org/2000/09/xmldsig#enveloped-signature"
XPATH = "http://www.w3.org/TR/1999/REC-xpath-19991116"


@pytest.mark.parametrize("signature_algorithm", [RSA_SHA1, RSA_SHA256])
@pytest.mark.parametrize("digest", [SHA1, SHA256])
def test_round_trip_for_every_algorithm_pair(signature_algorithm: str, digest: str) -> None:
    cert = certificate("party A")
    signed = sign(envelope(), PAYLOADS, rsa_key("party A"), cert, signature_algorithm, digest)
    result = verify(signed, PAYLOADS, cert, signature_algorithms={signature_algorithm}, digest_algorithms={digest})
    assert result.signer == cert and result.signature_algorithm == signature_algorithm
    assert [r.uri for r in result.references] == ["", "cid:order@a.example", "cid:scan@a.example"]
    assert {r.digest_algorithm for r in result.references} == {digest}
    # ebMS2 §6.3.2.5: the References as a receipt copies them, written from the verified signature when asked.
    assert [etree.fromstring(text).get("URI") for text in result.reference_elements] == [
        "",
        "cid:order@a.example",
        "cid:scan@a.example",
    ]
    assert result.signature_element.tag == ds("Signature")


def test_the_signature_has_the_profiles_transforms_and_one_cid_reference_per_payload() -> None:
    cert = certificate("party A")
    signed = sign(envelope(), PAYLOADS, rsa_key("party A"), cert, RSA_SHA256, SHA256)
    root = etree.fromstring(signed)
    header = root[0]
    signature = header[-1]
    assert signature.tag == ds("Signature")  # ebMS2 §4.1.1: a child of the SOAP Header
    signed_info = signature.find(ds("SignedInfo"))
    assert signed_info.find(ds("CanonicalizationMethod")).get("Algorithm") == C14N
    envelope_ref, *payload_refs = signed_info.findall(ds("Reference"))
    assert envelope_ref.get("URI") == ""
    transforms = envelope_ref.findall(f"{ds('Transforms')}/{ds('Transform')}")
    assert [t.get("Algorithm") for t in transforms] == [ENVELOPED, XPATH, C14N]
    xpath = transforms[1].find(ds("XPath"))
    assert xpath.text == EBMS_XPATH and xpath.nsmap["SOAP"] == "http://schemas.xmlsoap.org/soap/envelope/"
    assert [r.get("URI") for r in payload_refs] == ["cid:order@a.example", "cid:scan@a.example"]
    assert all(r.find(ds("Transforms")) is None for r in payload_refs)
    assert signature.findtext(f"{ds('KeyInfo')}/{ds('X509Data')}/{ds('X509Certificate')}")
    # Only the signature was added: the rest of the envelope is byte for byte what was given.
    without = signed.replace(etree.tostring(signature, with_tail=False), b"")
    assert b"<eb:Action>NewOrder</eb:Action>" in without and signed.startswith(b"<?xml")


def test_payloads_may_be_part_bodies_or_readers() -> None:
    cert = certificate("party A")
    bodies = {cid: PartBody.from_bytes(data) for cid, data in PAYLOADS.items()}
    signed = sign(envelope(), bodies, rsa_key("party A"), cert, RSA_SHA256, SHA256)
    readers = {f"<{cid}>": io.BytesIO(data) for cid, data in PAYLOADS.items()}
    verify(signed, readers, cert)
    verify(signed, readers, cert)  # a reader is read from its start each time


def test_the_reference_uri_is_the_manifests_href() -> None:
    cert = certificate("party A")
    soap = envelope(payloads=("a%40b",))
    signed = sign(soap, {"a@b": b"x"}, rsa_key("party A"), cert, RSA_SHA256, SHA256)
    assert b'URI="cid:a%40b"' in signed
    verify(signed, {"a@b": b"x"}, cert)


def test_a_message_without_payloads_signs_the_envelope_only() -> None:
    cert = certificate("party A")
    signed = sign(envelope(payloads=()), {}, rsa_key("party A"), cert, RSA_SHA1, SHA1)
    assert [r.uri for r in verify(signed, {}, cert).references] == [""]


def test_a_multi_hop_acknowledgment_is_signed_without_the_xpath_filter() -> None:
    # ebMS2 §10.1.4: the filter would leave out the Acknowledgment targeted at the next MSH.
    cert = certificate("party A")
    soap = envelope(payloads=(), header_extra=NEXT_MSH_ACKNOWLEDGMENT)
    signed = sign(soap, {}, rsa_key("party A"), cert, RSA_SHA256, SHA256, xpath_filter=False)
    assert XPATH.encode() not in signed
    verify(signed, {}, cert)


class _LibxmlsecChecks:
    """Counts the certificates verifying tries with libxmlsec."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.tried: list[str] = []
        real = verifying._context

        def spy(certificate: x509.Certificate) -> object:
            self.tried.append(certificate.subject.rfc4514_string())
            return real(certificate)

        monkeypatch.setattr(verifying, "_context", spy)


def test_of_several_certificates_the_one_whose_key_signed_is_found_without_libxmlsec(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # A certificate whose key did not sign (the party's CA, named before the certificate it issued, say) is
    # not checked with libxmlsec when the check without it accepts another one's key.
    cert = certificate("party A")
    signed = sign(envelope(), PAYLOADS, rsa_key("party A"), cert, RSA_SHA256, SHA256)
    checks = _LibxmlsecChecks(monkeypatch)
    assert verify(signed, PAYLOADS, [certificate("party C"), cert]).signer == cert
    assert checks.tried == []


def test_of_several_certificates_the_envelope_is_digested_once(monkeypatch: pytest.MonkeyPatch) -> None:
    # What the References digest does not depend on the key: the certificates named before the signer's
    # (another party's, the party's CA) cost only their RSA check.
    cert = certificate("party A")
    signed = sign(envelope(), PAYLOADS, rsa_key("party A"), cert, RSA_SHA256, SHA256)
    canonicalised: list[int] = []
    real = fast_verifying._canonical_forms

    def counting(*args: object, **kwargs: object) -> object:
        canonicalised.append(1)
        return real(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(fast_verifying, "_canonical_forms", counting)
    others = [certificate("party C"), certificate("party B")]
    assert verify(signed, PAYLOADS, [*others, cert]).signer == cert
    assert len(canonicalised) == 1
    with pytest.raises(SecurityError, match="SignatureValue does not verify"):
        verify(signed, PAYLOADS, others)


def test_of_several_certificates_libxmlsec_finds_the_signer_where_the_check_without_it_cannot_tell(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # An xml: attribute above the signature is left to libxmlsec (msh.security.fast_verifying).
    cert = certificate("party A")
    soap = envelope().replace(b"<SOAP:Header>", b'<SOAP:Header xml:lang="en">')
    signed = sign(soap, PAYLOADS, rsa_key("party A"), cert, RSA_SHA256, SHA256)
    checks = _LibxmlsecChecks(monkeypatch)
    assert verify(signed, PAYLOADS, [certificate("party C"), cert]).signer == cert
    assert checks.tried == ["CN=party C", "CN=party A"]
    with pytest.raises(SecurityError, match="SignatureValue does not verify with the key of CN=party C"):
        verify(signed, PAYLOADS, [certificate("party C")])


def test_the_key_must_belong_to_the_certificate_and_suit_the_algorithm() -> None:
    with pytest.raises(ConfigurationError, match="does not belong to the signing certificate"):
        sign(envelope(), PAYLOADS, rsa_key("party B"), certificate("party A"), RSA_SHA256, SHA256)
    with pytest.raises(ConfigurationError, match="needs an EC key"):
        sign(
            envelope(), PAYLOADS, rsa_key("party A"), certificate("party A"), RSA_SHA256.replace("rsa", "ecdsa"), SHA256
        )


def test_unknown_algorithms_are_refused_with_the_known_ones() -> None:
    with pytest.raises(ConfigurationError, match="not a signature algorithm the MSH implements; use one of"):
        sign(envelope(), PAYLOADS, rsa_key("party A"), certificate("party A"), "urn:rot13", SHA256)
    with pytest.raises(ConfigurationError, match="HashFunction 'urn:md5' is not a digest algorithm"):
        sign(envelope(), PAYLOADS, rsa_key("party A"), certificate("party A"), RSA_SHA256, "urn:md5")


def test_an_envelope_already_signed_or_without_header_is_refused() -> None:
    cert, key = certificate("party A"), rsa_key("party A")
    signed = sign(envelope(), PAYLOADS, key, cert, RSA_SHA256, SHA256)
    with pytest.raises(ValueError, match="already signed"):
        sign(signed, PAYLOADS, key, cert, RSA_SHA256, SHA256)
    no_header = b'<S:Envelope xmlns:S="http://schemas.xmlsoap.org/soap/envelope/"><S:Body/></S:Envelope>'
    with pytest.raises(ValueError, match="no SOAP Header"):
        sign(no_header, {}, key, cert, RSA_SHA256, SHA256)


def test_an_unsigned_message_is_a_security_failure() -> None:
    with pytest.raises(SecurityError) as caught:
        verify(envelope(), PAYLOADS, certificate("party A"))
    assert caught.value.location == "//Header/Signature" and "not signed" in caught.value.description
