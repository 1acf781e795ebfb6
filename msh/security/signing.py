"""Signing an ebXML message in the ebMS 2.0 profile (ebMS2 §4.1.3).

:func:`sign` takes the SOAP part as it will be sent and the payload parts (their content before any
Content-Transfer-Encoding: ebMS2 §4.1.3 note, "the signature generation MUST be executed before the
encoding") and returns the SOAP part with the ``ds:Signature`` added as the last child of the SOAP Header.
Nothing else in the envelope changes but the white space before the new element, so what the sender
stores is what it sends on every retry (docs/design.md §5.1).

When the agreement also asks for payload encryption, sign first, then encrypt the parts
(ebMS2 §4.1.4.5: "When both signature and encryption are required of the MSH, sign first and then
encrypt"): the ``cid:`` digests are of the payloads as the application gave them.

How the signature is written: three ways, the same bytes (the tests compare them byte for byte).

* With an RSA key and an envelope that is the document alone (:func:`msh.security.fast_signing.applies`),
  as text: the envelope parsed here is serialised once with a mark where the signature goes, canonicalised
  once (the elements the XPath filter leaves out removed in place), and the ``ds:Signature`` (SignedInfo
  with the digests, the RSA signature of its canonical form, written as text too, and the KeyInfo) is put
  at the mark (:func:`~msh.security.fast_signing.signed_as_text`, :mod:`msh.security.signature_text`).
  Building the template element by element, copying the document to filter it, canonicalising the
  SignedInfo element and serialising the tree again were half of signing's work besides the RSA operation
  (for a two-part message); the text is what that tree serialises to.
* Where the text would not be exact (a namespace scope or Reference URI it does not write), the template
  is built with lxml (:func:`~msh.security.profile.signature_template`), filled in by
  :func:`~msh.security.fast_signing.sign_in_place`, and the whole tree serialised.
* Otherwise (another key type, something beside the Envelope, ``xml:`` attributes above the signature)
  libxmlsec fills the template in.
"""

from __future__ import annotations

import base64
import functools
from collections.abc import Mapping, Sequence

from cryptography import x509
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat
from lxml import etree

from msh.ebms.namespaces import SOAP_ENV
from msh.errors import ConfigurationError
from msh.safexml import XmlLimits, parse_xml
from msh.security import fast_signing, signature_text
from msh.security.algorithms import DigestAlgorithm, SignatureAlgorithm, digest_algorithm, signature_algorithm
from msh.security.dsa_keys import DSAPrivateKey
from msh.security.library import (
    Payload,
    PrivateKey,
    bare_content_id,
    private_key,
    resolving_parts,
    xmlsec,
)
from msh.security.profile import ds, payload_uris, signature_template

__all__ = ["key_info", "sign"]

_HEADER = f"{{{SOAP_ENV}}}Header"
_SIGNATURE = ds("Signature")
_KEY_TYPES = {"RSA": rsa.RSAPrivateKey, "EC": ec.EllipticCurvePrivateKey, "DSA": DSAPrivateKey}


def _subject(certificate: x509.Certificate) -> str:
    return certificate.subject.rfc4514_string() or "(no subject)"


# The key pairs already checked, by the identity of the key and certificate objects and the key type (the
# objects are held, so an identity is never reused): an MSH signs with one pair for its lifetime.
_CHECKED: dict[tuple[int, int, str], tuple[PrivateKey, x509.Certificate]] = {}


def _check_key(key: PrivateKey, certificate: x509.Certificate, algorithm: SignatureAlgorithm) -> None:
    """Refuse a key that does not suit ``algorithm`` or does not belong to ``certificate`` (once per pair)."""
    checked = (id(key), id(certificate), algorithm.key_type)
    if checked in _CHECKED:
        return
    _check_pair(key, certificate, algorithm)
    if len(_CHECKED) >= 64:
        _CHECKED.clear()
    _CHECKED[checked] = (key, certificate)


def _check_pair(key: PrivateKey, certificate: x509.Certificate, algorithm: SignatureAlgorithm) -> None:
    wanted = _KEY_TYPES[algorithm.key_type]
    if not isinstance(key, wanted):
        raise ConfigurationError(
            f"SignatureAlgorithm {algorithm.value} needs an {algorithm.key_type} key but the signing key is "
            f"{type(key).__name__.removeprefix('_')}; use an {algorithm.key_type} key pair or change the "
            "agreement's SignatureAlgorithm"
        )
    ours = key.public_key().public_bytes(Encoding.DER, PublicFormat.SubjectPublicKeyInfo)
    theirs = certificate.public_key().public_bytes(Encoding.DER, PublicFormat.SubjectPublicKeyInfo)
    if ours != theirs:
        raise ConfigurationError(
            f"the signing key does not belong to the signing certificate ({_subject(certificate)}): give the "
            "private key of that certificate, or the certificate of that key"
        )


def key_info(certificates: Sequence[x509.Certificate]) -> etree._Element:
    """A ``ds:KeyInfo`` carrying ``certificates`` (the signer's first, then the chain above it)."""
    element = etree.Element(ds("KeyInfo"))
    data = etree.SubElement(element, ds("X509Data"))
    for certificate in certificates:
        etree.SubElement(data, ds("X509Certificate")).text = _base64_der(certificate)
    return element


