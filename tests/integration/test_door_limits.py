"""Limits at the door: request heads, header counts, requests that stop arriving or drip past their
deadline, header fields that must be single, connections per client.

Party B's MSH is served over plain HTTP on 127.0.0.1 with small limits; each test talks raw HTTP over a
socket (bounded by timeouts), checks the answer, and checks that the server still answers a health check
and acknowledges a valid message afterwards. No test asserts on how long anything took.
"""

from __future__ import annotations

import contextlib
import select
import socket
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.endpoint import RunningMsh, serving, valid_message

TIMEOUT = 30.0
LIMITS = {
    "max_header_bytes": 8192,
    "max_headers": 20,
    "read_timeout": "PT1S",
    "request_timeout": "PT3S",
    "max_connections_per_client": 4,
}


@pytest.fixture
def b(tmp_path: Path) -> Iterator[RunningMsh]:
    with serving(tmp_path / "b", **LIMITS) as running:
        yield running


def connect(b: RunningMsh) -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", b.port), timeout=TIMEOUT)
    sock.settimeout(TIMEOUT)
    return sock


def read_response(sock: socket.socket) -> tuple[int, bytes]:
    """The status and everything the server sent until it closed the connection (or the head and the
    announced body, for a response that keeps the connection open)."""
    data = b""
    while True:
        try:
            chunk = sock.recv(65536)
        except ConnectionResetError:
            break
        if not chunk:
            break
        data += chunk
        head, sep, body = data.partition(b"\r\n\r\n")
        if sep:
            length = next(
                (
                    int(line.split(b":", 1)[1])
                    for line in head.split(b"\r\n")
                    if line.lower().startswith(b"content-length:")
                ),
                None,
            )
            if length is not None and len(body) >= length:
                break
    assert data.startswith(b"HTTP/1.1 "), data[:200]
    return int(data[9:12]), data


def closed_by_server(sock: socket.socket) -> bool:
    try:
        return sock.recv(1) == b""
    except (ConnectionResetError, BrokenPipeError):
        return True


