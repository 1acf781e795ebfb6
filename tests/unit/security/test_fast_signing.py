"""The RSA signing path without libxmlsec's XPath filter (msh.security.fast_signing) writes exactly what
libxmlsec writes: the same bytes for the signed envelope, over envelopes with elements aimed at the next MSH
or SOAP node (nested too), other prefixes, every payload form, every RSA algorithm and digest, with and
without the filter; and where it does not apply, libxmlsec signs."""

from __future__ import annotations

import io
import random

import pytest

from msh.ebms.mime import PartBody
from msh.errors import EnvelopeError
from msh.safexml import parse_xml
from msh.security import fast_signing, fast_verifying, sign, verify
from msh.security.algorithms import DigestAlgorithm, SignatureAlgorithm
from tests.support.security import NEXT_MSH_ACK, NEXT_SYNC_REPLY, NOW, PAYLOADS, certificate, envelope, rsa_key

NESTED = (
    '<ext:Hop xmlns:ext="urn:example:ext" SOAP:actor="urn:oasis:names:tc:ebxml-msg:actor:nextMSH">'
    '<ext:Inner SOAP:actor="http://schemas.xmlsoap.org/soap/actor/next">x</ext:Inner> tail</ext:Hop>'
    "<!-- a comment --> "
)
EXTRAS = ["", NEXT_MSH_ACK, NEXT_SYNC_REPLY, NEXT_MSH_ACK + "\n    " + NEXT_SYNC_REPLY, NESTED]


def _both(
    monkeypatch: pytest.MonkeyPatch, soap: bytes, payloads: dict[str, object], *args: object, **kw: object
) -> tuple[bytes, bytes]:
    fast = sign(soap, payloads, *args, **kw)  # type: ignore[arg-type]
    with monkeypatch.context() as m:
        m.setattr(fast_signing, "applies", lambda *a: False)
        slow = sign(soap, payloads, *args, **kw)  # type: ignore[arg-type]
    return fast, slow


@pytest.mark.parametrize("extra", EXTRAS)
@pytest.mark.parametrize("prefix", ["SOAP", "soapenv"])
@pytest.mark.parametrize("xpath_filter", [True, False])
def test_the_same_signature_as_libxmlsec_over_envelopes(
    monkeypatch: pytest.MonkeyPatch, extra: str, prefix: str, xpath_filter: bool
) -> None:
    key, cert = rsa_key("fast-a"), certificate("fast-a")
    soap = envelope(header_extra=extra, prefix=prefix)
    payloads: dict[str, object] = dict(PAYLOADS)
    fast, slow = _both(
        monkeypatch,
        soap,
        payloads,
        key,
        cert,
        SignatureAlgorithm.RSA_SHA256,
        DigestAlgorithm.SHA256,
        xpath_filter=xpath_filter,
    )
    assert fast == slow
    if xpath_filter:
        verify(fast, PAYLOADS, cert, at=NOW)
    else:
        # Without the filter the profile is for an Acknowledgment alone (ebMS2 §10.1.4): libxmlsec checks it.
        assert _xmlsec_verifies(fast, PAYLOADS, cert)


@pytest.mark.parametrize(
    ("method", "digest"),
    [
        (SignatureAlgorithm.RSA_SHA1, DigestAlgorithm.SHA1),
        (SignatureAlgorithm.RSA_SHA256, DigestAlgorithm.SHA1),
        (SignatureAlgorithm.RSA_SHA384, DigestAlgorithm.SHA384),
        (SignatureAlgorithm.RSA_SHA512, DigestAlgorithm.SHA512),
    ],
)
def test_the_same_signature_for_every_rsa_algorithm_and_payload_form(
    monkeypatch: pytest.MonkeyPatch, method: SignatureAlgorithm, digest: DigestAlgorithm
) -> None:
    key, cert = rsa_key("fast-a"), certificate("fast-a")
    order, scan = PAYLOADS.values()
    stream = io.BytesIO(scan)
    stream.seek(7)  # read from the start, as the cid: resolution reads it
    payloads: dict[str, object] = dict(zip(PAYLOADS, (PartBody.from_bytes(order), stream), strict=True))
    fast, slow = _both(monkeypatch, envelope(), payloads, key, cert, method, digest)
    assert fast == slow
    verify(fast, PAYLOADS, cert, at=NOW)


def test_libxmlsec_signs_what_the_fast_path_does_not_apply_to() -> None:
    key = rsa_key("fast-a")
    soap = envelope().replace(b"<SOAP:Envelope", b"<?pi before?>\n<SOAP:Envelope", 1)
    root = parse_xml(soap)
    assert not fast_signing.applies(root, key, SignatureAlgorithm.RSA_SHA256)
    assert not fast_signing.applies(parse_xml(envelope()), key, SignatureAlgorithm.ECDSA_SHA256)
    assert fast_signing.applies(parse_xml(envelope()), key, SignatureAlgorithm.RSA_SHA256)
    signed = sign(soap, PAYLOADS, key, certificate("fast-a"), SignatureAlgorithm.RSA_SHA256, DigestAlgorithm.SHA256)
    assert signed.startswith(b"<?xml") and b"<?pi before?>" in signed
    verify(signed, PAYLOADS, certificate("fast-a"), at=NOW)


