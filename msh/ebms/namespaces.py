"""Namespace URIs and fixed tokens of ebMS 2.0 (ebMS2 §2.3, Appendix A) and SOAP 1.1."""

from __future__ import annotations

__all__ = [
    "ACTOR_NEXT_MSH",
    "ACTOR_TO_PARTY_MSH",
    "EB",
    "EBMS_VERSION",
    "NSMAP",
    "SERVICE_MSH",
    "SOAP_ACTOR_NEXT",
    "SOAP_ENV",
    "XLINK",
    "XML",
    "XMLDSIG",
    "XSI",
]

# ebMS2 Appendix A: the target namespace of msg-header-2_0.xsd.
EB = "http://www.oasis-open.org/committees/ebxml-msg/schema/msg-header-2_0.xsd"
# SOAP 1.1 envelope namespace.
SOAP_ENV = "http://schemas.xmlsoap.org/soap/envelope/"
XLINK = "http://www.w3.org/1999/xlink"
XMLDSIG = "http://www.w3.org/2000/09/xmldsig#"
XML = "http://www.w3.org/XML/1998/namespace"
XSI = "http://www.w3.org/2001/XMLSchema-instance"

# ebMS2 §2.3.8: the version attribute value of every ebXML SOAP extension element.
EBMS_VERSION = "2.0"
# ebMS2 §6.3.1.1 / §10.1: SOAP actor URIs of AckRequested and Acknowledgment.
ACTOR_TO_PARTY_MSH = "urn:oasis:names:tc:ebxml-msg:actor:toPartyMSH"
ACTOR_NEXT_MSH = "urn:oasis:names:tc:ebxml-msg:actor:nextMSH"
# SOAP 1.1 §4.2.2: the "next" actor (used by SyncReply, ebMS2 §4.3).
SOAP_ACTOR_NEXT = "http://schemas.xmlsoap.org/soap/actor/next"
# ebMS2 §4.2.4.1 / §7: the Service of MSH signals (Acknowledgment, error, ping, status).
SERVICE_MSH = "urn:oasis:names:tc:ebxml-msg:service"

NSMAP = {"SOAP": SOAP_ENV, "eb": EB, "xlink": XLINK, "ds": XMLDSIG}
