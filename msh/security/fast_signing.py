"""The RSA signature of the ebMS 2.0 profile computed, and checked, without libxmlsec's XPath filter
(ebMS2 §4.1.3).

libxmlsec evaluates the profile's XPath filter expression once for every node of the envelope (elements,
attributes, namespace nodes, text): most of the time of signing a small message. What the filter selects is
known in advance: every node except the subtrees of the elements whose ``SOAP:actor`` is the next MSH or
SOAP's next (and the signature itself, the enveloped-signature transform). The envelope's digest is of the
C14N 1.0 (no comments) form of the document without those subtrees (the text around them kept), the
payloads' of their octets, and the SignatureValue is the RSA signature of the canonical SignedInfo: the
DigestValues and SignatureValue libxmlsec would write (RSA PKCS#1 v1.5 is deterministic; the tests compare
both byte for byte, and verification stays libxmlsec's). Two ways write them:

* :func:`signed_as_text`, what :func:`msh.security.signing.sign` uses: no signature element is built. The
  document just parsed from the SOAP part is serialised once, with a mark where the signature goes (after
  the Header's last child and its leading white space, where ``_on_its_own_line`` puts it); the same tree
  is then changed into what the envelope Reference digests and canonicalised once: the enveloped-signature
  transform would remove the signature and join its tail to the text before it, which leaves that child's
  tail as the Header's leading text followed by its own tail, so that text is set there; the elements the
  filter leaves out are removed in place (no copy: nothing else reads that tree; and only when the
  serialised document holds one of the two actor URIs, which it then spells as they are). The canonical
  SignedInfo and the ``ds:Signature`` are written as text (:mod:`msh.security.signature_text`) and the
  signature put at the mark. Everything outside the signature is lxml's serialisation of the same tree
  the tree path serialises, and the signature is the text lxml writes for it, so the bytes are the same;
* :func:`sign_in_place` fills in a ``ds:Signature`` template built with lxml, canonicalising a copy of the
  document for the envelope and the SignedInfo element: where the text would not be exact (a namespace
  scope or URI :mod:`msh.security.signature_text` does not write, the mark found in the document).

Both apply to RSA keys and to documents that are the Envelope alone (a processing instruction or comment
beside it is signed by libxmlsec, as is everything else :func:`applies` refuses), whose Envelope and
Header carry no ``xml:`` attribute (``xml:lang``, ``xml:space``...): C14N 1.0 §2.4 copies those onto the
canonical SignedInfo, which lxml's canonical form of an element does not do, so libxmlsec signs them.

:func:`msh.security.fast_verifying.verified_without_xmlsec` checks a received signature the same way.
"""

from __future__ import annotations

import base64
import copy
import hashlib
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import BinaryIO, Final, cast

from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import padding, rsa
from lxml import etree

from msh.ebms.namespaces import SOAP_ENV, XML
from msh.security import signature_text
from msh.security.algorithms import DigestAlgorithm, SignatureAlgorithm
from msh.security.library import Payload, PrivateKey, bare_content_id
from msh.security.profile import ds

__all__ = ["applies", "sign_in_place", "signed_as_text"]

_ACTOR: Final = f"{{{SOAP_ENV}}}actor"
_HEADER: Final = f"{{{SOAP_ENV}}}Header"
_XML_ATTRIBUTE: Final = f"{{{XML}}}"
# ebMS2 §4.1.3: the actors whose elements the profile's XPath filter leaves out.
_LEFT_OUT: Final = frozenset(
    {"urn:oasis:names:tc:ebxml-msg:actor:nextMSH", "http://schemas.xmlsoap.org/soap/actor/next"}
)
# hashlib's constructors (hashlib.new would look the name up on every call).
_HASHLIB: Final[dict[DigestAlgorithm, Callable[..., hashlib._Hash]]] = {
    DigestAlgorithm.SHA1: hashlib.sha1,
    DigestAlgorithm.SHA256: hashlib.sha256,
    DigestAlgorithm.SHA384: hashlib.sha384,
    DigestAlgorithm.SHA512: hashlib.sha512,
}
_RSA: Final[dict[SignatureAlgorithm, hashes.HashAlgorithm]] = {
    SignatureAlgorithm.RSA_SHA1: hashes.SHA1(),
    SignatureAlgorithm.RSA_SHA256: hashes.SHA256(),
    SignatureAlgorithm.RSA_SHA384: hashes.SHA384(),
    SignatureAlgorithm.RSA_SHA512: hashes.SHA512(),
}
_RSA_BY_URI: Final = {method.value: algorithm for method, algorithm in _RSA.items()}
_DIGEST_BY_URI: Final = {digest.value: digest for digest in _HASHLIB}
_CHUNK: Final = 1 << 16


