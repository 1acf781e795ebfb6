"""The check of a received RSA signature without libxmlsec (msh.security.fast_verifying.verified_without_xmlsec)
leaves the received tree as it was, computes exactly what the copy-and-filter path and lxml's canonical
SignedInfo compute (libxmlsec's where lxml's differs: a SignedInfo without prefix), and accepts only what
libxmlsec accepts: over the signature test generators' envelopes, one-character changes of documents taking
each of its ways (marks in the text, a copy where the marks or an element aimed at the next MSH elsewhere
rule them out, lxml's canonical SignedInfo), and changes of the signature's structure and base64 text that
libxmlsec refuses."""

from __future__ import annotations

import base64
import random
import re
from collections.abc import Callable
from dataclasses import replace

import pytest
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import padding
from lxml import etree

from msh.ebms import model as m
from msh.ebms.envelope import serialise_envelope
from msh.ebms.namespaces import ACTOR_TO_PARTY_MSH
from msh.errors import EnvelopeError, SecurityError
from msh.safexml import parse_xml
from msh.security import fast_signing, fast_verifying, sign, verify
from msh.security.algorithms import DigestAlgorithm, SignatureAlgorithm
from msh.security.library import private_key, resolving_parts, xmlsec
from msh.security.profile import ds, first_signature
from tests.support.cpa_factory import make_envelope
from tests.support.security import NEXT_MSH_ACK, NEXT_SYNC_REPLY, NOW, PAYLOADS, certificate, envelope, rsa_key
from tests.unit.security.test_fast_signing import _xmlsec_verifies
from tests.unit.security.test_signature_text import CASES, CONTENT_IDS, CONTENTS, Case, _certificate, _signed

NEXT_MSH_IN_BODY = '<x:Hop xmlns:x="urn:example:x" SOAP:actor="urn:oasis:names:tc:ebxml-msg:actor:nextMSH">hop</x:Hop>'


def _serialised(root: etree._Element) -> bytes:
    return etree.tostring(root.getroottree(), xml_declaration=True, encoding="UTF-8")


