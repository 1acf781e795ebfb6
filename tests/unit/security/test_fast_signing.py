"""The RSA signing path without libxmlsec's XPath filter (msh.security.fast_signing) writes exactly what
libxmlsec writes: the same bytes for the signed envelope, over envelopes with elements aimed at the next MSH
or SOAP node (nested too), other prefixes, every payload form, every RSA algorithm and digest, with and
without the filter; and where it does not apply, libxmlsec signs."""

from __future__ import annotations

import io

import pytest

from msh.ebms.mime import PartBody
from msh.security import fast_signing, sign, verify
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
    verify(fast, PAYLOADS, cert, at=NOW)


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
    from msh.safexml import parse_xml

    root = parse_xml(soap)
    assert not fast_signing.applies(root, key, SignatureAlgorithm.RSA_SHA256)
    assert not fast_signing.applies(parse_xml(envelope()), key, SignatureAlgorithm.ECDSA_SHA256)
    assert fast_signing.applies(parse_xml(envelope()), key, SignatureAlgorithm.RSA_SHA256)
    signed = sign(soap, PAYLOADS, key, certificate("fast-a"), SignatureAlgorithm.RSA_SHA256, DigestAlgorithm.SHA256)
    assert signed.startswith(b"<?xml") and b"<?pi before?>" in signed
    verify(signed, PAYLOADS, certificate("fast-a"), at=NOW)