def _inherits_xml_attributes(elements: Iterable[etree._Element]) -> bool:
    """Whether one of ``elements`` (the ancestors of a SignedInfo) carries an ``xml:`` attribute.

    C14N 1.0 §2.4: the apex of a document subset inherits the ``xml:`` attributes of its ancestors, as
    libxmlsec's canonical SignedInfo does; lxml's canonical form of an element leaves them out."""
    return any(str(name).startswith(_XML_ATTRIBUTE) for element in elements for name in element.attrib)


def applies(root: etree._Element, key: PrivateKey, method: SignatureAlgorithm) -> bool:
    """Whether :func:`sign_in_place` may sign ``root``'s document with ``key`` and ``method``."""
    return (
        isinstance(key, rsa.RSAPrivateKey)
        and method in _RSA
        and root.getprevious() is None
        and root.getnext() is None
        and root.getroottree().docinfo.internalDTD is None
        and not _inherits_xml_attributes((root, *root.iterchildren(_HEADER)))
    )


def _base64(value: bytes) -> str:
    """Base64 in lines of 64 characters, as libxmlsec writes DigestValue and SignatureValue."""
    text = base64.b64encode(value).decode("ascii")
    return "\n".join(text[i : i + 64] for i in range(0, len(text), 64))


def _digest(data: bytes, algorithm: DigestAlgorithm) -> str:
    return _base64(_HASHLIB[algorithm](data).digest())


def _part_digest(part: Payload, algorithm: DigestAlgorithm) -> str:
    """The DigestValue text of a payload part (:func:`_part_hash`)."""
    return _base64(_part_hash(part, algorithm))


def _part_hash(part: Payload, algorithm: DigestAlgorithm) -> bytes:
    """The digest of a payload part's octets, read as libxmlsec's ``cid:`` resolution reads them
    (:mod:`msh.security.library`: bytes, an Openable opened afresh, a stream from its start)."""
    digest = _HASHLIB[algorithm]()
    if isinstance(part, (bytes, bytearray, memoryview)):
        digest.update(part)
    else:
        # isinstance(part, Openable) without the cost of a runtime Protocol check (the same test: an open
        # method), which would be most of the time of digesting a small payload.
        opener = getattr(part, "open", None)
        if callable(opener):
            reader = cast("BinaryIO", opener())
        else:
            reader = cast("BinaryIO", part)
            reader.seek(0)
        try:
            while chunk := reader.read(_CHUNK):
                digest.update(chunk)
        finally:
            if reader is not part:
                reader.close()
    return digest.digest()


def _remove_keeping_tail(element: etree._Element) -> None:
    parent = element.getparent()
    assert parent is not None
    if element.tail:
        previous = element.getprevious()
        if previous is not None:
            previous.tail = (previous.tail or "") + element.tail
        else:
            parent.text = (parent.text or "") + element.tail
    parent.remove(element)


def _same_in(doc: etree._Element, root: etree._Element, element: etree._Element) -> etree._Element:
    """The element of the copy ``doc`` of ``root`` that is ``element`` in ``root``."""
    steps = []
    node = element
    while node is not root:
        parent = node.getparent()
        assert parent is not None
        steps.append(parent.index(node))
        node = parent
    for step in reversed(steps):
        doc = doc[step]
    return doc


def _leave_out(doc: etree._Element) -> None:
    """Remove from ``doc`` (in place) the elements aimed at the next MSH or node, keeping the text around them."""
    left_out = [e for e in doc.iter() if isinstance(e.tag, str) and e.get(_ACTOR) in _LEFT_OUT]
    for element in left_out:
        # One inside an element already left out went with it.
        if any(a is doc for a in element.iterancestors()):
            _remove_keeping_tail(element)


def _envelope_c14n(root: etree._Element, signature: etree._Element) -> bytes:
    """C14N 1.0 of the document without ``signature`` and the elements aimed at the next MSH or node."""
    doc = copy.deepcopy(root)
    _remove_keeping_tail(_same_in(doc, root, signature))
    _leave_out(doc)
    return etree.tostring(doc.getroottree(), method="c14n", with_comments=False)


