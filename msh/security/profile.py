"""The ebMS 2.0 signature profile (ebMS2 §4.1.3): what a signed ebXML message's ``ds:Signature`` holds.

* It is a child of the SOAP Header (ebMS2 §4.1.1), the first ``ds:Signature`` there being the From Party
  MSH's.
* SignedInfo has a CanonicalizationMethod, a SignatureMethod with an Algorithm, and References, in any
  order:
* one with ``URI=""`` for the SOAP envelope (a ``Type`` of ``xmldsig#Object`` and an ``Id`` or not: "purely
  informative"), whose Transforms are enveloped-signature first, the XPath filter second (leaving out the
  elements targeted at the next MSH or the next SOAP node, which change en route:
  :mod:`msh.security.xpath_filter`; see the decision below for its absence), and a canonicalization last
  (SHOULD: it may be absent);
* one per payload part requiring signing, whose URI resolves to the part (:mod:`msh.security.references`).

:func:`signature_template` builds what this MSH signs: C14N 1.0 without comments (RECOMMENDED), the envelope
Reference first, one ``cid:`` Reference per payload part without Transforms (the digest of the part's
content before any Content-Transfer-Encoding).

:func:`profile_problems` says where a received signature is not in the profile, so that it is refused
before any digest is computed:

* a SignedInfo without CanonicalizationMethod or SignatureMethod (both SHALL), or naming a
  canonicalization, signature or digest algorithm this MSH does not implement (an HMAC "signature" among
  them: anyone holding the public certificate could make one);
* not exactly one Reference with ``URI=""``; one without the enveloped-signature Transform first, an
  XPath filter other than the profile's or not second, or another Transform than one canonicalization
  after them (a signature that leaves part of the envelope unsigned, or runs XSLT);
* a payload Reference with Transforms other than a canonicalization (ebMS2 §4.1.3 leaves payload
  Transforms "to the implementation": this MSH runs only canonicalization on a payload; an XPath or XSLT
  Transform could leave part of it unsigned or run code in the verifier);
* a DigestValue that is missing or not base64.

**Decision (ebMS2 §10.1.4 and practice): the envelope signed without the XPath filter.** An envelope
Reference whose Transforms are enveloped-signature and a canonicalization only signs the whole envelope:
everything the filtered form signs, and the nextMSH/next elements too. §10.1.4 prescribes exactly that
form for an Acknowledgment with SOAP actor nextMSH sent by itself, and deployed MSHs write it for business
messages as well (a pharmacy system's signed requests in the Norwegian health network's test traffic, for
one). Refusing it would refuse messages whose every byte is signed, so it is accepted; outside the §10.1.4
case (:func:`profile_notes`) it is reported as a Warning, since an intermediary that adds or removes a
nextMSH element on the way breaks such a signature. A filter that leaves out anything else is refused.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Sequence
from typing import Final

from lxml import etree

from msh.ebms.namespaces import EB, SOAP_ENV, XLINK, XMLDSIG
from msh.security.algorithms import EBMS_XPATH, CanonicalizationMethod, DigestAlgorithm, SignatureAlgorithm, Transform
from msh.security.library import bare_content_id
from msh.security.xpath_filter import xpath_problem

__all__ = [
    "ENVELOPE_REFERENCE",
    "SIGNATURE",
    "ds",
    "ds_children",
    "first_children",
    "first_signature",
    "payload_uris",
    "profile_notes",
    "profile_problems",
    "reference_path",
    "signature_template",
]

SIGNATURE: Final = "//Header/Signature"
"""ebMS2 §4.2.3.2.5 location of the message's signature."""
ENVELOPE_REFERENCE: Final = '//Header/Signature/SignedInfo/Reference[@URI=""]'
"""The location of the Reference that signs the SOAP envelope."""

_HEADER: Final = f"{{{SOAP_ENV}}}Header"
_BODY: Final = f"{{{SOAP_ENV}}}Body"
_MANIFEST: Final = f"{{{EB}}}Manifest"
_REFERENCE: Final = f"{{{EB}}}Reference"
_HREF: Final = f"{{{XLINK}}}href"
_ACCEPTED_C14N: Final = frozenset(CanonicalizationMethod)


def ds(name: str) -> str:
    """The Clark name of the XML-DSig element ``name``."""
    return f"{{{XMLDSIG}}}{name}"


