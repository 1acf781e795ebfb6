"""Bad input to the HTTP endpoint gets the right ebMS error or HTTP status, and nothing already stored is lost.

Each test runs party B's MSH (plain HTTP on 127.0.0.1, SQLite in tmp_path), stores one valid message from A,
sends one kind of bad input, checks the answer, checks that the first message is still stored byte for byte
and the inbox unchanged, and checks that the server still acknowledges a new valid message.
"""

from __future__ import annotations

import dataclasses
import http.client
import os
import random
import socket
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from msh.ebms.message import ParseMode, parse_message
from msh.ebms.model import Envelope, Error
from msh.runtime.config import ReceivingSettings
from msh.runtime.msh import Msh
from tests.support.endpoint import CPA_ID, PARTY_ID_TYPE, RunningMsh, party_b_settings, resigned, valid_message

TIMEOUT = 60.0
MIB = 1 << 20
FIRST_ID = "first@party-a.example"
SOAP_CT = 'text/xml; charset="UTF-8"'


@dataclass(frozen=True)
class Reply:
    status: int
    content_type: str | None
    body: bytes
    headers: dict[str, str]

    def envelope(self) -> Envelope:
        assert self.content_type is not None, f"HTTP {self.status} without a Content-Type: {self.body[:300]!r}"
        message = parse_message(self.body, self.content_type, mode=ParseMode.STRICT)
        try:
            return message.envelope
        finally:
            message.close()


def request(
    b: RunningMsh,
    body: bytes | Iterator[bytes] | None,
    content_type: str | None,
    *,
    method: str = "POST",
    path: str = "/msh",
    length: int | None = None,
    chunked: bool = False,
    soap_action: str | None = '"ebXML"',
) -> Reply:
    """One HTTP exchange with the endpoint (new connection, bounded by TIMEOUT); ``soap_action`` None
    sends no SOAPAction header."""
    conn = http.client.HTTPConnection("127.0.0.1", b.port, timeout=TIMEOUT)
    headers = {} if soap_action is None else {"SOAPAction": soap_action}
    if content_type is not None:
        headers["Content-Type"] = content_type
    if length is not None:
        headers["Content-Length"] = str(length)
    try:
        if content_type is None and body is not None and length is None and not chunked:
            # http.client adds no Content-Type of its own; give the length so the body is not chunked.
            headers["Content-Length"] = str(len(body))  # type: ignore[arg-type]
        conn.request(method, path, body=body, headers=headers, encode_chunked=chunked)
        response = conn.getresponse()
        data = response.read()
        return Reply(
            response.status, response.getheader("Content-Type"), data, {k.lower(): v for k, v in response.getheaders()}
        )
    finally:
        conn.close()


def nonsense(total: int, *, seed: int, chunk: int = MIB) -> Iterator[bytes]:
    """``total`` random bytes in chunks of ``chunk`` (memory stays bounded by one chunk)."""
    rng = random.Random(seed)
    sent = 0
    while sent < total:
        n = min(chunk, total - sent)
        sent += n
        yield rng.randbytes(n)


def stored_body(b: RunningMsh, message_id: str) -> bytes | None:
    with b.msh.store.transaction(readonly=True) as tx:
        record = tx.find_inbound(message_id)
        if record is None:
            return None
        with tx.open_blob(record.body_blob_id) as blob:
            return blob.read()


def inbox_ids(b: RunningMsh) -> list[str]:
    return [entry.message_id for entry in b.msh.inbox(None)]


def assert_acknowledges(reply: Reply, message_id: str) -> None:
    assert reply.status == 200, (reply.status, reply.body[:500])
    assert reply.content_type == SOAP_CT
    envelope = reply.envelope()
    assert envelope.error_list is None and envelope.fault is None
    header = envelope.message_header
    assert header is not None
    assert header.action == "Acknowledgment"
    assert header.message_data.ref_to_message_id == message_id
    assert len(envelope.acknowledgments) == 1
    assert envelope.acknowledgments[0].ref_to_message_id == message_id


def assert_soap_fault(reply: Reply, status: int, error_code: str, text: str) -> None:
    """A SOAP Fault with faultcode Client (sender's fault), its faultstring naming ``error_code`` and ``text``."""
    assert reply.status == status, (reply.status, reply.body[:500])
    assert reply.content_type == SOAP_CT
    envelope = reply.envelope()
    assert envelope.fault is not None, reply.body[:500]
    assert envelope.message_header is None and envelope.error_list is None
    assert envelope.fault.faultcode.rpartition(":")[2] == "Client"
    assert f"Error {error_code}" in envelope.fault.faultstring
    assert text in envelope.fault.faultstring