@functools.lru_cache(maxsize=16)
def _base64_der(certificate: x509.Certificate) -> str:
    """The certificate's DER in base64 (the same few certificates go into every signature)."""
    return base64.b64encode(certificate.public_bytes(Encoding.DER)).decode()


# The KeyInfo texts written, by the identities of their certificates (the objects are held, so an identity
# is never reused): hashing a certificate, as a functools cache would, costs more than writing the text.
_KEY_INFOS: dict[tuple[int, ...], tuple[tuple[x509.Certificate, ...], str]] = {}


def _key_info_text(certificates: tuple[x509.Certificate, ...]) -> str:
    """:func:`key_info` as serialisation writes it inside the signature (the same few in every signature)."""
    identities = tuple(map(id, certificates))
    known = _KEY_INFOS.get(identities)
    if known is not None:
        return known[1]
    text = signature_text.key_info([_base64_der(certificate) for certificate in certificates])
    if len(_KEY_INFOS) >= 16:
        _KEY_INFOS.clear()
    _KEY_INFOS[identities] = (certificates, text)
    return text


def _on_its_own_line(header: etree._Element, signature: etree._Element) -> None:
    """Put the white space around ``signature`` (just added last to ``header``) as around the elements
    before it."""
    before = signature.getprevious()
    if before is not None:
        signature.tail, before.tail = before.tail, header.text


def sign(
    soap: bytes,
    payloads: Mapping[str, Payload],
    key: PrivateKey,
    certificate: x509.Certificate,
    signature_algorithm_uri: str | SignatureAlgorithm,
    digest_uri: str | DigestAlgorithm,
    *,
    chain: Sequence[x509.Certificate] = (),
    xpath_filter: bool = True,
) -> bytes:
    """The SOAP part ``soap`` signed in the ebMS2 §4.1.3 profile with ``key``.

    ``payloads`` maps each payload part's Content-ID (bare, ``cid:...`` or ``<...>``) to its content, in
    package order: bytes, a :class:`~msh.security.library.Openable` such as a
    :class:`~msh.ebms.mime.PartBody`, or a seekable binary reader. ``signature_algorithm_uri`` and
    ``digest_uri`` are the agreement's SignatureAlgorithm and HashFunction URIs (CPP/A 2.0 §8.4.40).
    The KeyInfo carries ``certificate`` and ``chain`` (intermediate certificates, leaf first).
    ``xpath_filter=False`` signs the whole envelope, the elements targeted at the next MSH included: the
    signature of an Acknowledgment with SOAP actor nextMSH, sent by itself (ebMS2 §10.1.4).

    Raises :class:`~msh.errors.ConfigurationError` when the algorithms are not ones the MSH implements,
    the key does not suit the algorithm or does not belong to ``certificate``; ``ValueError`` when
    ``soap`` has no SOAP Header or already carries a ``ds:Signature``;
    :class:`~msh.errors.EnvelopeError` when ``soap`` is not XML.
    """
    method = signature_algorithm(signature_algorithm_uri)
    digest = digest_algorithm(digest_uri)
    _check_key(key, certificate, method)
    root = parse_xml(soap, what="SOAP envelope to sign", limits=XmlLimits(max_bytes=max(len(soap), 1)))
    header = next(root.iterchildren(_HEADER), None)
    if header is None:
        raise ValueError("the SOAP envelope has no SOAP Header to put the ds:Signature in (ebMS2 §4.1.1)")
    if next(header.iterchildren(_SIGNATURE), None) is not None:
        raise ValueError("the SOAP envelope is already signed; sign the unsigned envelope")
    content_ids = [bare_content_id(cid) for cid in payloads]
    if len(set(content_ids)) != len(content_ids):
        raise ValueError(f"payload Content-IDs repeat: {', '.join(content_ids)}")
    uris = payload_uris(root, content_ids)
    certificates = (certificate, *chain)
    declaration = soap.lstrip(b"\xef\xbb\xbf \t\r\n").startswith(b"<?xml")
    fast = fast_signing.applies(root, key, method)
    if fast:
        # The bytes of the tree path below, written as text (msh.security.signature_text).
        signed = fast_signing.signed_as_text(
            root,
            header,
            uris,
            payloads,
            key,
            _key_info_text(certificates),
            method,
            digest,
            xpath_filter=xpath_filter,
            xml_declaration=declaration,
        )
        if signed is not None:
            return signed
    signature = signature_template(header, method, digest, uris, key_info=False, xpath_filter=xpath_filter)
    _on_its_own_line(header, signature)
    if fast:
        # The same DigestValues and SignatureValue as libxmlsec's, without its per-node XPath filter.
        fast_signing.sign_in_place(root, signature, payloads, key, method, digest, xpath_filter=xpath_filter)
    else:
        _sign_with_xmlsec(signature, payloads, key)
    signature.append(key_info(certificates))
    # The whole document, so that a processing instruction around the Envelope stays as it was signed.
    return etree.tostring(root.getroottree(), xml_declaration=declaration, encoding="UTF-8")


def _sign_with_xmlsec(signature: etree._Element, payloads: Mapping[str, Payload], key: PrivateKey) -> None:
    context = xmlsec.SignatureContext()
    context.key = private_key(key)
    with resolving_parts(payloads) as parts:
        try:
            context.sign(signature)
        except xmlsec.Error as exc:
            missing = f" (payload part {', '.join(parts.missing)} could not be read)" if parts.missing else ""
            raise ConfigurationError(f"signing the message failed: {exc}{missing}") from exc