_SIGNATURE: Final = ds("Signature")
_SIGNED_INFO: Final = ds("SignedInfo")
_DS_REFERENCE: Final = ds("Reference")
_XPATH: Final = ds("XPath")
_DIGEST_METHOD: Final = ds("DigestMethod")
_DIGEST_VALUE: Final = ds("DigestValue")
_ACKNOWLEDGMENT: Final = f"{{{EB}}}Acknowledgment"


def _child(parent: etree._Element, tag: str) -> etree._Element | None:
    return next(parent.iterchildren(tag), None)


def first_children(parent: etree._Element) -> dict[object, etree._Element]:
    """The first child of ``parent`` of each tag: ``parent.find(tag)`` for every tag at once (a walk of the
    few children costs less than a tag matcher for each look-up)."""
    first: dict[object, etree._Element] = {}
    for child in parent:
        first.setdefault(child.tag, child)
    return first


def ds_children(parent: etree._Element, *names: str) -> list[etree._Element]:
    """The XML-DSig elements at the child path ``names`` under ``parent``: what
    ``parent.findall("ds:A/ds:B")`` finds, walked with ``iterchildren`` (in C) rather than lxml's
    ElementPath (in Python), which the verification of every signed message would run a few dozen times."""
    found = [parent]
    for name in names:
        tag = ds(name)
        found = [child for element in found for child in element.iterchildren(tag)]
    return found


def first_signature(root: etree._Element) -> etree._Element | None:
    """ebMS2 §4.1.1: the first ``ds:Signature`` child of the SOAP Header (the From Party MSH's), or None."""
    header = _child(root, _HEADER)
    return _child(header, _SIGNATURE) if header is not None else None


def _element(parent: etree._Element, name: str, algorithm: str | None = None) -> etree._Element:
    element = etree.SubElement(parent, ds(name))
    if algorithm is not None:
        element.set("Algorithm", algorithm)
    return element


def signature_template(
    header: etree._Element,
    signature_algorithm: SignatureAlgorithm,
    digest_algorithm: DigestAlgorithm,
    payload_uris: Sequence[str],
    *,
    key_info: bool = True,
    xpath_filter: bool = True,
) -> etree._Element:
    """An unsigned ``ds:Signature`` in the profile, made the last child of the SOAP ``header``, with one
    ``cid:`` Reference per URI of ``payload_uris`` (in that order) and, with ``key_info``, a KeyInfo to
    receive the signer's certificate. Without ``xpath_filter``, the envelope's Transforms are only
    enveloped-signature and C14N: the signature of an Acknowledgment targeted at the next MSH, which the
    filter would leave out (ebMS2 §10.1.4).

    It is built in place, not built apart and moved in: lxml drops a namespace declaration that the
    document already makes under another prefix, and the XPath filter needs its ``SOAP`` prefix declared
    on the ``ds:XPath`` element itself."""
    signature = etree.SubElement(header, ds("Signature"), nsmap={"ds": XMLDSIG})
    signed_info = _element(signature, "SignedInfo")
    # ebMS2 §4.1.3: CanonicalizationMethod C14N 1.0, comments excluded (RECOMMENDED).
    _element(signed_info, "CanonicalizationMethod", CanonicalizationMethod.C14N)
    _element(signed_info, "SignatureMethod", signature_algorithm)
    # ebMS2 §4.1.3: the Reference for the SOAP Envelope has URI "" and these three Transforms, in order.
    envelope = _element(signed_info, "Reference")
    envelope.set("URI", "")
    transforms = _element(envelope, "Transforms")
    _element(transforms, "Transform", Transform.ENVELOPED_SIGNATURE)
    if xpath_filter:
        xpath = _element(transforms, "Transform", Transform.XPATH)
        etree.SubElement(xpath, ds("XPath"), nsmap={"SOAP": SOAP_ENV}).text = EBMS_XPATH
    _element(transforms, "Transform", CanonicalizationMethod.C14N)
    _element(envelope, "DigestMethod", digest_algorithm)
    _element(envelope, "DigestValue")
    for uri in payload_uris:
        # ebMS2 §4.1.3: each payload has a Reference whose URI resolves to it (its Content-ID URI).
        reference = _element(signed_info, "Reference")
        reference.set("URI", uri)
        _element(reference, "DigestMethod", digest_algorithm)
        _element(reference, "DigestValue")
    _element(signature, "SignatureValue")
    if key_info:
        # ebMS2 §4.1.3 step 3: KeyInfo is RECOMMENDED; it carries the certificate (for the reader's
        # information: the verifier uses the certificate the agreement names, never this one).
        data = _element(_element(signature, "KeyInfo"), "X509Data")
        _element(data, "X509Certificate")
    return signature