XML_ATTRIBUTES = [
    (b"<SOAP:Header>", b'<SOAP:Header xml:lang="en">'),
    (b"<SOAP:Envelope ", b'<SOAP:Envelope xml:space="preserve" '),
]


@pytest.mark.parametrize(("old", "new"), XML_ATTRIBUTES)
def test_xml_attributes_above_the_signature_are_left_to_libxmlsec(
    monkeypatch: pytest.MonkeyPatch, old: bytes, new: bytes
) -> None:
    # C14N 1.0 §2.4: the canonical SignedInfo inherits them; lxml's canonical form of an element would not.
    key, cert = rsa_key("fast-a"), certificate("fast-a")
    soap = envelope().replace(old, new, 1)
    assert not fast_signing.applies(parse_xml(soap), key, SignatureAlgorithm.RSA_SHA256)
    fast, slow = _both(
        monkeypatch, soap, dict(PAYLOADS), key, cert, SignatureAlgorithm.RSA_SHA256, DigestAlgorithm.SHA256
    )
    assert fast == slow
    assert _xmlsec_verifies(fast, PAYLOADS, cert)
    # The check without libxmlsec cannot tell, and says so: libxmlsec verifies.
    assert not _fast_verifies(fast, PAYLOADS, cert)
    verify(fast, PAYLOADS, cert, at=NOW)


# ------------------------------------------------------------------------------------------ verifying


def _xmlsec_verifies(soap: bytes, payloads: dict[str, bytes], cert: object) -> bool:
    import xmlsec

    from msh.security.library import resolving_parts
    from msh.security.profile import first_signature
    from msh.security.verifying import _context

    root = parse_xml(soap)
    signature = first_signature(root)
    assert signature is not None
    try:
        with resolving_parts(payloads):
            _context(cert).verify(signature)  # type: ignore[arg-type]
    except xmlsec.Error:
        return False
    return True


def _fast_verifies(soap: bytes, payloads: dict[str, bytes], cert: object) -> bool:
    from msh.security.profile import first_signature

    root = parse_xml(soap)
    signature = first_signature(root)
    assert signature is not None
    return fast_verifying.verified_without_xmlsec(root, signature, payloads, cert)  # type: ignore[arg-type]


@pytest.mark.parametrize("extra", EXTRAS)
@pytest.mark.parametrize("xpath_filter", [True, False])
def test_the_check_without_libxmlsec_accepts_what_libxmlsec_accepts(extra: str, xpath_filter: bool) -> None:
    key, cert = rsa_key("fast-a"), certificate("fast-a")
    payloads = dict(PAYLOADS)
    signed = sign(
        envelope(header_extra=extra),
        payloads,
        key,
        cert,
        SignatureAlgorithm.RSA_SHA256,
        DigestAlgorithm.SHA256,
        xpath_filter=xpath_filter,
    )
    assert _fast_verifies(signed, payloads, cert) and _xmlsec_verifies(signed, payloads, cert)
    assert not _fast_verifies(signed, payloads, certificate("fast-other"))
    changed = dict(payloads, **{next(iter(payloads)): b"<Order><Id>PO-2</Id></Order>"})
    assert not _fast_verifies(signed, changed, cert)
    assert not _fast_verifies(signed.replace(b"NewOrder", b"OldOrder"), payloads, cert)


def test_the_check_without_libxmlsec_never_accepts_a_change_libxmlsec_refuses() -> None:
    # Every one-character change of the signed envelope that still parses: accepted without libxmlsec only
    # where libxmlsec accepts it too (inside the elements aimed at the next MSH or node, say).
    key, cert = rsa_key("fast-a"), certificate("fast-a")
    payloads = dict(PAYLOADS)
    extra = NEXT_MSH_ACK + "\n    " + NEXT_SYNC_REPLY
    signed = sign(
        envelope(header_extra=extra), payloads, key, cert, SignatureAlgorithm.RSA_SHA256, DigestAlgorithm.SHA256
    )
    rng = random.Random(13)
    tried = accepted = 0
    for position in rng.sample(range(len(signed)), 400):
        original = signed[position : position + 1]
        replacement = b"Z" if original != b"Z" else b"Y"
        mutated = signed[:position] + replacement + signed[position + 1 :]
        try:
            fast = _fast_verifies(mutated, payloads, cert)
        except (EnvelopeError, AssertionError):
            continue  # not XML, or no signature left: nothing to verify
        tried += 1
        if fast:
            accepted += 1
            assert _xmlsec_verifies(mutated, payloads, cert), (position, original)
    assert tried > 100 and accepted < tried
