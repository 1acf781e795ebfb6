"""The digests a signature's References stand for, computed afresh (XML-DSig §3.1.1 reference generation).

:func:`reference_digests` runs libxmlsec's reference processing alone on a copy of the message: the
References keep their URIs, Transforms and DigestMethods, and an HMAC key of no importance stands in for
the signer's, so that only the DigestValues are of interest. Two uses:

* a signature that does not verify is explained Reference by Reference (which payload or the envelope was
  changed after signing, :mod:`msh.security.verifying`);
* the ``ds:Reference`` list of a receipt for a message that was not signed is derived from the message as
  the profile would have signed it (ebMS2 §6.3.2.5, :mod:`msh.security.receipts`).
"""

from __future__ import annotations

import base64
import binascii
import copy
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from lxml import etree

from msh.ebms.namespaces import SOAP_ENV
from msh.security.library import Payload, resolving_parts, restrict_transforms, xmlsec
from msh.security.profile import ds, ds_children, first_children, first_signature

__all__ = ["ReferenceDigest", "claimed_digests", "decode_digest", "reference_digests"]

_HMAC = "http://www.w3.org/2001/04/xmldsig-more#hmac-sha256"
_DIGEST_METHOD = ds("DigestMethod")
_DIGEST_VALUE = ds("DigestValue")


@dataclass(frozen=True, slots=True)
class ReferenceDigest:
    """One Reference: its URI, DigestMethod and digest (None when it could not be computed: the part it
    names is not in the message, or a transform failed)."""

    uri: str
    digest_algorithm: str
    digest: bytes | None


def decode_digest(text: str | None) -> bytes | None:
    """The bytes of a DigestValue's base64 text (white space ignored), None when it is not base64."""
    try:
        return base64.b64decode("".join((text or "").split()), validate=True)
    except (binascii.Error, ValueError):
        return None


def claimed_digests(signature: etree._Element) -> list[ReferenceDigest]:
    """The References of ``signature``'s SignedInfo as it states them."""
    out = []
    for reference in ds_children(signature, "SignedInfo", "Reference"):
        children = first_children(reference)
        method = children.get(_DIGEST_METHOD)
        value = children.get(_DIGEST_VALUE)
        out.append(
            ReferenceDigest(
                reference.get("URI", ""),
                method.get("Algorithm", "") if method is not None else "",
                decode_digest(value.text if value is not None else None),
            )
        )
    return out


def reference_digests(
    root: etree._Element,
    payloads: Mapping[str, Payload],
    template: Callable[[etree._Element], etree._Element] | None = None,
    *,
    uris: Mapping[str, str] | None = None,
) -> list[ReferenceDigest]:
    """The digests of the References of the message ``root``'s first signature computed from ``root`` and
    ``payloads`` (``root`` is left as it is: a copy is worked on). With ``template`` (a function making an
    unsigned ``ds:Signature`` the last child of the SOAP Header it is given), that signature is added to
    the copy and computed instead.

    A Reference whose digest cannot be computed (a ``cid:`` part not in ``payloads``, a failing transform)
    has ``digest`` None; the others are computed one by one, so one bad Reference does not hide the rest.
    ``uris``: the only URIs that open, each to the Content-ID of its part (as in
    :func:`~msh.security.library.resolving_parts`); by default ``cid:`` URIs open the part they name.
    """
    work = copy.deepcopy(root)
    if template is not None:
        header = work.find(f"{{{SOAP_ENV}}}Header")
        if header is None:
            raise ValueError("the SOAP envelope has no SOAP Header")
        signature = template(header)
    else:
        found = first_signature(work)
        if found is None:
            raise ValueError("the message has no ds:Signature in its SOAP Header")
        signature = found
    signed_info = signature.find(ds("SignedInfo"))
    if signed_info is None:
        raise ValueError("the ds:Signature has no ds:SignedInfo")
    method = signed_info.find(ds("SignatureMethod"))
    if method is None:
        method = etree.SubElement(signed_info, ds("SignatureMethod"))
    method.set("Algorithm", _HMAC)
    for child in list(signature):
        if child.tag != ds("SignedInfo"):
            signature.remove(child)
    etree.SubElement(signature, ds("SignatureValue"))
    references = signed_info.findall(ds("Reference"))
    out: list[ReferenceDigest] = []
    # One Reference at a time: libxmlsec stops at the first Reference it cannot process.
    for reference in references:
        for other in references:
            if other is not reference and other.getparent() is signed_info:
                signed_info.remove(other)
        if reference.getparent() is None:
            signed_info.append(reference)
        value = reference.find(ds("DigestValue"))
        if value is None:
            value = etree.SubElement(reference, ds("DigestValue"))
        value.text = ""
        method_element = reference.find(ds("DigestMethod"))
        algorithm = method_element.get("Algorithm", "") if method_element is not None else ""
        context = restrict_transforms(xmlsec.SignatureContext(), _HMAC)
        context.key = xmlsec.Key.from_binary_data(xmlsec.constants.KeyDataHmac, b"reference-digests-only")
        digest: bytes | None
        try:
            with resolving_parts(payloads, uris):
                context.sign(signature)
            digest = decode_digest(value.text)
        except xmlsec.Error:
            digest = None
        out.append(ReferenceDigest(reference.get("URI", ""), algorithm, digest))
    return out
