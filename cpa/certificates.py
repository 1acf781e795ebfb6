"""The certificates of an agreement as written in it: a ``ds:X509Certificate`` element (XML-DSig §4.4.4,
in a CPP/A 2.0 §8.4.33 Certificate or a signature's KeyInfo) read as DER, and what to say when its text is
not base64."""

from __future__ import annotations

import base64

from lxml import etree

from cpa.document import tp_attr, tp_tag

__all__ = ["bad_base64_message", "x509_der"]


def x509_der(node: etree._Element) -> bytes:
    """The DER bytes in the base64 text of ``node``, white space ignored.

    Raises :class:`binascii.Error` (a :class:`ValueError`) when the text is not base64.
    """
    # XML-DSig §4.4.4: X509Certificate holds a base64-encoded X.509v3 certificate (DER).
    return base64.b64decode("".join((node.text or "").split()), validate=True)


def bad_base64_message(node: etree._Element, detail: str = "") -> str:
    """What to say about a ds:X509Certificate whose text is not base64 (found by the schema or by us)."""
    certificate = next(node.iterancestors(tp_tag("Certificate")), None)
    cert_id = (tp_attr(certificate, "certId") or "") if certificate is not None else ""
    return (
        f"Certificate '{cert_id}': ds:X509Certificate is not valid base64{detail}; put the certificate's base64 "
        "(DER) text in it, without the PEM '-----BEGIN CERTIFICATE-----' lines"
    )