def assert_error_list(reply: Reply, ref_to: str, error_code: str, location: str | None, text: str) -> None:
    """HTTP 200 with an ebXML ErrorList message (one Error, severity Error) about ``ref_to``."""
    [error] = error_list_errors(reply, ref_to)
    assert (error.error_code, error.severity.value, error.location) == (error_code, "Error", location)
    assert error.description is not None and text in error.description.text


def error_list_errors(reply: Reply, ref_to: str) -> tuple[Error, ...]:
    """The Errors of the ebXML ErrorList message (highestSeverity Error) about ``ref_to`` on HTTP 200."""
    assert reply.status == 200, (reply.status, reply.body[:500])
    assert reply.content_type == SOAP_CT
    envelope = reply.envelope()
    assert envelope.fault is None and not envelope.acknowledgments
    header = envelope.message_header
    assert header is not None
    assert header.action == "MessageError"
    assert header.service.value == "urn:oasis:names:tc:ebxml-msg:service"
    assert header.message_data.ref_to_message_id == ref_to
    assert envelope.error_list is not None
    assert envelope.error_list.highest_severity.value == "Error"
    return envelope.error_list.errors


@dataclass(frozen=True)
class First:
    message_id: str
    content_type: str
    body: bytes
    ack: bytes


def store_first(b: RunningMsh) -> First:
    content_type, body = valid_message(b.msh, FIRST_ID)
    reply = request(b, body, content_type)
    assert_acknowledges(reply, FIRST_ID)
    assert inbox_ids(b) == [FIRST_ID]
    assert stored_body(b, FIRST_ID) == body
    return First(FIRST_ID, content_type, body, reply.body)


def assert_nothing_lost(b: RunningMsh, first: First, *, inbox: list[str] | None = None) -> None:
    assert inbox_ids(b) == (inbox if inbox is not None else [first.message_id])
    assert stored_body(b, first.message_id) == first.body


def assert_still_serving(
    b: RunningMsh, first: First, message_id: str, *, inbox_before: list[str] | None = None
) -> None:
    content_type, body = valid_message(b.msh, message_id, payload=b"<order n='2'/>")
    assert_acknowledges(request(b, body, content_type), message_id)
    assert inbox_ids(b) == [*(inbox_before if inbox_before is not None else [first.message_id]), message_id]
    assert stored_body(b, message_id) == body
    assert stored_body(b, first.message_id) == first.body


@pytest.fixture
def first(party_b: RunningMsh) -> First:
    return store_first(party_b)


# ---------------------------------------------------------------------------------------------- tests


def test_a_valid_message_is_stored_and_acknowledged(party_b: RunningMsh, first: First) -> None:
    assert party_b.url == f"http://127.0.0.1:{party_b.port}/msh"
    ack = parse_message(first.ack, SOAP_CT).envelope
    assert ack.message_header is not None and ack.message_header.cpa_id == CPA_ID
    assert_nothing_lost(party_b, first)


def test_garbage_is_a_client_soap_fault(party_b: RunningMsh, first: First) -> None:
    reply = request(party_b, b"\x00\xffgarbage<<<not xml>>>" + os.urandom(64), "text/xml")
    assert_soap_fault(reply, 500, "OtherXml", "not well-formed")
    assert_nothing_lost(party_b, first)
    assert_still_serving(party_b, first, "after-garbage@party-a.example")


