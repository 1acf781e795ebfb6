"""The HTTP binding's decisions (ebMS2 Appendix B.2): answers to received messages and to our transmissions."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from msh.ebms.model import Envelope, Fault, Party, PartyId, ReplyAddress
from msh.engine import ErrorReceived, TransmitFailed, TransmitSucceeded
from msh.engine.binding import refusal, reply_status, transmission_outcome
from msh.engine.receiving import Discard, InboundDecision, Reject, ReplySync
from msh.errors import EbmsError, EnvelopeError, ErrorCode, MimeProblemError, Severity

T0 = datetime(2026, 11, 1, 9, 30, tzinfo=UTC)
ADDRESS = ReplyAddress(
    from_party=Party((PartyId("a", None),)),
    to_party=Party((PartyId("b", None),)),
    cpa_id="cpa",
    conversation_id="c",
    message_id="m@a",
)


def refuse(
    error: EbmsError, media: str | None = "text/xml", reply_to: ReplyAddress | None = ADDRESS
) -> tuple[int, object]:
    answer = refusal(error, media_type=media, reply_to=reply_to, message_id="err@b", timestamp=T0)
    return answer.status, answer.envelope


def test_a_readable_header_gets_an_error_list_message_whatever_else_is_wrong() -> None:
    status, envelope = refuse(EbmsError("bad eb:version", error_code=ErrorCode.NOT_SUPPORTED, location="//x"))
    assert status == 200
    assert envelope.error_list is not None and envelope.fault is None  # type: ignore[attr-defined]
    header = envelope.message_header  # type: ignore[attr-defined]
    assert header.to_party == ADDRESS.from_party and header.message_data.ref_to_message_id == "m@a"
    assert header.message_data.message_id == "err@b" and header.message_data.timestamp == T0


@pytest.mark.parametrize("error", [EnvelopeError("not XML"), EbmsError("no header at all")])
def test_an_unreadable_envelope_or_header_gets_a_soap_fault_with_500(error: EbmsError) -> None:
    reply_to = ADDRESS if isinstance(error, EnvelopeError) else None
    status, envelope = refuse(error, reply_to=reply_to)
    assert status == 500 and envelope.fault is not None  # type: ignore[attr-defined]


@pytest.mark.parametrize("media", ["application/json", "text/plain", "image/png"])
def test_a_body_that_is_no_ebxml_media_type_gets_415(media: str) -> None:
    status, envelope = refuse(MimeProblemError("not ebXML"), media=media)
    assert status == 415 and envelope.fault is not None  # type: ignore[attr-defined]


@pytest.mark.parametrize("media", ["multipart/related", "text/xml", "application/soap+xml", None])
def test_a_mime_problem_in_an_ebxml_media_type_is_not_415(media: str | None) -> None:
    assert refuse(MimeProblemError("bad package"), media=media)[0] == 200


def test_reply_statuses() -> None:
    envelope = Envelope()
    assert reply_status(InboundDecision(actions=(Discard("x"),)), has_reply=False) == 202
    fault = InboundDecision(actions=(Reject(None, envelope, sync=True, to_endpoint=None),))
    assert reply_status(fault, has_reply=True) == 500
    refused = InboundDecision(actions=(Reject("m@a", envelope, sync=True, to_endpoint=None),))
    assert reply_status(refused, has_reply=True) == 200
    assert reply_status(InboundDecision(actions=(ReplySync(envelope),)), has_reply=True) == 200


@pytest.mark.parametrize("code", ["SOAP:Client", "SOAP-ENV:Client", "Client", "soap:Client.Authentication"])
def test_a_client_soap_fault_in_the_answer_fails_the_message_with_severity_error(code: str) -> None:
    # SOAP 1.1 §4.4.1: Client: "the message should not be resent without change".
    event = transmission_outcome(500, Fault(code, "not well-formed"))
    assert isinstance(event, ErrorReceived) and event.fault
    error = event.error_list.errors[0]
    assert error.severity is Severity.ERROR and f"{code} not well-formed" in error.description.text  # type: ignore[union-attr]


@pytest.mark.parametrize("code", ["SOAP:Server", "SOAP-ENV:Server", "Server", "env:Server.Busy"])
def test_a_server_soap_fault_is_a_lost_transmission_that_was_not_taken(code: str) -> None:
    # SOAP 1.1 §4.4.1: Server: "The message may succeed at a later point in time": resend, and it was not
    # processed (ebMS2 §6.5.7: not a transmission that may have delivered it).
    event = transmission_outcome(500, Fault(code, "the store is unavailable"))
    assert isinstance(event, TransmitFailed)
    assert not event.transmitted and "the store is unavailable" in event.reason


@pytest.mark.parametrize("status", [200, 202, 204])
def test_a_2xx_answer_reached_the_peer(status: int) -> None:
    # ebMS2 B.2.3: "a 2xx code is returned when the posted message was received".
    assert transmission_outcome(status, None) == TransmitSucceeded()


@pytest.mark.parametrize(
    ("status", "transmitted"),
    [(301, True), (400, False), (404, False), (413, False), (500, True), (502, False), (503, False), (504, True)],
)
def test_any_other_answer_without_a_fault_is_a_lost_transmission(status: int, transmitted: bool) -> None:
    # ebMS2 §6.5.7 tells "could not transmit" (Error) from "transmitted, not acknowledged" (Warning): a 4xx
    # refuses the request (RFC 9110 §15.5), 502 and 503 say it was not passed on or served (§15.6.3, §15.6.4);
    # a 500, a 504 or a redirect leave open that it was taken.
    event = transmission_outcome(status, None)
    assert isinstance(event, TransmitFailed) and f"HTTP {status}" in event.reason
    assert event.transmitted is transmitted
