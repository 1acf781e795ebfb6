"""Hostile requests for the endpoint: messages built to make a naive MSH work for a long time.

Each is small on the wire and cost seconds to minutes before the limits of :mod:`msh.safexml` and the
linear location of schema errors (:mod:`msh.xmlpath`): thousands of schema errors among siblings, thousands
of namespace declarations in scope of thousands of foreign elements, tens of thousands of attributes,
megabytes of comments and processing instructions before and after the envelope (each a node of libxml2's
tree: 2 million of them took 300 MB before :class:`~msh.safexml.XmlLimits` counted them), and the heaviest
message the limits still let through. Used by the endpoint tests and by
``scripts/bench_hostile.py``, which measures how promptly the server answers others meanwhile.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["HostileRequest", "hostile_requests"]

_EB = "http://www.oasis-open.org/committees/ebxml-msg/schema/msg-header-2_0.xsd"
_SOAP = "http://schemas.xmlsoap.org/soap/envelope/"


@dataclass(frozen=True, slots=True)
class HostileRequest:
    """One hostile POST: what it is, its Content-Type and body, and whether the limits let it through
    (``refused``: the answer is a SOAP Fault or an ErrorList; otherwise it is an ordinary refusal by the
    agreement check, the message being well formed but from nobody)."""

    name: str
    content_type: str
    body: bytes
    refused: bool


def _envelope(
    envelope_attributes: str = "", header_attributes: str = "", header_extra: str = "", body: str = ""
) -> bytes:
    return (
        f'<SOAP:Envelope xmlns:SOAP="{_SOAP}" xmlns:eb="{_EB}" xmlns:xlink="http://www.w3.org/1999/xlink"'
        f"{envelope_attributes}><SOAP:Header>"
        f'<eb:MessageHeader eb:version="2.0" SOAP:mustUnderstand="1"{header_attributes}>'
        "<eb:From><eb:PartyId>hostile</eb:PartyId></eb:From><eb:To><eb:PartyId>victim</eb:PartyId></eb:To>"
        "<eb:CPAId>none</eb:CPAId><eb:ConversationId>c</eb:ConversationId><eb:Service>s</eb:Service>"
        "<eb:Action>a</eb:Action><eb:MessageData><eb:MessageId>hostile@example.com</eb:MessageId>"
        f"<eb:Timestamp>2026-11-01T09:30:00Z</eb:Timestamp></eb:MessageData>{header_extra}</eb:MessageHeader>"
        f"</SOAP:Header><SOAP:Body>{body}</SOAP:Body></SOAP:Envelope>"
    ).encode()


def hostile_requests() -> list[HostileRequest]:
    """The hostile requests, from the ones the issue measured to the heaviest one the limits allow."""
    text_xml = 'text/xml; charset="UTF-8"'
    declarations = "".join(f' xmlns:n{i}="urn:x:{i}"' for i in range(2000))
    within = "".join(f' xmlns:n{i}="urn:x:{i}"' for i in range(250))
    attributes = "".join(f' a{i}="v"' for i in range(70_000))
    heavy_child = "<f:x " + " ".join(f'f:a{i}="v"' for i in range(100)) + "/>"
    return [
        HostileRequest(
            "4,000 schema errors among siblings",
            text_xml,
            _envelope(
                body='<eb:Manifest eb:version="2.0">' + '<eb:Reference xlink:type="bad"/>' * 4000 + "</eb:Manifest>"
            ),
            True,
        ),
        HostileRequest(
            "256 schema errors among siblings, at the children limit",
            text_xml,
            _envelope(body='<eb:Manifest eb:version="2.0">' + "<eb:Reference/>" * 256 + "</eb:Manifest>"),
            True,
        ),
        HostileRequest(
            "2,000 namespace declarations and 2,000 foreign Body children",
            text_xml,
            _envelope(envelope_attributes=declarations + ' xmlns:f="urn:f"', body="<f:x/>" * 2000),
            True,
        ),
        HostileRequest(
            "70,000 attributes on MessageHeader",
            text_xml,
            _envelope(header_attributes=attributes),
            True,
        ),
        HostileRequest(
            "15 MB of comments before the envelope (2.1 million nodes)",
            text_xml,
            b"<!---->" * 2_100_000 + _envelope(),
            True,
        ),
        HostileRequest(
            "15 MB of processing instructions after the envelope (3 million nodes)",
            text_xml,
            _envelope() + b"<?p?>" * 3_000_000,
            True,
        ),
        HostileRequest(
            "the heaviest the limits allow: 250 namespaces, 250 foreign elements of 100 attributes",
            text_xml,
            _envelope(envelope_attributes=within + ' xmlns:f="urn:f"', body=heavy_child * 250),
            False,
        ),
    ]
