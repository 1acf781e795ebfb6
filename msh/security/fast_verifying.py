"""Checking a received RSA signature of the ebMS 2.0 profile without libxmlsec's XPath filter (ebMS2 §4.1.3).

What the signature covers is computed as :mod:`msh.security.fast_signing` computes it when signing.
:func:`verified_without_xmlsec` can only accept: where it
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
import functools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Final

from cryptography import x509
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric import padding, rsa
from cryptography.hazmat.primitives.hashes import HashAlgorithm
from lxml import etree

from msh.security import signature_text
from msh.security.algorithms import CanonicalizationMethod, Transform
from msh.security.fast_signing import (  # what signing computes, computed the same way here
    _ACTOR,
    _DIGEST_BY_URI,
    _HASHLIB,
    _LEFT_OUT,
    _LEFT_OUT_BYTES,
    _RSA_BY_URI,
    _envelope_c14n,
    _inherits_xml_attributes,
    _part_hash,
    _whole_c14n,
)
from msh.security.library import Payload, bare_content_id
from msh.security.profile import ds

__all__ = ["DigestsMatched", "digests_matched", "verified_without_xmlsec"]


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


@dataclass(frozen=True, slots=True)
class DigestsMatched:
    """A received signature whose every Reference digest matched, computed without libxmlsec: what is left
    to check is the SignatureValue over ``canonical_signed_info``, with one certificate's key at a time."""

    canonical_signed_info: bytes
    signature_value: bytes
    algorithm: HashAlgorithm

    def verified_by(self, certificate: x509.Certificate) -> bool:
        """Whether ``certificate``'s RSA key made the SignatureValue (False for another kind of key)."""
        public = certificate.public_key()
        if not isinstance(public, rsa.RSAPublicKey):
            return False
        try:
            public.verify(self.signature_value, self.canonical_signed_info, padding.PKCS1v15(), self.algorithm)
        except InvalidSignature:
            return False
        return True


def digests_matched(
    root: etree._Element,
    signature: etree._Element,
    payloads: Mapping[str, Payload],
    uris: Mapping[str, str] | None = None,
) -> DigestsMatched | None:
    """The part of :func:`verified_without_xmlsec` that does not depend on the key: ``signature``'s
    References digested as :func:`sign_in_place` digests them (the envelope canonicalised once) and compared
    with their DigestValues, SignedInfo canonicalised and the SignatureValue decoded. None when it cannot
    tell or a digest does not match: the caller then verifies with libxmlsec. The arguments are
    :func:`verified_without_xmlsec`'s."""
    parts_of_signature = _signature_parts(signature)
    if (
        parts_of_signature is None
        or root.getprevious() is not None
        or root.getnext() is not None
        or root.getroottree().docinfo.internalDTD is not None
        or _inherits_xml_attributes((signature, *signature.iterancestors()))
    ):
        return None
    signed_info, signature_value = parts_of_signature
    # XML-DSig §4.3: CanonicalizationMethod, SignatureMethod, then the References, and nothing else.
    children = _elements(signed_info)
    if len(children) < 3 or children[0].tag != _CANONICALIZATION_METHOD or children[1].tag != _SIGNATURE_METHOD:
        return None
    if children[0].get("Algorithm") != CanonicalizationMethod.C14N:
        return None
    algorithm = _RSA_BY_URI.get(children[1].get("Algorithm", ""))
    if algorithm is None:
        return None
    parts = {bare_content_id(cid): part for cid, part in payloads.items()}
    forms: tuple[bytes, bytes | None] | None = None
    try:
        for reference in children[2:]:
            read = _reference_parts(reference) if reference.tag == _REFERENCE else None
            if read is None:
                return None
            transforms, digest_method, digest_value = read
            digest = _DIGEST_BY_URI.get(digest_method.get("Algorithm", ""))
            claimed = _decoded(digest_value)
            uri = reference.get("URI")
            if digest is None or claimed is None or uri is None:
                return None
            if uri == "":
                filtered = _envelope_transforms(transforms)
                if filtered is None or forms is not None:
                    return None  # other Transforms, or a second envelope Reference: libxmlsec's to check
                forms = _canonical_forms(root, signature, signed_info, filtered)
                computed = _HASHLIB[digest](forms[0]).digest()
            else:
                cid = uris.get(uri) if uris is not None else bare_content_id(uri)
                part = parts.get(cid) if cid is not None else None
                if part is None or transforms is not None:
                    return None
                computed = _part_hash(part, digest)
            if claimed != computed:
                return None
        canonical = forms[1] if forms is not None else _lxml_signed_info(signed_info)
    except etree.C14NError:
        return None  # a document C14N 1.0 does not write (a relative namespace name): libxmlsec says why
    value = _decoded(signature_value)
    if canonical is None or value is None:
        return None
    return DigestsMatched(canonical, value, algorithm)


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
    libxmlsec, which also explains a failure. So this path can only accept what libxmlsec would. With
    several certificates to try, :func:`digests_matched` once and :meth:`DigestsMatched.verified_by` for
    each does the same work once.

    ``uris`` maps each payload Reference URI to the Content-ID of the part it names
    (:meth:`msh.security.references.Resolution.uri_table`); by default a ``cid:`` URI names its part.
    ``root``'s tree is left as it was (texts in it are marked while it is canonicalised, so no other thread
    may read it meanwhile)."""
    if not isinstance(certificate.public_key(), rsa.RSAPublicKey):
        return False
    matched = digests_matched(root, signature, payloads, uris)
    return matched is not None and matched.verified_by(certificate)
