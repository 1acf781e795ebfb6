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

:func:`verified_without_xmlsec` checks a received signature the same way, and can only accept: where it
cannot tell, or a digest or the SignatureValue does not match, libxmlsec verifies (and says what failed).

* It reads the signature as libxmlsec reads it, and leaves to libxmlsec whatever libxmlsec would read
  otherwise: the Signature's element children are SignedInfo, SignatureValue, at most one KeyInfo and
  Objects, SignedInfo's a CanonicalizationMethod, a SignatureMethod and References, a Reference's its
  Transforms (or none), DigestMethod and DigestValue, the Transforms' Transform elements, the XPath
  Transform's one ``ds:XPath`` holding text only (XML-DSig §4); a DigestValue or SignatureValue holds text
  only, base64 with no other white space than space, tab, CR and LF.
* The received tree is not copied: the document is canonicalised once as it is, with marks added to the
  texts right before and after the signature, the Header's elements aimed at the next MSH or node, and
  SignedInfo. Cutting each range from a mark before to the mark after gives the envelope's digested form
  (the enveloped-signature transform and the filter drop those elements and leave the texts around them
  side by side); SignedInfo's range is its canonical form but for its start tag, written then with every
  namespace in scope (C14N 1.0 §2.3: the apex of its own document subset declares them all). The texts are
  set back afterwards, so the tree is as it was. Where a mark occurs in the document, or the digested form
  still holds an actor's URI (an element aimed at the next MSH elsewhere than among the Header's children,
  or the URI in a text), the document is filtered on a copy; where SignedInfo has attributes or a namespace
  in scope that is not written as it is, lxml canonicalises it, unless an element in it has no prefix
  (lxml then writes ``xmlns=""`` where libxmlsec does not: libxmlsec verifies).