def sign_in_place(
    root: etree._Element,
    signature: etree._Element,
    payloads: Mapping[str, Payload],
    key: PrivateKey,
    method: SignatureAlgorithm,
    digest: DigestAlgorithm,
    *,
    xpath_filter: bool = True,
) -> None:
    """Fill in the DigestValues and the SignatureValue of the template ``signature`` (in ``root``'s
    document, as :func:`msh.security.profile.signature_template` made it) for ``payloads`` (Content-ID ->
    content, as in :func:`msh.security.signing.sign`); :func:`applies` must hold."""
    assert isinstance(key, rsa.RSAPrivateKey)
    signed_info = signature.find(ds("SignedInfo"))
    assert signed_info is not None
    parts = {bare_content_id(cid): part for cid, part in payloads.items()}
    for reference in signed_info.iterfind(ds("Reference")):
        value = reference.find(ds("DigestValue"))
        assert value is not None
        uri = reference.get("URI", "")
        if uri == "":
            if xpath_filter:
                value.text = _digest(_envelope_c14n(root, signature), digest)
            else:
                value.text = _digest(_whole_c14n(root, signature), digest)
        else:
            value.text = _part_digest(parts[bare_content_id(uri)], digest)
    canonical = etree.tostring(signed_info, method="c14n", with_comments=False)
    signature_value = key.sign(canonical, padding.PKCS1v15(), _RSA[method])
    element = signature.find(ds("SignatureValue"))
    assert element is not None
    element.text = _base64(signature_value)


def _whole_c14n(root: etree._Element, signature: etree._Element) -> bytes:
    """C14N 1.0 of the document without ``signature`` (the enveloped-signature transform alone)."""
    doc = copy.deepcopy(root)
    copied = _same_in(doc, root, signature)
    _remove_keeping_tail(copied)
    return etree.tostring(doc.getroottree(), method="c14n", with_comments=False)


# -------------------------------------------------------------------------------------- signing as text

# Where the signature goes in the serialised document: ASCII that serialisation writes as it is, and that
# must then occur once (else the tree is signed).
_MARK: Final = "msh-ds-Signature-goes-here-5f0c"
_MARK_BYTES: Final = _MARK.encode("ascii")
# The actors' URIs as serialisation writes them (nothing in them is escaped): a document without either
# has nothing the XPath filter leaves out.
_LEFT_OUT_BYTES: Final = tuple(actor.encode("ascii") for actor in _LEFT_OUT)


def signed_as_text(
    root: etree._Element,
    header: etree._Element,
    uris: Sequence[str],
    payloads: Mapping[str, Payload],
    key: PrivateKey,
    key_info: str,
    method: SignatureAlgorithm,
    digest: DigestAlgorithm,
    *,
    xpath_filter: bool = True,
    xml_declaration: bool,
) -> bytes | None:
    """The document of ``root`` (its SOAP ``header`` holding no signature) serialised with the signature
    that :func:`sign_in_place` would fill in for ``signature_template(header, method, digest, uris)``
    followed by the KeyInfo text ``key_info``, written as text; :func:`applies` must hold.

    ``uris`` are the payload References' URIs (the part of each is ``payloads[bare_content_id(uri)]``).
    Returns None, with ``root`` as it was, where the text would not be exact
    (:func:`msh.security.signature_text.form`, a URI that is not plain, the mark already in the document):
    the tree is signed then. Otherwise ``root`` is left changed (the filtered document that was digested)."""
    assert isinstance(key, rsa.RSAPrivateKey)
    shape = signature_text.form(frozenset(header.nsmap.items()))
    if shape is None or not all(signature_text.plain_uri(uri) for uri in uris):
        return None
    # The signature becomes the Header's last child with the white space around it of the one before
    # (msh.security.signing._on_its_own_line): after the Header's leading text, before that child's tail.
    before = header[-1] if len(header) else None
    text, tail = header.text, before.tail if before is not None else None
    if before is None:
        header.text = (text or "") + _MARK
    else:
        before.tail = (text or "") + _MARK + (tail or "")
    serialised = etree.tostring(root.getroottree(), xml_declaration=xml_declaration, encoding="UTF-8")
    head, found, rest = serialised.partition(_MARK_BYTES)
    exact = bool(found) and _MARK_BYTES not in rest
    if before is None:
        header.text = text
    else:
        # The enveloped-signature transform removes the signature and joins its tail (the child's) to the
        # text before it (the Header's leading text, moved there): the document the envelope digest is of.
        joined = (text or "") + (tail or "")
        before.tail = (joined or None) if exact else tail
    if not exact:
        return None
    if xpath_filter and any(actor in serialised for actor in _LEFT_OUT_BYTES):
        _leave_out(root)  # root is ours (parsed for signing): no copy to filter
    references = [("", _digest(etree.tostring(root.getroottree(), method="c14n", with_comments=False), digest))]
    parts = {bare_content_id(cid): part for cid, part in payloads.items()}
    references += [(uri, _part_digest(parts[bare_content_id(uri)], digest)) for uri in uris]
    canonical = signature_text.canonical_signed_info(shape, method, digest, references, xpath_filter=xpath_filter)
    value = _base64(key.sign(canonical, padding.PKCS1v15(), _RSA[method]))
    signed = signature_text.signature(shape, method, digest, references, value, key_info, xpath_filter=xpath_filter)
    return head + signed + rest
