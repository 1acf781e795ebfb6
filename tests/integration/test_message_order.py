"""MessageOrder (ebMS2 §9) with real servers on loopback.

Partners A and B run ``msh serve`` under the demo agreement with message order guaranteed (and SyncReply
off, as ebMS2 §9.1 requires), over HTTPS with mutual TLS, B behind a lossy proxy that also delays each
message by a random time (so messages sent at once arrive in another order). The test process submits to
A's store in several conversations (A's timer loop transmits them) and reads both stores afterwards. Every
wait is bounded. The last test plays A itself against B's real HTTP server, to send a sequence with a
number that never comes.
"""

from __future__ import annotations

import http.client
import http.server
import random
import threading
import time
import tomllib
from collections import defaultdict
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import ClassVar

import pytest

from cpa.resolve import Exchange
from msh.ebms.message import ParseMode, parse_message
from msh.ebms.model import Envelope, Error, MessageOrder, SequenceStatus
from msh.engine import OutboundStatus
from msh.errors import ErrorCode, Severity
from msh.faults.pair import ACTION, PARTY_B, SERVICE, Pair, make_pair
from msh.faults.proxy import RunningProxy, run_in_thread
from msh.runtime.compose import Payload, Submission, compose
from msh.runtime.config import Settings, load_settings, settings_from_mapping
from msh.runtime.msh import Msh
from msh.store import open_store
from msh.store.api import InboxState
from msh.testing.threaded import serving_in_thread
from tests.support.agreement_files import with_message_order
from tests.support.endpoint import CONFIG_DIR, CPA_ID, PARTY_A, signed_as_a
from tests.support.outcomes import wait_final

CONVERSATIONS = 10
MESSAGES = 1000


@pytest.fixture
def ordered_pair(tmp_path: Path) -> Iterator[tuple[Pair, RunningProxy]]:
    # Retries 12: a loss rate applies to each TLS handshake flight too, so an attempt on a fresh connection
    # fails more often than the rate says; 13 attempts make a spurious DeliveryFailure vanishingly rare.
    pair = make_pair(tmp_path / "pair", retries=12, message_order=True)
    target = ("127.0.0.1", pair.b.port)
    with run_in_thread(("127.0.0.1", pair.b_public_port), target, seed=7) as proxy:
        try:
            yield pair, proxy
        finally:
            pair.stop()


def test_a_thousand_ordered_messages_in_ten_conversations_through_losses_and_reordering(
    ordered_pair: tuple[Pair, RunningProxy],
) -> None:
    # ebMS2 §9.1.1: "A MSH that receives a message with a SequenceNumber element MUST NOT pass the message to an
    # application until all the messages with a lower SequenceNumber have been passed to the application";
    # each SequenceNumber "is unique within the ConversationId", set to zero on the first message "and then
    # incremented by one for each subsequent message sent"; §6.5.2/§6.5.3: each message delivered once.
    pair, proxy = ordered_pair
    pair.b.start()
    pair.a.start()
    proxy.set_loss(0.2, 0.2)
    proxy.set_jitter(0.3)
    rng = random.Random(5)
    sent: dict[str, list[str]] = defaultdict(list)
    msh = Msh(load_settings(pair.a.config, env={}))
    try:
        for n in range(MESSAGES):
            conversation = f"conv-{rng.randrange(CONVERSATIONS)}"
            body = f"<order n='{n}'>{'x' * 500}</order>".encode()
            submission = Submission(
                PARTY_B, SERVICE, ACTION, (Payload(body, "application/xml"),), conversation_id=conversation
            )
            sent[conversation].append(msh.submit(submission))
        ids = [m for group in sent.values() for m in group]
        final = wait_final(msh, ids, timeout=600)
        with msh.store.transaction(readonly=True) as tx:
            numbers = {m: tx.get_outbound(m).sequence_number for m in ids}  # type: ignore[union-attr]
    finally:
        msh.close()
    stats = proxy.stats()
    assert stats.requests_dropped > 0 and stats.responses_dropped > 0
    assert final == dict.fromkeys(ids, OutboundStatus.DELIVERED)
    for group in sent.values():
        assert [numbers[m] for m in group] == list(range(len(group)))  # 0, 1, 2, ... per conversation
    # B: every message once, none held or abandoned, and the inbox offers each conversation in sequence order.
    with open_store(str(pair.b.store), migrate=False) as store, store.transaction(readonly=True) as tx:
        entries = tx.inbox_list(None, limit=100_000)
        events = tx.list_events(0, limit=1_000_000)
        conversation_of = {e.message_id: tx.find_inbound(e.message_id).conversation_id for e in entries}  # type: ignore[union-attr]
    assert sorted(e.message_id for e in entries) == sorted(ids)
    assert {e.state for e in entries} == {InboxState.NEW}
    offered: dict[str, list[str]] = defaultdict(list)
    for entry in entries:  # inbox_list is the order the inbox offers them in
        offered[conversation_of[entry.message_id]].append(entry.message_id)
    assert dict(offered) == dict(sent)
    kinds = [e.kind for e in events]
    held = sum(1 for e in events if e.kind == "received" and e.detail.get("held"))
    assert held > 0 and kinds.count("released") == held  # the network did reorder; each held one followed later
    assert "abandoned" not in kinds and kinds.count("received") == MESSAGES