def payload_uris(root: etree._Element, content_ids: Sequence[str]) -> list[str]:
    """The Reference URI of each payload part of the message ``root``: the Manifest's xlink:href naming it,
    else ``cid:`` + its Content-ID (ebMS2 §4.1.3: "strongly RECOMMENDED that the URI attribute value match
    the xlink:href URI value of the corresponding Manifest/Reference element")."""
    hrefs: dict[str, str] = {}
    # Body/Manifest/Reference, walked with iterchildren (in C) rather than lxml's ElementPath (in Python).
    for body in root.iterchildren(_BODY):
        for manifest in body.iterchildren(_MANIFEST):
            for reference in manifest.iterchildren(_REFERENCE):
                href = reference.get(_HREF) or ""
                if href[:4].lower() == "cid:":
                    hrefs.setdefault(bare_content_id(href), href)
    return [hrefs.get(cid, f"cid:{cid}") for cid in content_ids]


# ------------------------------------------------------------------------------------------ receiving

_ACCEPTED_SIGNATURE: Final = frozenset(SignatureAlgorithm)
_ACCEPTED_DIGEST: Final = frozenset(DigestAlgorithm)


def _known(kind: str, used: str | None, accepted: frozenset[str], where: str) -> tuple[str, str] | None:
    if used is None:
        # ebMS2 §4.1.3: SignedInfo SHALL have a CanonicalizationMethod and a SignatureMethod with an Algorithm.
        return (f"the signature's SignedInfo has no {kind} Algorithm (ebMS2 §4.1.3: it SHALL have one)", where)
    if used not in accepted:
        return (
            f"the signature's {kind} {used!r} is not one this MSH verifies; it verifies {', '.join(sorted(accepted))}",
            where,
        )
    return None


_METHODS: Final = (("CanonicalizationMethod", _ACCEPTED_C14N), ("SignatureMethod", _ACCEPTED_SIGNATURE))


def _method_problems(children: dict[object, etree._Element]) -> list[tuple[str, str]]:
    problems = []
    for kind, accepted in _METHODS:
        element = children.get(ds(kind))
        used = element.get("Algorithm") if element is not None else None
        problem = _known(kind, used, accepted, SIGNATURE)
        if problem is not None:
            problems.append(problem)
    return problems


def _digest_problems(reference: etree._Element, where: str) -> list[tuple[str, str]]:
    problems = []
    children = first_children(reference)
    method = children.get(_DIGEST_METHOD)
    problem = _known("DigestMethod", method.get("Algorithm") if method is not None else None, _ACCEPTED_DIGEST, where)
    if problem is not None:
        problems.append(problem)
    value = children.get(_DIGEST_VALUE)
    text = "".join(((value.text if value is not None else None) or "").split())
    try:
        decoded = base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        decoded = b""
    if not decoded:
        problems.append((f"the signature's Reference URI={reference.get('URI')!r} has no base64 DigestValue", where))
    return problems


def _acknowledgment_alone(signature: etree._Element, references: Sequence[etree._Element]) -> bool:
    """ebMS2 §10.1.4: the signature of an Acknowledgment message sent by itself, with no payloads."""
    header = signature.getparent()
    return (
        header is not None
        and _child(header, _ACKNOWLEDGMENT) is not None
        and all(r.get("URI") == "" for r in references)
    )


def _envelope_reference_problem(reference: etree._Element) -> str | None:
    transforms = ds_children(reference, "Transforms", "Transform")
    algorithms = [t.get("Algorithm", "") for t in transforms]
    if Transform.ENVELOPED_SIGNATURE not in algorithms:
        return 'its Reference URI="" has no enveloped-signature Transform, so it cannot cover the envelope'
    if algorithms[0] != Transform.ENVELOPED_SIGNATURE:
        # ebMS2 §4.1.3: "The first Transform element has an Algorithm attribute with a value of ...enveloped-signature".
        return f"its first Transform is {algorithms[0]!r}, not enveloped-signature"
    rest = list(zip(transforms[1:], algorithms[1:], strict=True))
    if rest and rest[0][1] == Transform.XPATH:
        # ebMS2 §4.1.3: "The second Transform element has a child XPath element that has a value of: ...".
        xpaths = list(rest[0][0].iterchildren(_XPATH))
        if len(xpaths) != 1:
            return f"its XPath Transform has {len(xpaths)} ds:XPath elements, not one"
        problem = xpath_problem(xpaths[0])
        if problem is not None:
            return problem
        rest = rest[1:]
    elif Transform.XPATH in algorithms:
        return (
            f"its XPath filter is Transform {algorithms.index(Transform.XPATH) + 1}; ebMS2 §4.1.3 has it second, "
            "right after enveloped-signature"
        )
    # ebMS2 §4.1.3: the last Transform SHOULD be C14N; another canonicalization, or none, is accepted.
    extra = [algorithm for _, algorithm in rest]
    if len(extra) > 1 or (extra and extra[0] not in _ACCEPTED_C14N):
        return (
            f"its Transforms end with {', '.join(repr(a) for a in extra)}; the ebMS2 §4.1.3 profile has at most "
            "one canonicalization after the XPath filter"
        )
    return None


