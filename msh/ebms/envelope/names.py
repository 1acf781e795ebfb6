"""The Clark names (``{namespace}local``) of the SOAP 1.1, ebXML, XML, XLink and XML-DSig elements and
attributes the envelope reader and writer meet (SOAP 1.1 §4, ebMS2 §2.3)."""

from __future__ import annotations

from msh.ebms.namespaces import EB, SOAP_ENV, XLINK, XML, XMLDSIG

__all__ = [
    "ACTOR",
    "BODY",
    "DS_REFERENCE",
    "DS_SIGNATURE",
    "EB_ID",
    "EB_VERSION",
    "ENVELOPE",
    "FAULT",
    "HEADER",
    "MUST_UNDERSTAND",
    "XLINK_HREF",
    "XLINK_ROLE",
    "XLINK_TYPE",
    "XML_LANG",
    "eb",
]

ENVELOPE = f"{{{SOAP_ENV}}}Envelope"
HEADER = f"{{{SOAP_ENV}}}Header"
BODY = f"{{{SOAP_ENV}}}Body"
FAULT = f"{{{SOAP_ENV}}}Fault"
MUST_UNDERSTAND = f"{{{SOAP_ENV}}}mustUnderstand"
ACTOR = f"{{{SOAP_ENV}}}actor"
EB_ID = f"{{{EB}}}id"
EB_VERSION = f"{{{EB}}}version"
XML_LANG = f"{{{XML}}}lang"
XLINK_HREF = f"{{{XLINK}}}href"
XLINK_ROLE = f"{{{XLINK}}}role"
XLINK_TYPE = f"{{{XLINK}}}type"
DS_SIGNATURE = f"{{{XMLDSIG}}}Signature"
DS_REFERENCE = f"{{{XMLDSIG}}}Reference"


def eb(local: str) -> str:
    """The Clark name of the ebXML element or attribute ``local`` (``{ebMS namespace}local``)."""
    return f"{{{EB}}}{local}"