"""

from __future__ import annotations

import base64
import binascii
import copy
import functools
import hashlib
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import BinaryIO, Final, cast

from cryptography import x509
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import padding, rsa
from lxml import etree

from msh.ebms.namespaces import SOAP_ENV, XML
from msh.security import signature_text
from msh.security.algorithms import CanonicalizationMethod, DigestAlgorithm, SignatureAlgorithm, Transform
from msh.security.library import Payload, PrivateKey, bare_content_id
from msh.security.profile import ds

__all__ = ["applies", "sign_in_place", "signed_as_text", "verified_without_xmlsec"]

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


# ------------------------------------------------------------------------------------------ verifying

_SIGNED_INFO: Final = ds("SignedInfo")
_SIGNATURE_VALUE: Final = ds("SignatureValue")
_KEY_INFO: Final = ds("KeyInfo")
_OBJECT: Final = ds("Object")
_CANONICALIZATION_METHOD: Final = ds("CanonicalizationMethod")
_SIGNATURE_METHOD: Final = ds("SignatureMethod")
_REFERENCE: Final = ds("Reference")
_TRANSFORMS: Final = ds("Transforms")
_TRANSFORM: Final = ds("Transform")
_XPATH: Final = ds("XPath")
_DIGEST_METHOD: Final = ds("DigestMethod")
_DIGEST_VALUE: Final = ds("DigestValue")
# The white space libxmlsec's base64 decoder skips (any other character but the alphabet is an error).
_BASE64_SPACE: Final = b" \t\n\r"
# The marks put in the text around the elements the envelope digest leaves out (the signature, the Header's
# elements aimed at the next MSH or node) and around SignedInfo while the received document is canonicalised:
# ASCII that C14N writes as it is, the common start followed by one letter. The start's only "#" is its first
# character, so no occurrence of it overlaps one of our marks: one that is not ours adds to the count, which
# must then be exact.
_MARK_START: Final = "#msh-5f0c-"
_MARK_START_BYTES: Final = _MARK_START.encode("ascii")
_CUT: Final = (_MARK_START + "c", _MARK_START + "e")
_AROUND_SIGNED_INFO: Final = (_MARK_START + "s", _MARK_START + "t")
_CUT_END_LETTER: Final = b"e"
_SIGNED_INFO_LETTER: Final = b"s"


def _decoded(element: etree._Element) -> bytes | None:
    """The bytes of the base64 text of ``element`` (a DigestValue or SignatureValue), read as libxmlsec
    reads it: None (not told) when the element holds anything but text, or the text another character than
    the alphabet, the padding and the white space libxmlsec skips."""
    if len(element):
        return None  # a comment or processing instruction among the text: left to libxmlsec
    try:
        text = (element.text or "").encode("ascii").translate(None, _BASE64_SPACE)
        return base64.b64decode(text, validate=True)
    except (UnicodeEncodeError, binascii.Error, ValueError):
        return None


def _elements(parent: etree._Element) -> list[etree._Element]:
    """The element children of ``parent`` (libxmlsec reads those, skipping text, comments and processing
    instructions)."""
    return [child for child in parent if isinstance(child.tag, str)]


def _envelope_transforms(transforms: etree._Element | None) -> bool | None:
    """True: enveloped-signature, the ebMS XPath filter, C14N 1.0; False: enveloped-signature, C14N 1.0;
    None: any other Transforms (left to libxmlsec)."""
    if transforms is None:
        return None
    steps = _elements(transforms)
    if any(step.tag != _TRANSFORM for step in steps):
        return None  # libxmlsec reads Transform elements only there
    algorithms = [step.get("Algorithm", "") for step in steps]
    if algorithms == [Transform.ENVELOPED_SIGNATURE, Transform.XPATH, CanonicalizationMethod.C14N]:
        # profile_problems has checked the XPath expression: the ebMS2 §4.1.3 filter (either order). libxmlsec
        # reads one XPath element there, and all of its text.
        xpath = _elements(steps[1])
        return True if len(xpath) == 1 and xpath[0].tag == _XPATH and not len(xpath[0]) else None
    if algorithms == [Transform.ENVELOPED_SIGNATURE, CanonicalizationMethod.C14N]:
        return False
    return None


def _reference_parts(
    reference: etree._Element,
) -> tuple[etree._Element | None, etree._Element, etree._Element] | None:
    """A Reference's Transforms (or None), DigestMethod and DigestValue, where its children are those, in
    that order, and nothing else (as libxmlsec reads them); else None."""
    children = _elements(reference)
    transforms = children[0] if children and children[0].tag == _TRANSFORMS else None
    rest = children[1:] if transforms is not None else children
    if len(rest) != 2 or rest[0].tag != _DIGEST_METHOD or rest[1].tag != _DIGEST_VALUE:
        return None
    return transforms, rest[0], rest[1]


def _signature_parts(signature: etree._Element) -> tuple[etree._Element, etree._Element] | None:
    """The SignedInfo and SignatureValue of ``signature`` where its children are SignedInfo, SignatureValue,
    at most one KeyInfo and Objects, in that order (XML-DSig §4.1, as libxmlsec reads them); else None."""
    children = _elements(signature)
    if len(children) < 2 or children[0].tag != _SIGNED_INFO or children[1].tag != _SIGNATURE_VALUE:
        return None
    rest = children[2:]
    if rest and rest[0].tag == _KEY_INFO:
        rest = rest[1:]
    if any(child.tag != _OBJECT for child in rest):
        return None
    return children[0], children[1]


Marked = dict[tuple[etree._Element, bool], tuple[str | None, str]]
"""The texts marked: (element, True for its tail or False for its text) -> (the text as it was, marked)."""


def _mark(texts: Marked, element: etree._Element, begin: str, end: str) -> None:
    """Add the mark ``begin`` at the end of the text right before ``element`` and ``end`` at the start of its
    tail."""
    previous = element.getprevious()
    if previous is not None:
        before = (previous, True)
    else:
        parent = element.getparent()
        assert parent is not None
        before = (parent, False)
    for key, prefix, suffix in ((before, "", begin), ((element, True), end, "")):
        node, tail = key
        if key in texts:
            original, current = texts[key]
        else:
            original = node.tail if tail else node.text
            current = original or ""
        texts[key] = (original, prefix + current + suffix)


def _set_texts(texts: Marked, marked: bool) -> None:
    for (node, tail), (original, with_marks) in texts.items():
        text = with_marks if marked else original
        if tail:
            node.tail = text
        else:
            node.text = text


def _canonical_with_marks(
    root: etree._Element, cuts: Sequence[etree._Element], signed_info: etree._Element | None
) -> bytes:
    """C14N 1.0 of ``root``'s document with each of ``cuts`` between the two cut marks and ``signed_info``
    (when given) between its two marks. The tree is left as it was: the texts marked are set back (a text of
    the tree parse_xml makes is one text node, CDATA sections merged, and setting it again makes the same)."""
    texts: Marked = {}
    for element in cuts:
        _mark(texts, element, *_CUT)
    if signed_info is not None:
        _mark(texts, signed_info, *_AROUND_SIGNED_INFO)
    try:
        _set_texts(texts, True)
        return etree.tostring(root.getroottree(), method="c14n", with_comments=False)
    finally:
        _set_texts(texts, False)


def _split_marked(canonical: bytes, marks: int) -> tuple[bytes, bytes | None] | None:
    """From the canonical document ``canonical`` holding ``marks`` marks: the same without the ranges from a
    cut mark to the end mark after it (marks included), which is the C14N of the document without the
    elements cut, the text around each joined (the node-set C14N of the Transforms writes the text nodes
    before and after side by side); and what is between the SignedInfo marks, if any. None when the marks
    are not exactly ours."""
    pieces = canonical.split(_MARK_START_BYTES)
    if len(pieces) != marks + 1:
        return None
    # All ours, so in document order: cut from, cut to, ..., SignedInfo's inside the signature's cut.
    kept = [pieces[0]]
    kept += [piece[1:] for piece in pieces[1:] if piece[:1] == _CUT_END_LETTER]
    signed_info = next((piece[1:] for piece in pieces[1:] if piece[:1] == _SIGNED_INFO_LETTER), None)
    return b"".join(kept), signed_info


@functools.lru_cache(maxsize=64)
def _apex_start_tag(prefix: str | None, scope: frozenset[tuple[str | None, str]]) -> tuple[bytes, bytes] | None:
    """The start of a SignedInfo start tag (its prefix ``prefix``, no attributes, ``scope`` its in-scope
    namespaces) as the canonical document writes it, and the start tag C14N writes for SignedInfo as the apex
    of its own document subset: C14N 1.0 §2.3, §4.7, every namespace in scope declared, the default first,
    then by prefix. None where a declaration would not be written as it is (the ``xml`` prefix, an empty
    namespace name, one that C14N escapes). The same few scopes come with every message: each is written
    once."""
    if any(name == "xml" or not uri or not signature_text.plain_uri(uri) for name, uri in scope):
        return None
    qname = f"{prefix}:SignedInfo" if prefix else "SignedInfo"
    declarations = "".join(
        f' xmlns="{uri}"' if name is None else f' xmlns:{name}="{uri}"'
        for name, uri in sorted(scope, key=lambda item: item[0] or "")
    )
    return f"<{qname}".encode(), f"<{qname}{declarations}>".encode()


def _apex_signed_info(written: bytes, start_tags: tuple[bytes, bytes]) -> bytes | None:
    """The canonical SignedInfo from ``written``, the SignedInfo of the canonical document: the same bytes
    but the start tag, which declares there only the namespaces its canonical ancestors do not (what is
    inside is written the same either way: a descendant's declarations depend on its ancestors inside
    SignedInfo only)."""
    in_document, apex = start_tags
    after = written[len(in_document) : len(in_document) + 1]
    close = written.find(b">")
    if close < 0 or not written.startswith(in_document) or after not in (b" ", b">"):
        return None
    # No attribute on SignedInfo and no ">" in a namespace name: the first ">" ends the start tag.
    return apex + written[close + 1 :]


def _lxml_signed_info(signed_info: etree._Element) -> bytes | None:
    """lxml's canonical form of ``signed_info``, where it is libxmlsec's: lxml canonicalises an element in a
    document of its own whose root declares the namespaces in scope, and writes ``xmlns=""`` on an element
    in a default namespace declared outside it, so an element without a prefix leaves it to libxmlsec (None)."""
    if any(element.prefix is None for element in signed_info.iter() if isinstance(element.tag, str)):
        return None
    return etree.tostring(signed_info, method="c14n", with_comments=False)


def _canonical_forms(
    root: etree._Element, signature: etree._Element, signed_info: etree._Element, filtered: bool
) -> tuple[bytes, bytes | None]:
    """What the envelope Reference digests (``filtered``: with the ebMS XPath filter) and the canonical
    SignedInfo, both from one C14N of the document as it is, with the texts around the signature, the
    Header's elements aimed at the next MSH or node, and SignedInfo marked. Where the marks are not exactly
    ours, an element aimed at them is elsewhere (the digested bytes still hold one of their URIs), or
    SignedInfo's start tag is not one written here, the document is filtered on a copy and SignedInfo
    canonicalised by lxml (:func:`_lxml_signed_info`: None where that would not be libxmlsec's)."""
    cuts = [signature]
    if filtered:
        header = signature.getparent()
        assert header is not None
        cuts += [
            element
            for element in header.iterchildren()
            if element is not signature and isinstance(element.tag, str) and element.get(_ACTOR) in _LEFT_OUT
        ]
    start_tags = (
        None if signed_info.attrib else _apex_start_tag(signed_info.prefix, frozenset(signed_info.nsmap.items()))
    )
    canonical = _canonical_with_marks(root, cuts, signed_info if start_tags is not None else None)
    split = _split_marked(canonical, 2 * len(cuts) + (2 if start_tags is not None else 0))
    envelope, written = split if split is not None else (None, None)
    # ebMS2 §4.1.3: C14N writes the actors' URIs as they are, so digested bytes without them hold no element
    # that the filter leaves out, wherever it is.
    if envelope is None or (filtered and any(actor in envelope for actor in _LEFT_OUT_BYTES)):
        envelope = _envelope_c14n(root, signature) if filtered else _whole_c14n(root, signature)
    canonical_signed_info = None
    if written is not None and start_tags is not None:
        canonical_signed_info = _apex_signed_info(written, start_tags)
    if canonical_signed_info is None:
        canonical_signed_info = _lxml_signed_info(signed_info)
    return envelope, canonical_signed_info


def verified_without_xmlsec(
    root: etree._Element,
    signature: etree._Element,
    payloads: Mapping[str, Payload],
    certificate: x509.Certificate,
    uris: Mapping[str, str] | None = None,
) -> bool:
    """Whether ``signature`` (the first of ``root``'s document, in the profile: checked by
    :func:`msh.security.profile.profile_problems` and the coverage checks before) verifies with
    ``certificate``'s RSA key, computed as :func:`sign_in_place` computes it. True only when every digest and
    the SignatureValue match; False when it cannot tell or they do not: the caller then verifies with
    libxmlsec, which also explains a failure. So this path can only accept what libxmlsec would.

    ``uris`` maps each payload Reference URI to the Content-ID of the part it names
    (:meth:`msh.security.references.Resolution.uri_table`); by default a ``cid:`` URI names its part.
    ``root``'s tree is left as it was (texts in it are marked while it is canonicalised, so no other thread
    may read it meanwhile)."""
    public = certificate.public_key()
    parts_of_signature = _signature_parts(signature)
    if (
        not isinstance(public, rsa.RSAPublicKey)
        or parts_of_signature is None
        or root.getprevious() is not None
        or root.getnext() is not None
        or root.getroottree().docinfo.internalDTD is not None
        or _inherits_xml_attributes((signature, *signature.iterancestors()))
    ):
        return False
    signed_info, signature_value = parts_of_signature
    # XML-DSig §4.3: CanonicalizationMethod, SignatureMethod, then the References, and nothing else.
    children = _elements(signed_info)
    if len(children) < 3 or children[0].tag != _CANONICALIZATION_METHOD or children[1].tag != _SIGNATURE_METHOD:
        return False
    if children[0].get("Algorithm") != CanonicalizationMethod.C14N:
        return False
    algorithm = _RSA_BY_URI.get(children[1].get("Algorithm", ""))
    if algorithm is None:
        return False
    parts = {bare_content_id(cid): part for cid, part in payloads.items()}
    forms: tuple[bytes, bytes | None] | None = None
    try:
        for reference in children[2:]:
            read = _reference_parts(reference) if reference.tag == _REFERENCE else None
            if read is None:
                return False
            transforms, digest_method, digest_value = read
            digest = _DIGEST_BY_URI.get(digest_method.get("Algorithm", ""))
            claimed = _decoded(digest_value)
            uri = reference.get("URI")
            if digest is None or claimed is None or uri is None:
                return False
            if uri == "":
                filtered = _envelope_transforms(transforms)
                if filtered is None or forms is not None:
                    return False  # other Transforms, or a second envelope Reference: libxmlsec's to check
                forms = _canonical_forms(root, signature, signed_info, filtered)
                computed = _HASHLIB[digest](forms[0]).digest()
            else:
                cid = uris.get(uri) if uris is not None else bare_content_id(uri)
                part = parts.get(cid) if cid is not None else None
                if part is None or transforms is not None:
                    return False
                computed = _part_hash(part, digest)
            if claimed != computed:
                return False
        canonical = forms[1] if forms is not None else _lxml_signed_info(signed_info)
    except etree.C14NError:
        return False  # a document C14N 1.0 does not write (a relative namespace name): libxmlsec says why
    value = _decoded(signature_value)
    if canonical is None or value is None:
        return False
    try:
        public.verify(value, canonical, padding.PKCS1v15(), algorithm)
    except InvalidSignature:
        return False
    return True