def _payload_transform_problem(reference: etree._Element) -> str | None:
    algorithms = [t.get("Algorithm", "") for t in ds_children(reference, "Transforms", "Transform")]
    other = [a for a in algorithms if a not in _ACCEPTED_C14N]
    if not other:
        return None
    # ebMS2 §4.1.3: payload Transforms are "left to the implementation"; this MSH runs canonicalization only.
    return (
        f"the signature's Reference {reference.get('URI')!r} has the Transform {other[0]!r}; this MSH verifies "
        "payload References with no Transforms or a canonicalization only (another Transform could leave part "
        "of the payload unsigned)"
    )


def profile_problems(signature: etree._Element) -> list[tuple[str, str]]:
    """Where ``signature`` is not a signature in the profile this MSH verifies, as (description, location)
    pairs (see the module docs). What each payload Reference names is checked apart
    (:func:`msh.security.references.resolve`)."""
    signed_info = _child(signature, _SIGNED_INFO)
    if signed_info is None:
        return [("the ds:Signature has no ds:SignedInfo", SIGNATURE)]
    problems = _method_problems(first_children(signed_info))
    references = list(signed_info.iterchildren(_DS_REFERENCE))
    envelope = [r for r in references if r.get("URI") == ""]
    if len(envelope) != 1:
        # ebMS2 §4.1.3: the Reference for the SOAP Envelope SHALL have a URI attribute value of "".
        problems.append(
            (
                f'the signature has {len(envelope)} References with URI=""; the ebMS2 §4.1.3 profile signs '
                "the envelope with exactly one",
                ENVELOPE_REFERENCE,
            )
        )
    else:
        problem = _envelope_reference_problem(envelope[0])
        if problem is not None:
            problems.append(
                (f"the signature does not cover the envelope as ebMS2 §4.1.3 says: {problem}", ENVELOPE_REFERENCE)
            )
    for reference in references:
        uri = reference.get("URI")
        where = ENVELOPE_REFERENCE if uri == "" else reference_path(uri)
        problems += _digest_problems(reference, where)
        if uri != "":
            problem = _payload_transform_problem(reference)
            if problem is not None:
                problems.append((problem, where))
    return problems


def profile_notes(signature: etree._Element) -> list[tuple[str, str]]:
    """The deviations from the ebMS2 §4.1.3 form that ``signature`` (in the profile: no
    :func:`profile_problems`) is accepted with, as (description, location) pairs: its envelope Reference
    without the XPath filter on a message other than an Acknowledgment sent by itself (see the module docs)."""
    references = ds_children(signature, "SignedInfo", "Reference")
    envelope = next((r for r in references if r.get("URI") == ""), None)
    if envelope is None:
        return []
    algorithms = [t.get("Algorithm") for t in ds_children(envelope, "Transforms", "Transform")]
    if Transform.XPATH in algorithms or _acknowledgment_alone(signature, references):
        return []
    return [
        (
            "the signature covers the whole envelope, without the ebMS2 §4.1.3 XPath filter that leaves out the "
            "elements targeted at the next MSH or the next SOAP node: accepted (every element is signed), but an "
            "intermediary adding or removing such an element breaks it (the profile signs so only an "
            "Acknowledgment sent by itself, ebMS2 §10.1.4)",
            ENVELOPE_REFERENCE,
        )
    ]


def reference_path(uri: str | None) -> str:
    """The location of the signature's Reference with ``uri`` (ebMS2 §4.2.3.2.5: an XPath into the message)."""
    if uri is None:
        return "//Header/Signature/SignedInfo/Reference[not(@URI)]"
    quote = "'" if '"' in uri else '"'
    return f"//Header/Signature/SignedInfo/Reference[@URI={quote}{uri}{quote}]"