def test_a_message_cut_in_half_inside_its_envelope_is_a_client_soap_fault(party_b: RunningMsh, first: First) -> None:
    content_type, body = valid_message(party_b.msh, "cut@party-a.example")
    half = body[: len(body) // 2]
    assert b"</SOAP:Envelope>" not in half  # the cut falls inside the SOAP envelope: no header can be salvaged
    reply = request(party_b, half, content_type)
    # The package ends inside its SOAP part: no closing delimiter, and no header to address an ErrorList to.
    assert_soap_fault(reply, 500, "MimeProblem", "without its closing delimiter")
    assert stored_body(party_b, "cut@party-a.example") is None
    assert_nothing_lost(party_b, first)
    assert_still_serving(party_b, first, "after-cut@party-a.example")


def test_a_message_cut_inside_its_payload_headers_gets_a_mime_problem_error_list(
    party_b: RunningMsh, first: First
) -> None:
    message_id = "cut-headers@party-a.example"
    content_type, body = valid_message(party_b.msh, message_id)
    cut = body[: body.index(b"Content-ID: <payload") + 12]
    reply = request(party_b, cut, content_type)
    # ebMS2 §4.2.4.2: the header is readable, so the sender gets an ErrorList message.
    assert_error_list(reply, message_id, "MimeProblem", None, "ends inside part headers (truncated)")
    assert stored_body(party_b, message_id) is None
    assert_nothing_lost(party_b, first)
    assert_still_serving(party_b, first, "after-cut-headers@party-a.example")


def test_a_package_without_its_closing_delimiter_gets_a_mime_problem_error_list(
    party_b: RunningMsh, first: First
) -> None:
    """Its last payload may be cut short and nothing else tells: it is refused, even in lenient mode, so
    the sender never takes an acknowledgment for a truncated payload (receiving.accept_unterminated_packages
    is off by default)."""
    message_id = "no-close@party-a.example"
    content_type, body = valid_message(party_b.msh, message_id, payload=b"<o>" + b"x" * 5000 + b"</o>")
    cut = body[: body.rindex(b"--=_MSH_")]
    assert party_b.msh.settings.receiving.parse_mode.value == "lenient"
    reply = request(party_b, cut, content_type)
    location = "cid:payload-1-no-close@party-a.example"  # the part that may be cut short
    assert_error_list(reply, message_id, "MimeProblem", location, "without its closing delimiter")
    assert stored_body(party_b, message_id) is None
    assert_nothing_lost(party_b, first)
    assert_still_serving(party_b, first, "after-no-close@party-a.example")


def test_a_body_cut_off_at_the_http_level_is_not_processed(party_b: RunningMsh, first: First) -> None:
    """The client declares the whole length, sends half and closes: nothing is answered or stored."""
    message_id = "http-cut@party-a.example"
    content_type, body = valid_message(party_b.msh, message_id)
    head = (
        f"POST /msh HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: {content_type}\r\nContent-Length: {len(body)}\r\n\r\n"
    ).encode()
    with socket.create_connection(("127.0.0.1", party_b.port), timeout=TIMEOUT) as sock:
        sock.sendall(head + body[: len(body) // 2])
        sock.shutdown(socket.SHUT_WR)
        received = b""
        for _ in range(1000):  # bounded: the server closes the connection
            data = sock.recv(65536)
            if not data:
                break
            received += data
    assert received == b"", received[:300]  # the endpoint gives up on a disconnected client: no answer
    assert stored_body(party_b, message_id) is None
    assert_nothing_lost(party_b, first)
    assert_still_serving(party_b, first, "after-http-cut@party-a.example")


def test_a_wrong_content_type_is_415_with_a_soap_fault(party_b: RunningMsh, first: First) -> None:
    reply = request(party_b, b'{"order": 1}', "application/json")
    assert_soap_fault(
        reply, 415, "MimeProblem", "Content-Type application/json is neither multipart/related nor text/xml"
    )
    assert_nothing_lost(party_b, first)
    assert_still_serving(party_b, first, "after-json@party-a.example")


def test_a_valid_message_with_no_content_type_is_sniffed_and_acknowledged(party_b: RunningMsh, first: First) -> None:
    message_id = "no-ct@party-a.example"
    _, body = valid_message(party_b.msh, message_id)
    reply = request(party_b, body, None)
    assert_acknowledges(reply, message_id)  # lenient mode (the default) finds the boundary in the body
    assert stored_body(party_b, message_id) == body
    assert_nothing_lost(party_b, first, inbox=[FIRST_ID, message_id])
    assert_still_serving(party_b, first, "after-no-ct@party-a.example", inbox_before=[FIRST_ID, message_id])


def test_garbage_with_no_content_type_is_a_client_soap_fault(party_b: RunningMsh, first: First) -> None:
    reply = request(party_b, b"\x00\x01 nothing to sniff here", None)
    assert_soap_fault(reply, 500, "OtherXml", "no Content-Type and is neither XML nor MIME")
    assert_nothing_lost(party_b, first)
    assert_still_serving(party_b, first, "after-no-ct-garbage@party-a.example")


def test_an_unknown_cpaid_gets_an_error_list_and_nothing_is_stored(party_b: RunningMsh, first: First) -> None:
    message_id = "unknown-cpa@party-a.example"
    content_type, body = valid_message(party_b.msh, message_id, cpa_id="cpa-nobody-knows")
    reply = request(party_b, body, content_type)
    assert_error_list(
        reply, message_id, "ValueNotRecognized", "//Header/MessageHeader/CPAId", "'cpa-nobody-knows' names no agreement"
    )
    assert stored_body(party_b, message_id) is None
    assert_nothing_lost(party_b, first)
    assert_still_serving(party_b, first, "after-unknown-cpa@party-a.example")


def test_a_from_party_outside_the_agreement_gets_an_error_list_and_nothing_is_stored(
    party_b: RunningMsh, first: First
) -> None:
    message_id = "stranger@party-a.example"
    content_type, body = valid_message(party_b.msh, message_id, from_party=("555555555", PARTY_ID_TYPE))
    reply = request(party_b, body, content_type)
    assert_error_list(
        reply,
        message_id,
        "Inconsistent",
        "//Header/MessageHeader/From/PartyId",
        "'555555555' (type '" + PARTY_ID_TYPE + "') is not a party of agreement 'cpa-demo-a-b'",
    )
    assert stored_body(party_b, message_id) is None
    assert_nothing_lost(party_b, first)
    assert_still_serving(party_b, first, "after-stranger@party-a.example")


def test_50_mib_of_nonsense_is_refused_with_a_soap_fault(party_b: RunningMsh, first: First) -> None:
    size = 50 * MIB
    assert size < party_b.msh.settings.server.max_body_bytes  # read whole, then parsed and refused
    reply = request(party_b, nonsense(size, seed=1), "text/xml", length=size)
    assert_soap_fault(reply, 500, "OtherXml", "SOAP envelope is over the limit")
    reply = request(party_b, nonsense(size, seed=2), "text/xml", chunked=True)
    assert_soap_fault(reply, 500, "OtherXml", "SOAP envelope is over the limit")
    assert_nothing_lost(party_b, first)
    assert_still_serving(party_b, first, "after-nonsense@party-a.example")


def test_a_declared_length_over_max_body_bytes_is_413(party_b_small: RunningMsh) -> None:
    b = party_b_small
    assert b.msh.settings.server.max_body_bytes == MIB
    first = store_first(b)
    conn = http.client.HTTPConnection("127.0.0.1", b.port, timeout=TIMEOUT)
    try:
        # Only the headers: the endpoint refuses on the declared length, before reading any of the body.
        conn.putrequest("POST", "/msh")
        conn.putheader("Content-Type", "text/xml")
        conn.putheader("Content-Length", str(MIB + 1))
        conn.endheaders()
        response = conn.getresponse()
        status, content_type, body = response.status, response.getheader("Content-Type"), response.read()
    finally:
        conn.close()
    assert (status, content_type) == (413, "text/plain")
    assert body == b"message larger than server.max_body_bytes (1048576 bytes)\n"
    assert_nothing_lost(b, first)
    assert_still_serving(b, first, "after-413@party-a.example")


def test_a_chunked_body_over_max_body_bytes_is_413(party_b_small: RunningMsh) -> None:
    b = party_b_small
    first = store_first(b)
    reply = request(b, nonsense(MIB + 64 * 1024, seed=3, chunk=64 * 1024), "text/xml", chunked=True)
    assert (reply.status, reply.content_type) == (413, "text/plain")
    assert reply.body == b"message larger than server.max_body_bytes (1048576 bytes)\n"
    assert_nothing_lost(b, first)
    assert_still_serving(b, first, "after-chunked-413@party-a.example")


def test_get_put_and_other_paths(party_b: RunningMsh, first: First) -> None:
    get = request(party_b, None, None, method="GET")
    assert (get.status, get.content_type) == (200, "text/plain")
    assert get.body == b"ebXML Messaging 2.0 MSH endpoint: POST messages here\n"
    put = request(party_b, b"<x/>", "text/xml", method="PUT")
    assert (put.status, put.headers.get("allow")) == (405, "POST")
    assert put.body == b"POST ebXML messages here\n"
    content_type, body = valid_message(party_b.msh, "wrong-path@party-a.example")
    elsewhere = request(party_b, body, content_type, path="/msh/other")
    assert (elsewhere.status, elsewhere.content_type) == (404, "text/plain")
    assert elsewhere.body == b"no MSH endpoint here; POST to /msh\n"
    assert stored_body(party_b, "wrong-path@party-a.example") is None
    assert_nothing_lost(party_b, first)
    assert_still_serving(party_b, first, "after-methods@party-a.example")


def test_a_duplicate_gets_the_identical_acknowledgment_and_is_not_stored_again(
    party_b: RunningMsh, first: First
) -> None:
    reply = request(party_b, first.body, first.content_type)
    assert reply.status == 200
    assert reply.body == first.ack
    again = request(party_b, first.body, first.content_type)
    assert (again.status, again.body) == (200, first.ack)
    assert_nothing_lost(party_b, first)
    assert_still_serving(party_b, first, "after-duplicate@party-a.example")


def test_accept_unterminated_packages_lets_lenient_mode_take_a_package_without_its_closing_delimiter(
    tmp_path: Path,
) -> None:
    """For a partner known to send such packages: accepted, acknowledged and stored as received."""
    settings = party_b_settings(tmp_path)
    settings = dataclasses.replace(settings, receiving=ReceivingSettings(accept_unterminated_packages=True))
    msh = Msh(settings)
    try:
        message_id = "no-close-accepted@party-a.example"
        content_type, body = valid_message(msh, message_id, payload=b"<o>" + b"x" * 5000 + b"</o>")
        # Cut before the CRLF of the closing delimiter: the last payload is whole (cut after it, the CRLF
        # would end the payload, and the agreement's signature would refuse the changed payload).
        cut = body[: body.rindex(b"\r\n--=_MSH_")]
        reply, _after = msh.receive_http(cut, content_type)
        assert reply.status == 200 and reply.content_type == SOAP_CT
        ack = parse_message(reply.body, SOAP_CT).envelope
        assert [a.ref_to_message_id for a in ack.acknowledgments] == [message_id]
        with msh.store.transaction(readonly=True) as tx:
            record = tx.find_inbound(message_id)
            assert record is not None
            with tx.open_blob(record.body_blob_id) as blob:
                assert blob.read() == cut
        # Strict mode never accepts it, whatever this setting says.
        strict = Msh(
            dataclasses.replace(
                settings,
                receiving=ReceivingSettings(parse_mode=ParseMode.STRICT, accept_unterminated_packages=True),
                store=dataclasses.replace(settings.store, url=str(tmp_path / "strict.sqlite")),
            )
        )
        try:
            refused, _ = strict.receive_http(cut, content_type)
            assert refused.status == 200 and b"MimeProblem" in refused.body
        finally:
            strict.close()
    finally:
        msh.close()


# ------------------------------------------------------------------ wire rules of ebMS 2.0 (issue 9)


def patched(body: bytes, old: bytes, new: bytes, count: int = 1) -> bytes:
    assert body.count(old) >= count, (old, body[:2000])
    return body.replace(old, new, count)


def assert_refused(b: RunningMsh, first: First, message_id: str, after: str) -> None:
    """Nothing of ``message_id`` stored or delivered, the first message intact, the server still serving."""
    assert stored_body(b, message_id) is None
    assert_nothing_lost(b, first)
    assert_still_serving(b, first, after)


def test_a_manifest_reference_to_a_missing_part_gets_a_mime_problem_error_list(
    party_b: RunningMsh, first: First
) -> None:
    """ebMS2 §3.2.2: MimeProblem, severity Error, in lenient mode too: refused, not acknowledged."""
    message_id = "lost-part@party-a.example"
    content_type, body = valid_message(party_b.msh, message_id)
    body = patched(body, b"Content-ID: <payload-1-", b"Content-ID: <renamed-1-")
    assert party_b.msh.settings.receiving.parse_mode.value == "lenient"
    reply = request(party_b, body, content_type)
    location = "cid:payload-1-lost-part@party-a.example"
    assert_error_list(reply, message_id, "MimeProblem", location, "no part with that Content-ID")
    assert_refused(party_b, first, message_id, "after-lost-part@party-a.example")


@pytest.mark.parametrize(
    ("element", "location"),
    [
        (b"<eb:MessageHeader", "//Header/MessageHeader/@version"),
        (b"<eb:AckRequested", "//Header/AckRequested/@version"),
        (b"<eb:SyncReply", "//Header/SyncReply/@version"),
        (b"<eb:Manifest", "//Body/Manifest/@version"),
    ],
    ids=["MessageHeader", "AckRequested", "SyncReply", "Manifest"],
)
def test_an_unsupported_version_gets_an_error_list_not_a_soap_fault(
    party_b: RunningMsh, first: First, element: bytes, location: str
) -> None:
    """ebMS2 B.2.3, §4.2.4.2: the header can be read (From, To, CPAId, ConversationId, MessageId), so the
    error goes back in an ErrorList, even when the bad eb:version is MessageHeader's own."""
    message_id = f"version-{element[4:].decode().lower()}@party-a.example"
    content_type, body = valid_message(party_b.msh, message_id)
    body = patched(body, element + b' eb:version="2.0"', element + b' eb:version="3.0"')
    reply = request(party_b, body, content_type)
    assert_error_list(reply, message_id, "NotSupported", location, "eb:version '3.0' is not supported")
    assert_refused(party_b, first, message_id, f"after-{message_id}")


def test_errors_in_the_rest_of_the_message_header_still_get_an_error_list(party_b: RunningMsh, first: First) -> None:
    message_id = "bad-timestamp@party-a.example"
    content_type, body = valid_message(party_b.msh, message_id)
    start = body.index(b"<eb:Timestamp>") + len(b"<eb:Timestamp>")
    body = body[:start] + b"ENTRYDATE" + body[body.index(b"</eb:Timestamp>") :]
    reply = request(party_b, body, content_type)
    location = "//Header/MessageHeader/MessageData/Timestamp"
    assert_error_list(reply, message_id, "OtherXml", location, "'ENTRYDATE' is not an xsd:dateTime")
    assert_refused(party_b, first, message_id, "after-bad-timestamp@party-a.example")


SOAP_NEXT = b'SOAP:actor="http://schemas.xmlsoap.org/soap/actor/next"'
TO_PARTY = b'SOAP:actor="urn:oasis:names:tc:ebxml-msg:actor:toPartyMSH"'


def test_a_sync_reply_aimed_at_another_actor_is_refused_at_its_actor(party_b: RunningMsh, first: First) -> None:
    """ebMS2 §4.3.1: SyncReply's actor is SOAP's next; anything else is Inconsistent, never delivered."""
    message_id = "sync-actor@party-a.example"
    content_type, body = valid_message(party_b.msh, message_id)
    # Signed again: the SyncReply aimed at SOAP's next is outside the signature, aimed elsewhere it is in it.
    body = resigned(patched(body, SOAP_NEXT, TO_PARTY), content_type)
    reply = request(party_b, body, content_type)
    assert_error_list(reply, message_id, "Inconsistent", "//Header/SyncReply/@actor", "ebMS2 §4.3.1 requires")
    assert_refused(party_b, first, message_id, "after-sync-actor@party-a.example")


def test_an_ack_requested_aimed_at_neither_msh_actor_is_refused_at_its_actor(party_b: RunningMsh, first: First) -> None:
    """ebMS2 §6.3.1.1: AckRequested targets the To Party MSH or the Next MSH; anything else is
    Inconsistent at its actor (reported with what the agreement says about the missing request)."""
    message_id = "ack-actor@party-a.example"
    content_type, body = valid_message(party_b.msh, message_id)
    body = patched(body, TO_PARTY, b'SOAP:actor="urn:oasis:names:tc:ebxml-msg:actor:fromPartyMSH"')
    reply = request(party_b, body, content_type)
    errors = error_list_errors(reply, message_id)
    actor_errors = [e for e in errors if e.location == "//Header/AckRequested/@actor"]
    assert [(e.error_code, e.severity.value) for e in actor_errors] == [("Inconsistent", "Error")]
    assert actor_errors[0].description is not None and "ebMS2 §6.3.1.1" in actor_errors[0].description.text
    assert all(e.severity.value == "Error" for e in errors)
    assert_refused(party_b, first, message_id, "after-ack-actor@party-a.example")


def test_a_request_without_soapaction_is_400_with_a_soap_fault_and_nothing_is_stored(
    party_b: RunningMsh, first: First
) -> None:
    """ebMS2 B.2.2, SOAP 1.1 §6.1.1: the header is mandatory; the request is not processed at all."""
    message_id = "no-soapaction@party-a.example"
    content_type, body = valid_message(party_b.msh, message_id)
    reply = request(party_b, body, content_type, soap_action=None)
    assert_soap_fault(reply, 400, "MimeProblem", "no SOAPAction header")
    assert party_b.msh.counters["no-soapaction"] == 1
    assert_refused(party_b, first, message_id, "after-no-soapaction@party-a.example")


@pytest.mark.parametrize("value", ["ebXML", '""', "urn:nhs:names:services:psis/MCCI_IN010000UK13"])
def test_any_soapaction_value_is_taken(party_b: RunningMsh, first: First, value: str) -> None:
    """ebMS2 B.2.2 says the value MAY be "ebXML"; other MSHs send a service URI (NHS Spine) or nothing."""
    message_id = "soapaction-value@party-a.example"
    content_type, body = valid_message(party_b.msh, message_id)
    assert_acknowledges(request(party_b, body, content_type, soap_action=value), message_id)
    assert stored_body(party_b, message_id) == body


def events_of(b: RunningMsh, kind: str) -> list[dict[str, object]]:
    with b.msh.store.transaction(readonly=True) as tx:
        return [e.detail for e in tx.list_events(limit=10_000) if e.kind == kind]


@pytest.mark.parametrize(
    ("old", "new"),
    [(b"<order n='1'/>", b"<order n='9'/>"), (b"<eb:ConversationId>conv-", b"<eb:ConversationId>other-")],
    ids=["other payload", "other header"],
)
def test_the_same_message_id_with_other_content_is_a_duplicate_recorded_as_a_conflict(
    party_b: RunningMsh, first: First, old: bytes, new: bytes
) -> None:
    """ebMS2 §6.5.6: 'a "duplicate message" - a message containing the same MessageId as a previously received
    message'; §6.5.2 1: it gets the stored Acknowledgment and "MUST NOT" be delivered. Other business content
    under a known MessageId is recorded as a conflict with both digests, for the operator to see."""
    # Signed again as A: the partner's own other message, not a forgery (which the signature refuses).
    other = resigned(patched(first.body, old, new), first.content_type)
    reply = request(party_b, other, first.content_type)
    assert (reply.status, reply.body) == (200, first.ack)
    assert_nothing_lost(party_b, first)
    with party_b.msh.store.transaction(readonly=True) as tx:
        record = tx.find_inbound(FIRST_ID)
    assert record is not None and record.content_digest is not None and record.duplicate_count == 1
    [conflict] = events_of(party_b, "conflicting-duplicate")
    assert conflict["storedDigest"] == record.content_digest
    assert isinstance(conflict["receivedDigest"], str) and conflict["receivedDigest"].startswith("content-sha256:")
    assert conflict["receivedDigest"] != record.content_digest
    assert party_b.msh.counters["conflicting-duplicates"] == 1
    again = request(party_b, first.body, first.content_type)
    assert (again.status, again.body) == (200, first.ack)
    assert party_b.msh.counters["duplicates"] == 2
    assert_still_serving(party_b, first, "after-conflict@party-a.example")


def test_an_identical_message_framed_otherwise_is_a_true_duplicate(party_b: RunningMsh, first: First) -> None:
    """A copy whose MIME framing changed on the way (another boundary) carries the same header, body and
    payload: it gets the stored acknowledgment, byte for byte."""
    boundary = first.content_type.split('boundary="', 1)[1].split('"', 1)[0].encode()
    reframed_type = first.content_type.replace(boundary.decode(), "reframed-boundary")
    reframed = first.body.replace(boundary, b"reframed-boundary")
    assert reframed != first.body
    reply = request(party_b, reframed, reframed_type)
    assert (reply.status, reply.body) == (200, first.ack)
    assert events_of(party_b, "conflicting-duplicate") == []
    assert_nothing_lost(party_b, first)
    assert_still_serving(party_b, first, "after-reframed@party-a.example")


# ------------------------------------------------------------------------- every 500 carries a SOAP Fault


@pytest.mark.parametrize(
    "failure",
    [RuntimeError("store fell over \x00 with \x1b bytes \ud800"), MemoryError(), ValueError("x" * 100_000)],
    ids=["xml-illegal-text", "no-text", "huge-text"],
)
def test_a_failure_inside_the_msh_is_a_500_with_a_server_soap_fault(
    party_b: RunningMsh, first: First, monkeypatch: pytest.MonkeyPatch, failure: BaseException
) -> None:
    async def fail(*args: object, **kwargs: object) -> object:
        raise failure

    content_type, body = valid_message(party_b.msh, "fails@party-a.example")
    with monkeypatch.context() as patch:
        patch.setattr(party_b.msh.core.writer, "run", fail)
        reply = request(party_b, body, content_type)
    assert reply.status == 500, (reply.status, reply.body[:300])
    assert reply.content_type == SOAP_CT
    fault = reply.envelope().fault
    assert fault is not None and fault.faultcode == "SOAP:Server"
    assert len(fault.faultstring) <= 4096
    assert_nothing_lost(party_b, first)
    assert_still_serving(party_b, first, "after-failure@party-a.example")


def test_even_a_failure_outside_the_msh_is_a_500_with_a_soap_fault(
    party_b: RunningMsh, first: First, monkeypatch: pytest.MonkeyPatch
) -> None:
    async def fail(*args: object, **kwargs: object) -> object:
        raise RuntimeError("handle_http itself failed \x00")

    content_type, body = valid_message(party_b.msh, "fails2@party-a.example")
    with monkeypatch.context() as patch:
        patch.setattr(party_b.msh, "handle_http", fail)
        reply = request(party_b, body, content_type)
    assert reply.status == 500 and reply.content_type == SOAP_CT
    fault = reply.envelope().fault
    assert fault is not None and fault.faultcode == "SOAP:Server"
    assert_still_serving(party_b, first, "after-failure2@party-a.example")


# -- junk after a valid message: refused whole, or stored and answered, never stored and refused -------


def test_junk_after_the_closing_mime_delimiter_is_ignored_and_the_message_stored_and_acknowledged(
    party_b: RunningMsh, first: First
) -> None:
    # RFC 2046 §5.1.1: what follows the close-delimiter is the epilogue, which a reader ignores; the package
    # itself is whole and signed, so it is stored (as received) and acknowledged (ebMS2 §6.3.1).
    content_type, body = valid_message(party_b.msh, "epilogue@party-a.example")
    assert body.rstrip().endswith(b"--")
    junk = body + b"\r\nthis is an epilogue\r\n\x00\xff<not xml>\r\n--" + b"x" * 1000
    assert_acknowledges(request(party_b, junk, content_type), "epilogue@party-a.example")
    assert stored_body(party_b, "epilogue@party-a.example") == junk
    assert inbox_ids(party_b) == [first.message_id, "epilogue@party-a.example"]
    # Sent again, it is the same message: the duplicate is answered with the same acknowledgment.
    assert_acknowledges(request(party_b, junk, content_type), "epilogue@party-a.example")
    assert inbox_ids(party_b) == [first.message_id, "epilogue@party-a.example"]
    assert_nothing_lost(party_b, first, inbox=[first.message_id, "epilogue@party-a.example"])


@pytest.mark.parametrize(
    "junk",
    [b"junk", b"<eb:More/>", b"\x00\xff", b"<SOAP:Envelope/>"],
    ids=["text", "element", "binary", "second-envelope"],
)
def test_junk_after_a_bare_soap_envelope_is_refused_whole(party_b: RunningMsh, first: First, junk: bytes) -> None:
    # ebMS2 §2.1.2: a message without payloads is the bare SOAP envelope; XML 1.0 §2.1 (document ::= prolog
    # element Misc*) leaves nothing but comments, processing instructions and white space after its root
    # element, so the body is not an envelope: a SOAP Fault, and nothing of it is stored or acknowledged.
    content_type, body = valid_message(party_b.msh, "bare-junk@party-a.example", payload=None)
    assert content_type.startswith("text/xml")
    reply = request(party_b, body + junk, content_type)
    assert_soap_fault(reply, 500, "OtherXml", "not well-formed")
    assert stored_body(party_b, "bare-junk@party-a.example") is None
    assert_nothing_lost(party_b, first)
    # The same envelope without the junk is a message like any other.
    assert_acknowledges(request(party_b, body, content_type), "bare-junk@party-a.example")
    assert stored_body(party_b, "bare-junk@party-a.example") == body


def test_junk_after_the_envelope_inside_the_soap_part_is_refused_whole(party_b: RunningMsh, first: First) -> None:
    # ebMS2 §2.1.3: the SOAP part holds the envelope; junk after its root element in that part makes it no XML
    # document (XML 1.0 §2.1), so the package is refused whole and nothing is stored.
    content_type, body = valid_message(party_b.msh, "part-junk@party-a.example")
    end = body.index(b"</SOAP:Envelope>") + len(b"</SOAP:Envelope>")
    reply = request(party_b, body[:end] + b"junk" + body[end:], content_type)
    assert_soap_fault(reply, 500, "OtherXml", "not well-formed")
    assert stored_body(party_b, "part-junk@party-a.example") is None
    assert_nothing_lost(party_b, first)