class _Paths:
    """Records which ways of fast_verifying computed the digested envelope and the canonical SignedInfo."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.copied: list[str] = []
        for name in ("_envelope_c14n", "_whole_c14n"):
            real = getattr(fast_verifying, name)
            monkeypatch.setattr(fast_verifying, name, self._spy(name, real))
        real_apex = fast_verifying._apex_signed_info
        monkeypatch.setattr(fast_verifying, "_apex_signed_info", self._apex(real_apex))

    def _spy(self, name: str, real: Callable[..., bytes]) -> Callable[..., bytes]:
        def spy(*args: object) -> bytes:
            self.copied.append(name)
            return real(*args)

        return spy

    def _apex(self, real: Callable[..., bytes | None]) -> Callable[..., bytes | None]:
        def spy(*args: object) -> bytes | None:
            out = real(*args)
            self.apex = out is not None
            return out

        self.apex = False
        return spy


def _fast(soap: bytes, payloads: dict[str, bytes], cert: object) -> bool:
    """verified_without_xmlsec on ``soap`` parsed, checking that it leaves the tree as it was."""
    root = parse_xml(soap)
    signature = first_signature(root)
    assert signature is not None
    before = _serialised(root)
    accepted = fast_verifying.verified_without_xmlsec(root, signature, payloads, cert)  # type: ignore[arg-type]
    assert _serialised(root) == before
    return accepted


def _received_payloads(case: Case) -> dict[str, bytes]:
    named = {cid.strip("<>"): content for cid, content in zip(CONTENT_IDS, CONTENTS, strict=False)}
    return dict(list(named.items())[: case.payloads])


@pytest.mark.parametrize("case", CASES, ids=[f"case{i}" for i in range(len(CASES))])
def test_the_tree_is_unchanged_and_the_forms_are_the_copys_and_lxmls(
    case: Case, monkeypatch: pytest.MonkeyPatch
) -> None:
    signed = _signed(case, monkeypatch, "text")
    root = parse_xml(signed)
    signature = first_signature(root)
    assert signature is not None
    signed_info = signature.find(ds("SignedInfo"))
    assert signed_info is not None
    before = _serialised(root)
    # What the envelope Reference digests and the canonical SignedInfo, as the copy path and lxml make them.
    copied = (
        fast_signing._envelope_c14n(root, signature) if case.xpath_filter else fast_signing._whole_c14n(root, signature)
    )
    lxml_signed_info = etree.tostring(signed_info, method="c14n", with_comments=False)
    with monkeypatch.context() as patch:
        paths = _Paths(patch)
        forms = fast_verifying._canonical_forms(root, signature, signed_info, case.xpath_filter)
    assert forms == (copied, lxml_signed_info)
    assert paths.copied == []  # the marks were enough: no copy of the document
    # SignedInfo from the canonical document wherever its scope is written as it is (not the a&b one).
    assert paths.apex == ("a&amp;b" not in case.soap().decode())
    assert _serialised(root) == before
    payloads = _received_payloads(case)
    cert = _certificate("text-a")
    assert fast_verifying.verified_without_xmlsec(root, signature, payloads, cert)
    assert _serialised(root) == before
    assert _xmlsec_verifies(signed, payloads, cert)
    verify(signed, payloads, cert, at=NOW, parsed=root)
    assert _serialised(root) == before


# ------------------------------------------------------------------------- documents for each way


def _composed() -> bytes:
    # As the MSH writes a message (no white space, the AckRequested aimed at the To party's MSH).
    references = tuple(m.Reference(f"cid:{cid}") for cid in PAYLOADS)
    composed = replace(make_envelope(ack_actor=ACTOR_TO_PARTY_MSH), manifest=m.Manifest(references))
    return serialise_envelope(composed)


def _with_body(extra: str) -> bytes:
    return envelope().replace(b"<SOAP:Body>", b"<SOAP:Body>" + extra.encode(), 1)


def _signed_document(soap: bytes, *, xpath_filter: bool = True) -> bytes:
    key, cert = rsa_key("fast-a"), certificate("fast-a")
    method, digest = SignatureAlgorithm.RSA_SHA256, DigestAlgorithm.SHA256
    return sign(soap, PAYLOADS, key, cert, method, digest, xpath_filter=xpath_filter)


def _resigned(soap: bytes, *, by_libxmlsec: bool = False) -> bytes:
    """``soap`` with its SignatureValue made again for its SignedInfo as it now is (the key holder's change):
    by libxmlsec (which also recomputes the digests), or, for a SignedInfo libxmlsec would not read, over
    lxml's canonical form of it (right for a ``ds:`` prefix, the tests above show)."""
    root = parse_xml(soap)
    signature = first_signature(root)
    assert signature is not None
    if by_libxmlsec:
        context = xmlsec.SignatureContext()
        context.key = private_key(rsa_key("fast-a"))
        with resolving_parts(PAYLOADS):
            context.sign(signature)
        return _serialised(root)
    signed_info = signature.find(ds("SignedInfo"))
    value = signature.find(ds("SignatureValue"))
    assert signed_info is not None and value is not None
    canonical = etree.tostring(signed_info, method="c14n", with_comments=False)
    signed = rsa_key("fast-a").sign(canonical, padding.PKCS1v15(), hashes.SHA256())
    value.text = base64.b64encode(signed).decode()
    return _serialised(root)


def _in_the_default_namespace(soap: bytes) -> bytes:
    """``soap`` (signed by this MSH) with its signature's elements in the default namespace."""
    return (
        soap.replace(b'<ds:Signature xmlns:ds="', b'<Signature xmlns="', 1)
        .replace(b"<ds:", b"<")
        .replace(b"</ds:", b"</")
    )


DOCUMENTS: dict[str, Callable[[], bytes]] = {
    # The common ways: one canonical form of the document, its texts marked.
    "composed": lambda: _signed_document(_composed()),
    "next-msh-and-next": lambda: _signed_document(envelope(header_extra=NEXT_MSH_ACK + "\n    " + NEXT_SYNC_REPLY)),
    "without-the-filter": lambda: _signed_document(envelope(), xpath_filter=False),
    # Comments next to the elements marked (the marks go in their tails), white space inside the signature.
    "comments-beside-the-marks": lambda: (
        _signed_document(envelope())
        .replace(b"<ds:Signature", b"<!--before--><ds:Signature", 1)
        .replace(b"</ds:Signature>", b"</ds:Signature><!--after-->", 1)
        .replace(b"<ds:SignedInfo>", b"<!--si-->\n<ds:SignedInfo>", 1)
        .replace(b"</ds:SignedInfo>", b"</ds:SignedInfo>\n<!--sv-->", 1)
        .replace(b'<ds:Reference URI="">', b'<!--r--><ds:Reference URI="">', 1)
    ),
    # A mark in the document: the copy path, lxml's SignedInfo.
    "a-mark-in-the-body": lambda: _signed_document(_with_body(f"<x:M xmlns:x='urn:x'>{fast_verifying._CUT[0]}</x:M>")),
    # An element aimed at the next MSH outside the Header: the copy path.
    "next-msh-in-the-body": lambda: _signed_document(_with_body(NEXT_MSH_IN_BODY)),
    # The signature in the default namespace (as the spec's example writes it): SignedInfo without a prefix,
    # whose canonical form lxml gets wrong (xmlns="" on its descendants), and libxmlsec and the text right.
    "signature-in-the-default-namespace": lambda: _resigned(
        _in_the_default_namespace(_signed_document(envelope())), by_libxmlsec=True
    ),
    # SignedInfo with an attribute: lxml's SignedInfo.
    "signed-info-with-an-id": lambda: _resigned(
        _signed_document(envelope()).replace(b"<ds:SignedInfo>", b'<ds:SignedInfo Id="si-1">', 1)
    ),
}
# The ways each document takes: (copied, SignedInfo from the canonical document).
WAYS = {
    "composed": ([], True),
    "next-msh-and-next": ([], True),
    "without-the-filter": ([], True),
    "comments-beside-the-marks": ([], True),
    "a-mark-in-the-body": (["_envelope_c14n"], False),
    "next-msh-in-the-body": (["_envelope_c14n"], True),
    "signature-in-the-default-namespace": ([], True),
    "signed-info-with-an-id": ([], False),
}


@pytest.mark.parametrize("name", DOCUMENTS)
def test_each_way_is_taken_where_it_should_and_accepts(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    signed = DOCUMENTS[name]()
    cert = certificate("fast-a")
    with monkeypatch.context() as patch:
        paths = _Paths(patch)
        assert _fast(signed, dict(PAYLOADS), cert)
    assert (paths.copied, paths.apex) == WAYS[name]
    assert _xmlsec_verifies(signed, dict(PAYLOADS), cert)
    verify(signed, PAYLOADS, cert, at=NOW)


@pytest.mark.parametrize("name", DOCUMENTS)
def test_no_one_character_change_libxmlsec_refuses_is_accepted(name: str) -> None:
    # Every one-character change that still parses, on a document taking each way: accepted without libxmlsec
    # only where libxmlsec accepts it too (inside the elements aimed at the next MSH or node, say), and the
    # received tree left as it was (checked by _fast).
    cert = certificate("fast-a")
    payloads = dict(PAYLOADS)
    signed = DOCUMENTS[name]()
    rng = random.Random(name)
    tried = accepted = 0
    for position in rng.sample(range(len(signed)), 400):
        original = signed[position : position + 1]
        replacement = b"Z" if original != b"Z" else b"Y"
        mutated = signed[:position] + replacement + signed[position + 1 :]
        try:
            fast = _fast(mutated, payloads, cert)
        except (EnvelopeError, AssertionError):
            continue  # not XML, or no signature left: nothing to verify
        tried += 1
        if fast:
            accepted += 1
            assert _xmlsec_verifies(mutated, payloads, cert), (position, original)
    assert tried > 100 and accepted < tried


# ------------------------------------------------------------- what libxmlsec refuses and reads otherwise

KEY_INFO_END = b"</ds:KeyInfo></ds:Signature>"
TRANSFORMS_END = b'<ds:Transform Algorithm="http://www.w3.org/TR/2001/REC-xml-c14n-20010315"/></ds:Transforms>'


def _value_text(soap: bytes, change: Callable[[bytes], bytes]) -> bytes:
    found = re.search(rb"<ds:SignatureValue>(.*?)</ds:SignatureValue>", soap, re.S)
    assert found is not None
    return soap[: found.start(1)] + change(found.group(1)) + soap[found.end(1) :]


def _replaced(old: bytes, new: bytes, *, resign: bool = False) -> Callable[[bytes], bytes]:
    def change(soap: bytes) -> bytes:
        assert old in soap, old
        out = soap.replace(old, new, 1)
        return _resigned(out) if resign else out

    return change


# Changes of a signed message: (the change, whether libxmlsec accepts it, whether the check without it does).
# Without the signer's key: the signature's elements outside SignedInfo, the SignatureValue's text.
CHANGES: dict[str, tuple[Callable[[bytes], bytes], bool, bool]] = {
    "an element after KeyInfo": (_replaced(KEY_INFO_END, b"</ds:KeyInfo><ds:Foo/></ds:Signature>"), False, False),
    "an Object after KeyInfo": (
        _replaced(KEY_INFO_END, b"</ds:KeyInfo><ds:Object>o</ds:Object></ds:Signature>"),
        True,
        True,
    ),
    "an element before SignatureValue": (
        _replaced(b"<ds:SignatureValue>", b"<ds:Foo/><ds:SignatureValue>"),
        False,
        False,
    ),
    "a second SignatureValue": (
        _replaced(KEY_INFO_END, b"</ds:KeyInfo><ds:SignatureValue>AAAA</ds:SignatureValue></ds:Signature>"),
        False,
        False,
    ),
    "a second KeyInfo": (
        lambda soap: re.sub(rb"(<ds:KeyInfo>.*</ds:KeyInfo>)", rb"\1\1", soap, flags=re.S),
        False,
        False,
    ),
    "KeyInfo before SignatureValue": (
        lambda soap: re.sub(
            rb"(<ds:SignatureValue>.*</ds:SignatureValue>)(<ds:KeyInfo>.*</ds:KeyInfo>)", rb"\2\1", soap, flags=re.S
        ),
        False,
        False,
    ),
    "an unknown element in KeyInfo": (_replaced(b"<ds:X509Data>", b"<ds:Foo/><ds:X509Data>"), True, True),
    "an attribute on Signature": (_replaced(b"<ds:Signature", b'<ds:Signature Id="s"'), True, True),
    "base64 after a comment in SignatureValue": (
        lambda soap: _value_text(soap, lambda text: text + b"<!--c-->QUFB"),
        False,
        False,
    ),
    "a comment ending SignatureValue": (lambda soap: _value_text(soap, lambda text: text + b"<!--c-->"), True, False),
    "a no-break space in SignatureValue": (
        lambda soap: _value_text(soap, lambda text: text[:10] + "\u00a0".encode() + text[10:]),
        False,
        False,
    ),
    "a next line in SignatureValue": (
        lambda soap: _value_text(soap, lambda text: text[:10] + b"&#x85;" + text[10:]),
        False,
        False,
    ),
    "a line separator in SignatureValue": (
        lambda soap: _value_text(soap, lambda text: text[:10] + b"&#x2028;" + text[10:]),
        False,
        False,
    ),
    "spaces, tabs and carriage returns in SignatureValue": (
        lambda soap: _value_text(soap, lambda text: text[:10] + b" \t&#13;\n " + text[10:]),
        True,
        True,
    ),
    # With the signer's key (SignedInfo changed and signed again): its structure.
    "an element ending SignedInfo": (
        _replaced(b"</ds:SignedInfo>", b"<ds:Foo/></ds:SignedInfo>", resign=True),
        False,
        False,
    ),
    "an element before CanonicalizationMethod": (
        _replaced(b"<ds:CanonicalizationMethod", b"<ds:Foo/><ds:CanonicalizationMethod", resign=True),
        False,
        False,
    ),
    "an element between References": (
        _replaced(b"</ds:Reference><ds:Reference", b"</ds:Reference><ds:Foo/><ds:Reference", resign=True),
        False,
        False,
    ),
    "an element ending a Reference": (
        _replaced(b"</ds:DigestValue></ds:Reference>", b"</ds:DigestValue><ds:Foo/></ds:Reference>", resign=True),
        False,
        False,
    ),
    "an element in Transforms": (
        _replaced(b"</ds:Transforms>", b"<ds:Foo/></ds:Transforms>", resign=True),
        False,
        False,
    ),
    "the Transforms in two": (
        _replaced(
            TRANSFORMS_END,
            b'</ds:Transforms><ds:Transforms><ds:Transform Algorithm="http://www.w3.org/TR/2001/REC-xml-c14n-20010315"/>'
            b"</ds:Transforms>",
            resign=True,
        ),
        False,
        False,
    ),
    "an element beside the XPath": (_replaced(b"</ds:XPath>", b"</ds:XPath><ds:Foo/>", resign=True), False, False),
    "a comment ending DigestValue": (
        _replaced(b"</ds:DigestValue>", b"<!--c--></ds:DigestValue>", resign=True),
        True,
        False,
    ),
    "base64 after a comment in DigestValue": (
        _replaced(b"</ds:DigestValue>", b"<!--c-->QUFB</ds:DigestValue>", resign=True),
        False,
        False,
    ),
    "a child of DigestMethod": (
        _replaced(b'xmlenc#sha256"/>', b'xmlenc#sha256"><ds:Foo/></ds:DigestMethod>', resign=True),
        True,
        True,
    ),
    "a namespace declared on SignedInfo": (
        _replaced(b"<ds:SignedInfo>", b'<ds:SignedInfo xmlns:z="urn:example:z">', resign=True),
        True,
        True,
    ),
    "an Id on SignedInfo": (_replaced(b"<ds:SignedInfo>", b'<ds:SignedInfo Id="si">', resign=True), True, True),
    # lxml's canonical form of a SignedInfo in a default namespace declared above it is not libxmlsec's.
    "an Id on a SignedInfo without prefix": (
        lambda soap: _resigned(
            _in_the_default_namespace(soap).replace(b"<SignedInfo>", b'<SignedInfo Id="si">'), by_libxmlsec=True
        ),
        True,
        False,
    ),
}


@pytest.mark.parametrize("name", CHANGES)
def test_what_libxmlsec_refuses_is_not_accepted(name: str) -> None:
    change, by_libxmlsec, without_it = CHANGES[name]
    cert = certificate("fast-a")
    changed = change(_signed_document(envelope()))
    assert _xmlsec_verifies(changed, dict(PAYLOADS), cert) is by_libxmlsec
    assert _fast(changed, dict(PAYLOADS), cert) is without_it


def test_a_namespace_name_c14n_refuses_is_left_to_libxmlsec() -> None:
    # C14N 1.0 refuses a relative namespace name: the check without libxmlsec cannot tell, and says so.
    signed = _signed_document(envelope())
    changed = signed.replace(b"<SOAP:Body>", b'<SOAP:Body><x:R xmlns:x="relative/x"/>', 1)
    assert not _fast(changed, dict(PAYLOADS), certificate("fast-a"))
    with pytest.raises(SecurityError):
        verify(changed, PAYLOADS, certificate("fast-a"), at=NOW)
