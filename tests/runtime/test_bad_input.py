"""Bad input to the endpoint gets the right ebMS error or HTTP status, and nothing already stored is lost."""

from __future__ import annotations

import http.client
import os
import ssl
from collections.abc import Iterator
from pathlib import Path

import pytest

from msh.faults.pair import SAMPLES, Pair, make_pair
from msh.runtime.config import load_settings
from msh.runtime.msh import Msh
from tests.runtime.test_api import running, submission


def _context() -> ssl.SSLContext:
    context = ssl.create_default_context(cafile=str(SAMPLES / "keys" / "party-b.cert.pem"))
    context.load_cert_chain(str(SAMPLES / "keys" / "party-a.cert.pem"), str(SAMPLES / "keys" / "party-a.key.pem"))
    return context


def request(
    port: int,
    method: str,
    body: bytes | Iterator[bytes] | None,
    content_type: str | None,
    path: str = "/msh",
    length: int | None = None,
) -> tuple[int, str, bytes]:
    conn = http.client.HTTPSConnection("127.0.0.1", port, timeout=60, context=_context())
    headers = {"SOAPAction": '"ebXML"'}
    if content_type is not None:
        headers["Content-Type"] = content_type
    if length is not None:
        headers["Content-Length"] = str(length)
    try:
        conn.request(method, path, body=body, headers=headers)
        response = conn.getresponse()
        return response.status, response.getheader("Content-Type") or "", response.read()
    finally:
        conn.close()


@pytest.fixture
def receiver(tmp_path: Path) -> Iterator[tuple[Pair, Msh]]:
    pair = make_pair(tmp_path / "pair", proxy=False)
    b = Msh(load_settings(pair.b.config, env={}))
    with running(b):
        yield pair, b
    b.close()


def stored_message(pair: Pair, n: int) -> tuple[str, str, bytes]:
    """A valid message from A to B, as A's store holds it (MessageId, Content-Type, body)."""
    a = Msh(load_settings(pair.a.config, env={}))
    try:
        message_id = a.submit(submission(n))
        with a.store.transaction(readonly=True) as tx:
            stored = tx.get_outbound(message_id)
            assert stored is not None
            with tx.open_blob(stored.body_blob_id) as blob:
                return message_id, stored.content_type, blob.read()
    finally:
        a.close()


def test_bad_input_is_answered_and_loses_nothing(receiver: tuple[Pair, Msh]) -> None:
    pair, b = receiver
    port = pair.b.port
    first_id, content_type, body = stored_message(pair, 1)
    status, _, ack = request(port, "POST", body, content_type)
    assert status == 200 and first_id.encode() in ack and b"Acknowledgment" in ack

    status, ctype, reply = request(port, "POST", b"\x00garbage<<<", "text/xml")
    assert (status, ctype.startswith("text/xml")) == (500, True)
    assert b"Fault" in reply and b"Client" in reply

    status, _, reply = request(port, "POST", b'{"order": 1}', "application/json")
    assert status == 415 and b"Fault" in reply and b"multipart/related nor text/xml" in reply

    status, _, reply = request(port, "POST", body[: len(body) // 2], content_type)
    assert status == 500 and b"Fault" in reply  # the cut falls inside the SOAP part or before the end boundary

    other_id, other_type, other = stored_message(pair, 2)
    status, _, reply = request(port, "POST", other.replace(b"cpa-demo-a-b", b"cpa-nobody"), other_type)
    assert status == 200 and b"ErrorList" in reply and b"ValueNotRecognized" in reply
    assert other_id.encode() in reply  # RefToMessageId names the refused message

    status, _, reply = request(port, "POST", other.replace(b">123456789<", b">111111111<"), other_type)
    assert status == 200 and b"ErrorList" in reply and b'severity="Error"' in reply

    chunk = os.urandom(1 << 20)
    status, _, reply = request(port, "POST", iter([chunk] * 50), "text/xml", length=50 << 20)
    assert status == 500 and b"Fault" in reply

    status, _, _ = request(port, "POST", b"x", "text/xml", length=(64 << 20) + 1)
    assert status == 413

    assert request(port, "GET", None, None)[0] == 200
    assert request(port, "PUT", b"x", "text/xml")[0] == 405
    assert request(port, "POST", body, content_type, path="/elsewhere")[0] == 404

    status, _, again = request(port, "POST", body, content_type)  # a duplicate: the stored acknowledgment
    assert status == 200 and again == ack

    entries = b.inbox(None)
    assert [e.message_id for e in entries] == [first_id]
    status, _, reply = request(port, "POST", other, other_type)  # still serving
    assert status == 200 and b"Acknowledgment" in reply
    assert sorted(e.message_id for e in b.inbox(None)) == sorted([first_id, other_id])
