"""The agreement's own signature (CPP/A 2.0 §9, the Signature element: an enveloped XML-DSig signature over
the whole document, in tp:Signature).

:func:`set_aside_templates` runs before the schema check (a template is not a signature, and is often not
schema-valid): an unfilled ds:Signature, as tools leave in generated agreements, is removed with a Warning
and the agreement loads as unsigned. :func:`verify` checks a filled-in signature once the model is built.
"""

from __future__ import annotations

import binascii
from collections.abc import Iterable

from cryptography import x509
from lxml import etree

from cpa.certificates import x509_der
from cpa.document import NS, TP, ProblemSink, path_of, text_of
from cpa.errors import CpaProblem
from cpa.model import Certificate
from msh.errors import Severity
from msh.xmlpath import Locator
from msh.xsd import source_line

__all__ = ["set_aside_templates", "verify"]


def _unfilled(signature: etree._Element) -> str | None:
    """What makes ``signature`` an unfilled template (a ds:Signature as tools generate it before signing),
    or None for a filled-in signature: an empty or missing SignatureValue, an empty or missing DigestValue,
    or a ds:KeyInfo with nothing in it (no text and no attribute in any of its elements)."""
    value = signature.find("ds:SignatureValue", NS)
    if value is None or not text_of(value):
        return "its SignatureValue is empty"
    references = signature.findall("ds:SignedInfo/ds:Reference", NS)
    if any(not text_of(r.find("ds:DigestValue", NS)) for r in references):
        return "a DigestValue is empty"
    key_info = signature.find("ds:KeyInfo", NS)
    if key_info is None:
        return None
    if not any(str(t).strip() for t in key_info.itertext()) and not any(e.attrib for e in key_info.iterdescendants()):
        return "its KeyInfo is empty"
    return None


def set_aside_templates(name: str, root: etree._Element) -> list[CpaProblem]:
    """Remove every unfilled ds:Signature template from ``root`` (and a tp:Signature left with none), with a
    Warning for each: the agreement then loads as unsigned unless a filled-in signature remains."""
    warnings: list[CpaProblem] = []
    locator = Locator()
    for holder in root.findall("tp:Signature", NS):
        signatures = holder.findall("ds:Signature", NS)
        for signature in signatures:
            reason = _unfilled(signature)
            if reason is None:
                continue
            # XML-DSig §3.2: core validation needs the DigestValues, the SignatureValue and a key: no signature.
            warnings.append(
                CpaProblem(
                    name,
                    source_line(signature),
                    path_of(signature, locator),
                    f"the agreement's ds:Signature is an unfilled template ({reason}), so the agreement is loaded "
                    "as unsigned; have it signed, or remove the tp:Signature element if it is not meant to be signed",
                    Severity.WARNING,
                )
            )
            holder.remove(signature)
        if signatures and not holder.findall("ds:Signature", NS):
            root.remove(holder)
    return warnings


# CPP/A 2.0 §9, Signature element; XML-DSig enveloped.
def verify(root: etree._Element, data: bytes, party_certificates: Iterable[Certificate], problem: ProblemSink) -> bool:
    """Verify the agreement's ds:Signature, if any; True when one was present and verified (unfilled
    templates were set aside before, see :func:`set_aside_templates`). ``root`` is the agreement as parsed
    from ``data``; what stops the signature from verifying goes to ``problem``."""
    signatures = root.findall("tp:Signature/ds:Signature", NS)
    if not signatures:
        return False
    if len(signatures) > 1:
        problem(
            signatures[1],
            f"the agreement carries {len(signatures)} signatures; only an agreement signed once (one "
            "enveloped ds:Signature over the whole document) can be verified here: check the signatures "
            "with another tool and load it with signature verification turned off",
        )
        return False
    signature = signatures[0]
    node = signature.find("ds:KeyInfo/ds:X509Data/ds:X509Certificate", NS)
    der, certificate = b"", None
    if node is not None:
        try:
            der = x509_der(node)
            certificate = x509.load_der_x509_certificate(der)
        except (binascii.Error, ValueError):
            certificate = None
    if certificate is None:
        problem(
            signature,
            "the agreement's signature carries no usable ds:X509Certificate in its ds:KeyInfo; sign it again "
            "with the certificate included (it must be one of the parties' Certificate elements)",
        )
        return False
    if not any(der in c.x509 for c in party_certificates):
        problem(
            signature,
            f"the agreement is signed by a certificate that is not one of the parties' "
            f"({certificate.subject.rfc4514_string()}); sign it with the key of a certificate listed in a "
            "PartyInfo/Certificate element",
        )
        return False
    references = signature.findall("ds:SignedInfo/ds:Reference", NS)
    if len(references) != 1 or references[0].get("URI") != "":
        problem(
            signature,
            "the agreement's signature must be one enveloped signature over the whole document (a single "
            'ds:Reference with URI=""); sign it again that way',
        )
        return False
    from signxml.exceptions import SignXMLException
    from signxml.verifier import SignatureConfiguration, XMLVerifier

    config = SignatureConfiguration(location=f"./{{{TP}}}Signature/", expect_references=1)
    try:
        XMLVerifier().verify(data, x509_cert=certificate, expect_config=config)
    except (SignXMLException, ValueError) as exc:
        problem(
            signature,
            f"the agreement's signature does not verify ({exc}); if the document was changed after it was "
            "signed, get the signed original from your partner or have it signed again",
        )
        return False
    return True
