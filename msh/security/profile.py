"""The ebMS 2.0 signature profile (ebMS2 §4.1.3): what a signed ebXML message's ``ds:Signature`` holds.

* It is a child of the SOAP Header (ebMS2 §4.1.1), the first ``ds:Signature`` there being the From Party
  MSH's.
* SignedInfo has CanonicalizationMethod C14N 1.0 without comments, a SignatureMethod, and References:
* one with ``URI=""`` for the SOAP envelope, with the Transforms enveloped-signature, the XPath filter
  :data:`~msh.security.algorithms.EBMS_XPATH` (leaving out the elements targeted at the next MSH or the
  next SOAP node, which change en route), and C14N 1.0 without comments;
* one per payload part, ``URI="cid:..."`` (the Manifest's ``xlink:href`` for it), without Transforms: the
  digest of the part's content before any Content-Transfer-Encoding.

:func:`signature_template` builds it for signing; :func:`profile_problems` says where a received
signature is not one this MSH accepts (a signature that leaves part of the envelope unsigned, or points
anywhere but the envelope and the message's parts).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Final

from lxml import etree

from msh.ebms.namespaces import EB, SOAP_ENV, XLINK, XMLDSIG
from msh.security.algorithms import EBMS_XPATH, CanonicalizationMethod, DigestAlgorithm, SignatureAlgorithm, Transform
from msh.security.library import bare_content_id

__all__ = [
    "ENVELOPE_REFERENCE",
    "SIGNATURE",
    "ds",
    "first_signature",
    "payload_uris",
    "profile_problems",
    "signature_template",
]

SIGNATURE: Final = "//Header/Signature"
"""ebMS2 §4.2.3.2.5 location of the message's signature."""
ENVELOPE_REFERENCE: Final = '//Header/Signature/SignedInfo/Reference[@URI=""]'
"""The location of the Reference that signs the SOAP envelope."""

_HEADER: Final = f"{{{SOAP_ENV}}}Header"
_ACCEPTED_C14N: Final = frozenset(CanonicalizationMethod)


def ds(name: str) -> str:
    """The Clark name of the XML-DSig element ``name``."""
    return f"{{{XMLDSIG}}}{name}"


def first_signature(root: etree._Element) -> etree._Element | None:
    """ebMS2 §4.1.1: the first ``ds:Signature`` child of the SOAP Header (the From Party MSH's), or None."""
    header = root.find(_HEADER)
    return header.find(ds("Signature")) if header is not None else None


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
    for reference in root.iterfind(f"{{{SOAP_ENV}}}Body/{{{EB}}}Manifest/{{{EB}}}Reference"):
        href = reference.get(f"{{{XLINK}}}href") or ""
        if href[:4].lower() == "cid:":
            hrefs.setdefault(bare_content_id(href), href)
    return [hrefs.get(cid, f"cid:{cid}") for cid in content_ids]


# ------------------------------------------------------------------------------------------ receiving


def _normalised_xpath(element: etree._Element) -> str:
    """The XPath text with white space removed, the SOAP envelope namespace's prefix written ``SOAP``
    and single quotes as double quotes."""
    text = "".join((element.text or "").split())
    for prefix, uri in (element.nsmap or {}).items():
        if uri == SOAP_ENV and prefix:
            text = re.sub(rf"(?<![\w.-]){re.escape(prefix)}:", "SOAP:", text)
    return text.replace("'", '"')


_OTHER_ORDER: Final = (
    'not(ancestor-or-self::node()[@SOAP:actor="http://schemas.xmlsoap.org/soap/actor/next"]|'
    'ancestor-or-self::node()[@SOAP:actor="urn:oasis:names:tc:ebxml-msg:actor:nextMSH"])'
)
# The two alternatives of the union in either order select the same nodes.
_ALTERNATIVES: Final = frozenset({"".join(EBMS_XPATH.split()), _OTHER_ORDER})


def _envelope_reference_problem(reference: etree._Element) -> str | None:
    transforms = reference.findall(f"{ds('Transforms')}/{ds('Transform')}")
    algorithms = [t.get("Algorithm", "") for t in transforms]
    if Transform.ENVELOPED_SIGNATURE not in algorithms:
        return 'its Reference URI="" has no enveloped-signature Transform, so it cannot cover the envelope'
    for transform, algorithm in zip(transforms, algorithms, strict=True):
        if algorithm == Transform.XPATH:
            xpath = transform.find(ds("XPath"))
            if xpath is None or _normalised_xpath(xpath) not in _ALTERNATIVES:
                found = " ".join((xpath.text or "").split()) if xpath is not None else "none"
                return (
                    f"its XPath filter ({found!r}) is not the ebMS2 §4.1.3 one, which leaves out only the elements "
                    "targeted at the next MSH or the next SOAP node"
                )
        elif algorithm != Transform.ENVELOPED_SIGNATURE and algorithm not in _ACCEPTED_C14N:
            return f'its Reference URI="" has a Transform {algorithm!r} outside the ebMS2 §4.1.3 profile'
    return None


def profile_problems(signature: etree._Element) -> list[tuple[str, str]]:
    """Where ``signature`` is not a signature in the profile this MSH verifies, as (description, location)
    pairs: no SignedInfo, not exactly one Reference to the envelope (``URI=""``), one whose Transforms would
    leave more than the nextMSH/next elements unsigned, or a Reference to anything but ``""`` and
    ``cid:`` parts (a file or a URL would be fetched by the verifier)."""
    problems: list[tuple[str, str]] = []
    signed_info = signature.find(ds("SignedInfo"))
    if signed_info is None:
        return [("the ds:Signature has no ds:SignedInfo", SIGNATURE)]
    references = signed_info.findall(ds("Reference"))
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
    seen: set[str] = set()
    for reference in references:
        uri = reference.get("URI")
        if uri == "":
            continue
        if uri is None or uri[:4].lower() != "cid:":
            problems.append(
                (
                    f'the signature has a Reference to {uri!r}; only the envelope (URI="") and the message\'s '
                    "payload parts (cid:) are verified, never a file or a URL",
                    SIGNATURE,
                )
            )
        elif uri in seen:
            problems.append((f"the signature references {uri} twice", uri))
        seen.add(uri or "")
    return problems