# -- a gap that never fills, against a real server ------------------------------------------------------


class _Capture(http.server.BaseHTTPRequestHandler):
    """Party A's endpoint, played by the test: keeps every message B sends it and answers 202."""

    received: ClassVar[list[tuple[str, bytes]]] = []

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
        type(self).received.append((self.headers.get("Content-Type", ""), body))
        self.send_response(202)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, format: str, *args: object) -> None:
        return


@pytest.fixture
def capture() -> Iterator[tuple[str, list[tuple[str, bytes]]]]:
    received: list[tuple[str, bytes]] = []
    handler = type("Capture", (_Capture,), {"received": received})
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/msh", received
    finally:
        server.shutdown()
        server.server_close()
        thread.join(10)


def ordered_b_settings(tmp_path: Path, a_url: str) -> Settings:
    """Party B (plain HTTP, SQLite in ``tmp_path``) under the demo agreement with message order guaranteed,
    A's endpoint at ``a_url``, Retries 1 every PT1S, and a gap grace of PT1S: a gap that never fills ends
    (Retries + 1) x RetryInterval + grace = 3 s after it opened."""
    cpa = with_message_order().decode()
    for old, new in (
        ("https://127.0.0.1:8081/msh", a_url),
        ("<tp:Retries>5</tp:Retries>", "<tp:Retries>1</tp:Retries>"),
        ("<tp:RetryInterval>PT5S</tp:RetryInterval>", "<tp:RetryInterval>PT1S</tp:RetryInterval>"),
    ):
        assert old in cpa
        cpa = cpa.replace(old, new)
    (tmp_path / "agreement.xml").write_text(cpa, encoding="utf-8")
    path = CONFIG_DIR / "party-b.toml"
    data = tomllib.loads(path.read_text(encoding="utf-8"))
    data["server"] = {**data["server"], "tls": False, "port": 0, "host": "127.0.0.1"}
    data["store"] = {**data["store"], "url": str(tmp_path / "party-b.sqlite")}
    data["agreements"] = {**data["agreements"], "paths": [str(tmp_path / "agreement.xml")]}
    data["receiving"] = {**data["receiving"], "order_gap_grace": "PT1S"}
    return settings_from_mapping(data, base_dir=CONFIG_DIR, source=str(path), env={})


def ordered_from_a(msh: Msh, message_id: str, number: int, status: SequenceStatus) -> tuple[str, bytes]:
    """A message of conversation ``conv-gap`` from A with SequenceNumber ``number``, signed as A."""
    now = datetime.now(UTC)
    params = msh.registry.resolve(CPA_ID, Exchange(PARTY_A, PARTY_B, SERVICE, ACTION), now=now)
    submission = Submission(PARTY_B, SERVICE, ACTION, (Payload(f"<order n='{number}'/>".encode(), "application/xml"),))
    composed = compose(
        params,
        submission,
        message_id=message_id,
        now=now,
        conversation_id="conv-gap",
        content_id_domain="party-a.example",
        message_order=MessageOrder(number, status),
    )
    return signed_as_a(composed.envelope, composed.attachments)