def health(b: RunningMsh) -> int:
    with contextlib.closing(connect(b)) as sock:
        sock.sendall(b"GET /msh HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        return read_response(sock)[0]


def still_acknowledges(b: RunningMsh, message_id: str) -> None:
    content_type, body = valid_message(b.msh, message_id)
    head = (
        f'POST /msh HTTP/1.1\r\nHost: x\r\nContent-Type: {content_type}\r\nSOAPAction: "ebXML"\r\n'
        f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n"
    ).encode()
    with contextlib.closing(connect(b)) as sock:
        sock.sendall(head + body)
        status, data = read_response(sock)
    assert status == 200 and b"Acknowledgment" in data, data[:500]
    assert [e.message_id for e in b.msh.inbox(None)][-1] == message_id


def test_a_head_over_max_header_bytes_is_431_before_it_is_held(b: RunningMsh) -> None:
    with contextlib.closing(connect(b)) as sock:
        sock.sendall(b"POST /msh HTTP/1.1\r\nHost: x\r\nX-Big: ")
        with contextlib.suppress(ConnectionResetError, BrokenPipeError):
            for _ in range(64):  # 4 MiB of one header line, far past the limit; the server stops reading
                sock.sendall(b"a" * 65536)
        status, data = read_response(sock)
        assert status == 431 and b"server.max_header_bytes" in data
        assert closed_by_server(sock)
    assert health(b) == 200
    still_acknowledges(b, "after-big-head@party-a.example")


def test_more_header_fields_than_max_headers_is_431(b: RunningMsh) -> None:
    fields = b"".join(b"X-F%d: v\r\n" % i for i in range(50))
    with contextlib.closing(connect(b)) as sock:
        sock.sendall(b"POST /msh HTTP/1.1\r\nHost: x\r\n" + fields + b"Content-Length: 0\r\n\r\n")
        status, data = read_response(sock)
        assert status == 431 and b"server.max_headers" in data
        assert closed_by_server(sock)
    assert health(b) == 200
    still_acknowledges(b, "after-many-fields@party-a.example")


def test_a_body_that_stops_arriving_is_408_and_nothing_is_stored(b: RunningMsh) -> None:
    before = b.msh.inbox(None)
    with contextlib.closing(connect(b)) as sock:
        sock.sendall(
            b'POST /msh HTTP/1.1\r\nHost: x\r\nContent-Type: text/xml\r\nSOAPAction: "ebXML"\r\n'
            b"Content-Length: 62914560\r\n\r\n" + b"<" * 200
        )
        # Meanwhile the server answers others.
        assert health(b) == 200
        status, data = read_response(sock)
        assert status == 408 and b"server.read_timeout" in data
        assert closed_by_server(sock)
    assert b.msh.inbox(None) == before
    still_acknowledges(b, "after-stalled-body@party-a.example")


def test_a_head_that_stops_arriving_is_408(b: RunningMsh) -> None:
    with contextlib.closing(connect(b)) as sock:
        sock.sendall(b"POST /msh HTTP/1.1\r\nHost: x\r\nContent-Ty")
        status, _ = read_response(sock)
        assert status == 408
        assert closed_by_server(sock)
    assert health(b) == 200


def test_connections_per_client_address_are_bounded(b: RunningMsh) -> None:
    held = [connect(b) for _ in range(4)]
    try:
        for sock in held:  # each is a live keep-alive connection
            sock.sendall(b"GET /msh HTTP/1.1\r\nHost: x\r\n\r\n")
            assert read_response(sock)[0] == 200
        with contextlib.closing(connect(b)) as fifth:
            status, data = read_response(fifth)
            assert status == 503 and b"too many connections" in data
    finally:
        for sock in held:
            sock.close()
    # Once they are closed, the address may connect again (the count follows closes).
    for _ in range(50):
        if health(b) == 200:
            break
    assert health(b) == 200
    still_acknowledges(b, "after-many-connections@party-a.example")


def drip(sock: socket.socket, data: bytes, *, every: float = 0.25) -> int:
    """Send ``data`` a byte at a time, each well within ``server.read_timeout``, until the server answers
    (or closes); returns how many bytes went. Bounded by ``data``'s length."""
    for sent, byte in enumerate(data):
        readable, _, _ = select.select([sock], [], [], every)
        if readable:
            return sent
        try:
            sock.sendall(bytes([byte]))
        except (ConnectionResetError, BrokenPipeError):
            return sent
    return len(data)


@pytest.mark.parametrize("part", ["head", "body"])
def test_a_request_dripped_past_request_timeout_is_408_and_nothing_is_stored(b: RunningMsh, part: str) -> None:
    # RFC 9110 §15.5.9: 408, the server would not wait longer for the request; every byte comes within
    # server.read_timeout (1 s), so only the overall deadline (server.request_timeout, 3 s) ends it.
    before = b.msh.inbox(None)
    head = b'POST /msh HTTP/1.1\r\nHost: x\r\nContent-Type: text/xml\r\nSOAPAction: "ebXML"\r\n'
    with contextlib.closing(connect(b)) as sock:
        if part == "head":
            sent = drip(sock, head + b"X-Slow: " + b"a" * 4000)  # 4,000 bytes: 1,000 s at most
        else:
            sock.sendall(head + b"Content-Length: 4000\r\n\r\n")
            sent = drip(sock, b"<" * 4000)
        assert sent < 4000, "the request was never cut off"
        status, data = read_response(sock)
        assert status == 408 and b"server.request_timeout" in data, data
        assert closed_by_server(sock)
    assert b.msh.inbox(None) == before
    assert health(b) == 200
    still_acknowledges(b, f"after-dripped-{part}@party-a.example")


def test_an_announced_body_gets_its_length_at_min_rate_on_top_of_request_timeout(tmp_path: Path) -> None:
    # The deadline follows the transfer: a body of 4,000 bytes announced by its Content-Length, at
    # server.min_rate 1,000 bytes/s, has 3 s (request_timeout) + 4 s; sent at 1,000 bytes/s, in pieces well
    # within read_timeout, it arrives whole after about 4 s, past request_timeout alone, and is answered
    # (here: the junk body is refused by the MSH), not cut with 408.
    with serving(tmp_path / "b-rate", **{**LIMITS, "min_rate": 1000}) as b:
        head = b'POST /msh HTTP/1.1\r\nHost: x\r\nContent-Type: text/xml\r\nSOAPAction: "ebXML"\r\n'
        with contextlib.closing(connect(b)) as sock:
            sock.sendall(head + b"Content-Length: 4000\r\nConnection: close\r\n\r\n")
            pieces = [b"<" * 250] * 16
            for piece in pieces:  # 16 pieces, 0.25 s apart: bounded
                readable, _, _ = select.select([sock], [], [], 0.25)
                if readable:
                    break
                sock.sendall(piece)
            status, data = read_response(sock)
            assert status != 408, data
        assert health(b) == 200


def test_a_quick_request_is_not_cut_by_the_deadline_of_the_one_before(b: RunningMsh) -> None:
    # The deadline belongs to one request: a keep-alive connection that waits between requests (less than
    # uvicorn's keep-alive time) is not closed by it.
    with contextlib.closing(connect(b)) as sock:
        sock.sendall(b"GET /msh HTTP/1.1\r\nHost: x\r\n\r\n")
        assert read_response(sock)[0] == 200
        deadline = time.monotonic() + 4  # past the 3 s request_timeout of the first request
        while time.monotonic() < deadline:
            readable, _, _ = select.select([sock], [], [], 0.5)
            assert not readable, "the idle connection was answered or closed"
        sock.sendall(b"GET /msh HTTP/1.1\r\nHost: x\r\n\r\n")
        assert read_response(sock)[0] == 200


_SOAP_HEAD = b"POST /msh HTTP/1.1\r\nHost: x\r\nConnection: close\r\n"


@pytest.mark.parametrize(
    ("fields", "says"),
    [
        # RFC 9110 §5.3: a field that is not a list is sent once; §8.3: Content-Type is one media type.
        (b"Content-Type: text/xml\r\nContent-Type: multipart/related\r\n", b"more than one content-type"),
        (b"content-type: text/xml\r\nCONTENT-TYPE: text/xml\r\n", b"more than one content-type"),
        # SOAP 1.1 §6.1.1: SOAPAction is one URI.
        (b'Content-Type: text/xml\r\nSOAPAction: "a"\r\nSOAPAction: "b"\r\n', b"more than one soapaction"),
        # RFC 9112 §3.2: more than one Host is answered 400.
        (b"Host: y\r\nContent-Type: text/xml\r\n", b"more than one host"),
        # RFC 9112 §6.3: a body length that cannot be determined reliably is answered 400 and the
        # connection closed.
        (b"Content-Type: text/xml\r\nContent-Length: 9\r\n", b"more than one Content-Length"),
        (b"Content-Type: text/xml\r\nTransfer-Encoding: chunked\r\n", b"both Transfer-Encoding and Content-Length"),
    ],
    ids=["content-type", "content-type-case", "soapaction", "host", "content-length", "te-and-cl"],
)
def test_a_field_that_must_be_single_sent_twice_is_400_and_nothing_is_stored(
    b: RunningMsh, fields: bytes, says: bytes
) -> None:
    before = b.msh.inbox(None)
    _content_type, body = valid_message(b.msh, "twice@party-a.example")
    soap_action = b"" if b"SOAPAction" in fields else b'SOAPAction: "ebXML"\r\n'
    request = _SOAP_HEAD + fields + soap_action + b"Content-Length: %d\r\n\r\n" % len(body) + body
    with contextlib.closing(connect(b)) as sock:
        sock.sendall(request)
        status, data = read_response(sock)
        assert status == 400 and says in data, data
        assert b"RFC" in data or b"SOAP 1.1" in data
        assert closed_by_server(sock)
    assert b.msh.inbox(None) == before
    still_acknowledges(b, "after-two-fields@party-a.example")
