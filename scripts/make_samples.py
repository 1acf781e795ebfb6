#!/usr/bin/env python3
"""Write the project's sample ebXML messages into samples/messages/ (deterministic: fixed ids and times).

Run from the checkout: ``python scripts/make_samples.py``. The files are committed; this script documents
how they were made and rebuilds them after a codec change.
"""

from __future__ import annotations

import argparse
import base64
from datetime import UTC, datetime
from pathlib import Path

from msh.ebms import model as m
from msh.ebms.errorlist import error_message
from msh.ebms.message import build_message
from msh.ebms.mime import AttachmentSpec, PartBody
from msh.ebms.namespaces import ACTOR_TO_PARTY_MSH, SERVICE_MSH
from msh.errors import ErrorCode, Issue, Severity

T0 = datetime(2026, 11, 1, 9, 30, 0, tzinfo=UTC)
A = m.Party((m.PartyId("123456789", "urn:oasis:names:tc:ebcore:partyid-type:iso6523:0088"),), role="Buyer")
B = m.Party((m.PartyId("987654321", "urn:oasis:names:tc:ebcore:partyid-type:iso6523:0088"),), role="Seller")
ORDER = b"""<?xml version="1.0" encoding="UTF-8"?>
<Order xmlns="urn:example:orders"><Id>PO-1001</Id><Line sku="W-1" qty="12"/><Note>Caf\xc3\xa9 Zo\xc3\xab</Note></Order>
"""
# Bytes 0..255 repeated: a binary payload that survives only a binary-safe codec.
BINARY = bytes(range(256)) * 16


def header(
    message_id: str,
    action: str,
    *,
    service: str = "urn:example:services:ordering",
    ref: str | None = None,
    dup: bool = True,
    frm: m.Party = A,
    to: m.Party = B,
) -> m.MessageHeader:
    return m.MessageHeader(
        from_party=frm,
        to_party=to,
        cpa_id="cpa-demo-a-b",
        conversation_id="conv-20261101-0001",
        service=m.Service(service),
        action=action,
        message_data=m.MessageData(
            message_id,
            T0,
            ref_to_message_id=ref,
            time_to_live=datetime(2026, 11, 2, 9, 30, tzinfo=UTC) if dup else None,
        ),
        duplicate_elimination=dup,
    )


def http_capture(content_type: str, body: bytes) -> bytes:
    head = (
        "POST /msh/inbound HTTP/1.1\r\nHost: 127.0.0.1:8081\r\n"
        f'Content-Type: {content_type}\r\nSOAPAction: "ebXML"\r\nContent-Length: {len(body)}\r\n\r\n'
    )
    return head.encode("ascii") + body


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=str(Path(__file__).resolve().parent.parent / "samples" / "messages"))
    out = Path(parser.parse_args().out)
    out.mkdir(parents=True, exist_ok=True)

    order_env = m.Envelope(
        message_header=header("order-0001@a.example", "NewOrder"),
        ack_requested=(m.AckRequested(signed=False, actor=ACTOR_TO_PARTY_MSH),),
        sync_reply=m.SyncReply(),
        manifest=m.Manifest(
            (
                m.Reference(
                    "cid:order@a.example",
                    descriptions=(m.Description("Purchase order", "en"),),
                    schemas=(m.Schema("urn:example:orders:order.xsd", "1.0"),),
                ),
                m.Reference("cid:scan@a.example", descriptions=(m.Description("Signed scan", "en"),)),
            )
        ),
    )
    attachments = [
        AttachmentSpec(
            "order@a.example", "application/xml; charset=UTF-8", PartBody.from_bytes(ORDER), transfer_encoding="8bit"
        ),
        AttachmentSpec(
            "scan@a.example", "application/octet-stream", PartBody.from_bytes(BINARY), transfer_encoding="base64"
        ),
    ]
    ctype, body = build_message(order_env, attachments, start_id="soap@a.example", boundary="MSH-demo-boundary-1")
    (out / "order-request.http").write_bytes(http_capture(ctype, body))

    ack_env = m.Envelope(
        message_header=header(
            "ack-0001@b.example",
            "Acknowledgment",
            service=SERVICE_MSH,
            ref="order-0001@a.example",
            dup=False,
            frm=B,
            to=A,
        ),
        acknowledgments=(m.Acknowledgment(T0, "order-0001@a.example", from_party=B),),
    )
    (out / "acknowledgment.xml").write_bytes(build_message(ack_env)[1])

    err_env = error_message(
        Issue(
            ErrorCode.VALUE_NOT_RECOGNIZED,
            Severity.ERROR,
            "Action NewOrdr is not in agreement cpa-demo-a-b",
            "//Header/MessageHeader/Action",
        ),
        in_reply_to=header("order-0002@a.example", "NewOrdr"),
        message_id="err-0001@b.example",
        timestamp=T0,
    )
    (out / "error-message.xml").write_bytes(build_message(err_env)[1])

    status_env = m.Envelope(
        message_header=header("status-0001@a.example", "StatusRequest", service=SERVICE_MSH, dup=False),
        status_request=m.StatusRequest("order-0001@a.example"),
    )
    ctype, body = build_message(status_env, multipart=True, start_id="soap@a.example", boundary="MSH-demo-boundary-2")
    (out / "status-request.mime").write_bytes(f"Content-Type: {ctype}\r\n\r\n".encode() + body)

    # Real-world quirks, accepted only in lenient mode: start without angle brackets, no charset on the
    # SOAP part, the SOAP part itself base64-encoded, and an unqualified version attribute.
    quirky_soap = build_message(
        m.Envelope(
            message_header=header("ping-0001@a.example", "Ping", service=SERVICE_MSH, dup=False),
        )
    )[1].replace(b'eb:version="2.0"', b'version="2.0"')
    quirky = (
        b"--q-boundary\r\nContent-ID: <soap@a.example>\r\nContent-Type: text/xml\r\n"
        b"Content-Transfer-Encoding: base64\r\n\r\n" + base64.encodebytes(quirky_soap) + b"\r\n--q-boundary--\r\n"
    )
    (out / "quirky-ping.http").write_bytes(
        http_capture('multipart/related; type="text/xml"; boundary="q-boundary"; start="soap@a.example"', quirky)
    )

    (out / "hostile-xxe.xml").write_bytes(
        b'<?xml version="1.0"?>\n<!DOCTYPE e [<!ENTITY x SYSTEM "file:///etc/passwd">]>\n'
        b'<SOAP:Envelope xmlns:SOAP="http://schemas.xmlsoap.org/soap/envelope/"><SOAP:Body>&x;</SOAP:Body>'
        b"</SOAP:Envelope>\n"
    )
    for path in sorted(out.iterdir()):
        if path.suffix != ".py":  # the data package's __init__.py (msh.sample_messages) is not a sample
            print(f"wrote {path.name} ({path.stat().st_size} bytes)")


if __name__ == "__main__":
    main()