def post(url: str, content_type: str, body: bytes) -> int:
    host, port = url.split("//", 1)[1].split("/", 1)[0].split(":")
    connection = http.client.HTTPConnection(host, int(port), timeout=30)
    try:
        connection.request("POST", "/msh", body, {"Content-Type": content_type, "SOAPAction": '"ebXML"'})
        response = connection.getresponse()
        response.read()
        return response.status
    finally:
        connection.close()


def sent_to_a(received: list[tuple[str, bytes]]) -> list[Envelope]:
    out = []
    for content_type, body in list(received):
        message = parse_message(body, content_type, mode=ParseMode.LENIENT)
        message.close()
        out.append(message.envelope)
    return out


def test_a_gap_that_never_fills_ends_in_a_delivery_failure_for_each_held_message(
    tmp_path: Path, capture: tuple[str, list[tuple[str, bytes]]]
) -> None:
    # ebMS2 §9.1.1: "If the implementation defined limit for saved out-of-sequence messages is reached, then
    # the Receiving MSH MUST indicate a delivery failure to the Sending MSH with errorCode set to
    # DeliveryFailure and severity set to Error"; §9: "all subsequent messages will also fail to be presented".
    a_url, received = capture
    settings = ordered_b_settings(tmp_path, a_url)
    b = Msh(settings)
    try:
        with serving_in_thread(settings, b) as port:
            url = f"http://127.0.0.1:{port}/msh"
            for message_id, number, status in (
                ("m0@party-a.example", 0, SequenceStatus.RESET),
                ("m2@party-a.example", 2, SequenceStatus.CONTINUE),
                ("m3@party-a.example", 3, SequenceStatus.CONTINUE),
            ):  # SequenceNumber 1 never comes
                assert post(url, *ordered_from_a(b, message_id, number, status)) == 202
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline and len(failures_in(sent_to_a(received))) < 2:
                time.sleep(0.2)
            failures = failures_in(sent_to_a(received))
            # After the gap closed, a message that continues the sequence is refused the same way.
            assert post(url, *ordered_from_a(b, "m4@party-a.example", 4, SequenceStatus.CONTINUE)) == 202
            while time.monotonic() < deadline and len(failures_in(sent_to_a(received))) < 3:
                time.sleep(0.2)
            after = failures_in(sent_to_a(received))
            # A starts the sequence again (0, Reset): B passes it on.
            assert post(url, *ordered_from_a(b, "n0@party-a.example", 0, SequenceStatus.RESET)) == 202
            with b.store.transaction(readonly=True) as tx:
                states = {
                    m: tx.inbox_entry(tx.find_inbound(m).id).state  # type: ignore[union-attr]
                    for m in ("m0@party-a.example", "m2@party-a.example", "m3@party-a.example", "n0@party-a.example")
                }
                kinds = [e.kind for e in tx.list_events(0, limit=10_000)]
    finally:
        b.close()
    assert set(failures) == {"m2@party-a.example", "m3@party-a.example"}
    for error in failures.values():
        assert (error.code, error.severity, error.location) == (
            ErrorCode.DELIVERY_FAILURE,
            Severity.ERROR,
            "//Header/MessageOrder/SequenceNumber",
        )
    assert set(after) == {"m2@party-a.example", "m3@party-a.example", "m4@party-a.example"}
    assert states == {
        "m0@party-a.example": InboxState.NEW,
        "m2@party-a.example": InboxState.ABANDONED,
        "m3@party-a.example": InboxState.ABANDONED,
        "n0@party-a.example": InboxState.NEW,
    }
    assert kinds.count("abandoned") == 2 and kinds.count("delivery-failure-queued") == 2


def failures_in(envelopes: list[Envelope]) -> dict[str, Error]:
    """The DeliveryFailure errors B sent A, by the MessageId they name (RefToMessageId)."""
    out = {}
    for envelope in envelopes:
        header = envelope.message_header
        if envelope.error_list is None or header is None or header.message_data.ref_to_message_id is None:
            continue
        for error in envelope.error_list.errors:
            if error.code is ErrorCode.DELIVERY_FAILURE:
                out[header.message_data.ref_to_message_id] = error
    return out
