"""Agreements another implementation's team wrote, run between two real MSH processes (issue 20 evidence).

``shared/interop/cpas`` holds 16 CPP/CPA 2.0 agreements from ebms-core's Digikoppeling profiles (best effort
and reliable, http and https, signed and unsigned, syncReplyMode none and signalsAndResponse, signed
acknowledgments, encrypted payloads; the two compliance agreements bind one service under six profiles).
For each case below, :func:`msh.faults.agreement_pair.pair_from_agreement` writes a copy in which only the
endpoints (127.0.0.1, free ports, http or https as written) and the certificates (the published demo
certificates of ``samples/keys``, whose keys the processes hold; each party's trust anchors also name the
other party's, since the agreements gave both parties one certificate) differ; every copy is accepted by
``msh cpa validate``, resolves to the values of the original, and none needed its validity dates moved
(all are agreed, from 2011 or 2016 to 2031). Each party runs ``msh serve`` on its own SQLite store; the
test process submits to both stores (each server's timer loop transmits), so messages go **both ways**,
and then reads both stores to check that what happened is what the agreement says, the expectations
being written by hand from the files (as in ``tests/interop``):

* the message as sent (read back from the sender's store): AckRequested (and its ``signed``),
  DuplicateElimination, SyncReply, MessageOrder, the Service type, the SignatureMethod and whether the
  payloads are encrypted;
* reliable agreements: ``delivered`` on the To party's acknowledgment, which came back on the connection
  (HTTP 200 with the Acknowledgment) under syncReplyMode signalsAndResponse and separately otherwise
  (HTTP 202, no body, then the acknowledgment to the sender's endpoint); a signed receipt kept where
  ackSignatureRequested is always; best effort: ``sent`` (no acknowledgment, by design);
* the receiver has each message once, its signature verified when the agreement signs, its payload byte
  for byte as submitted (decrypted when it was encrypted);
* MessageOrder Guaranteed (a variant of a reliable agreement, which ebMS2 §9.1 lets guarantee order:
  syncReplyMode none, acknowledgments and duplicate elimination always): SequenceNumbers 0, 1, … in each
  conversation, each conversation offered to the application in that order.

The same variant of a sync agreement is refused, as ebMS2 §9.1 says (SyncReply MUST NOT be present with
MessageOrder): the test asserts the refusal and its words. No wait is unbounded.
"""

from __future__ import annotations

import dataclasses
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import pytest
from lxml import etree

from cpa import CollaborationProtocolAgreement, SendingParameters, load
from cpa.resolve import Exchange as AgreementExchange
from cpa.resolve import resolve
from msh.cli import main
from msh.ebms.message import ParseMode, parse_message
from msh.engine import Evidence, OutboundStatus
from msh.errors import ConfigurationError
from msh.faults.agreement_pair import AgreementPair, pair_from_agreement
from msh.runtime.compose import Payload, Submission
from msh.runtime.config import load_settings
from msh.runtime.msh import Msh
from msh.store.api import Direction, Event
from tests.support.shared import SHARED, shared_dir

pytestmark = pytest.mark.interop

CPAS = SHARED / "interop" / "cpas"
TP = "http://www.oasis-open.org/committees/ebxml-cppa/schema/cpp-cpa-2_0.xsd"
DS = "http://www.w3.org/2000/09/xmldsig#"
EB = "http://www.oasis-open.org/committees/ebxml-msg/schema/msg-header-2_0.xsd"
RSA_SHA1 = "http://www.w3.org/2000/09/xmldsig#rsa-sha1"
RSA_SHA256 = "http://www.w3.org/2001/04/xmldsig-more#rsa-sha256"
OSB = "urn:osb:services"
DEADLINE = 45.0  # seconds for every message of a case to be final (each is final in well under a second)


@dataclass(frozen=True)
class Profile:
    """What an agreement says about one exchange, read off the file by hand."""

    reliable: bool  # ReliableMessaging: ackRequested and duplicateElimination always
    sync: bool = False  # syncReplyMode signalsAndResponse (else none)
    signature: str | None = None  # the SenderNonRepudiation's SignatureAlgorithm
    ack_signed: bool = False  # ackSignatureRequested always
    encrypted: bool = False  # SenderDigitalEnvelope XMLENC
    ordered: bool = False  # MessageOrderSemantics Guaranteed


@dataclass(frozen=True)
class Exchange:
    """Messages the party with PartyInfo number ``sender`` (0 or 1) sends the other under a profile."""

    sender: int
    service: str
    service_type: str
    action: str
    profile: Profile


@dataclass(frozen=True)
class Case:
    """An agreement of ``shared/interop/cpas`` (``variant`` changes it first) and the exchanges it runs;
    ``conversations`` times ``messages`` messages of each exchange."""

    file: str
    exchanges: tuple[Exchange, ...]
    variant: Callable[[bytes], bytes] | None = None
    conversations: int = 1
    messages: int = 3


def stub(profile: Profile) -> tuple[Exchange, ...]:
    """The stubs' business actions: Logius delivers (afleveren) to Overheid, Overheid submits (aanleveren)."""
    return (
        Exchange(0, "osb:afleveren:1.1$1.0", OSB, "afleveren", profile),
        Exchange(1, "osb:aanleveren:1.1$1.0", OSB, "aanleveren", profile),
    )


def with_order_guaranteed(data: bytes) -> bytes:
    """The agreement with MessageOrderSemantics Guaranteed wherever it says NotGuaranteed (CPP/A 2.0
    §8.4.38); nothing else changes (the files write the value with and without white space around it)."""
    root = etree.fromstring(data)
    found = list(root.iter(f"{{{TP}}}MessageOrderSemantics"))
    assert found and all((e.text or "").strip() == "NotGuaranteed" for e in found)
    for element in found:
        element.text = "Guaranteed"
    return etree.tostring(root.getroottree(), xml_declaration=True, encoding="UTF-8")


CV = "EchoService$1.0"
CV_PROFILES = {  # cpa-cv-*: one service under six types, each on its own channels; syncReplyMode none
    "urn:cv:be:services": Profile(reliable=False),
    "urn:cv:be:signed:services": Profile(reliable=False, signature=RSA_SHA1),
    "urn:cv:be:encrypted:services": Profile(reliable=False, signature=RSA_SHA1, encrypted=True),
    "urn:cv:rm:services": Profile(reliable=True),
    "urn:cv:rm:signed:services": Profile(reliable=True, signature=RSA_SHA1),
    "urn:cv:rm:encrypted:services": Profile(reliable=True, signature=RSA_SHA1, encrypted=True),
}

CASES = {
    "rm.http.unsigned": Case("cpaStubEBF.rm.http.unsigned.xml", stub(Profile(reliable=True))),
    "rm.https.signed": Case("cpaStubEBF.rm.https.signed.xml", stub(Profile(reliable=True, signature=RSA_SHA1))),
    "rm.http.signed-sha256": Case(
        "cpaStubEBF.rm.http.signed-sha256.xml", stub(Profile(reliable=True, signature=RSA_SHA256))
    ),
    "rm.http.unsigned.sync": Case("cpaStubEBF.rm.http.unsigned.sync.xml", stub(Profile(reliable=True, sync=True))),
    "rm.https.signed.sync": Case(
        "cpaStubEBF.rm.https.signed.sync.xml", stub(Profile(reliable=True, sync=True, signature=RSA_SHA1))
    ),
    "rm.https.signed.ackSigned": Case(
        "cpaStubEBF.rm.https.signed.ackSigned.xml", stub(Profile(reliable=True, signature=RSA_SHA1, ack_signed=True))
    ),
    "rm.https.signed.encrypted": Case(
        "cpaStubEBF.rm.https.signed.encrypted.xml", stub(Profile(reliable=True, signature=RSA_SHA1, encrypted=True))
    ),
    "be.http.unsigned": Case("cpaStubEBF.be.http.unsigned.xml", stub(Profile(reliable=False))),
    "be.https.signed.sync": Case(
        "cpaStubEBF.be.https.signed.sync.xml", stub(Profile(reliable=False, sync=True, signature=RSA_SHA1))
    ),
    "cpa-cv-https": Case(
        "cpa-cv-https.xml",
        tuple(
            Exchange(sender, CV, service_type, action, profile)
            for service_type, profile in CV_PROFILES.items()
            for sender, action in ((1, "EchoRequest"), (0, "EchoResponse"))
        ),
        messages=2,
    ),
    "rm.https.signed, MessageOrder Guaranteed": Case(
        "cpaStubEBF.rm.https.signed.xml",
        stub(Profile(reliable=True, signature=RSA_SHA1, ordered=True)),
        variant=with_order_guaranteed,
        conversations=2,
        messages=5,
    ),
}


# -- the copies --------------------------------------------------------------------------------------------


def can_sends(cpa: CollaborationProtocolAgreement, now: datetime) -> list[SendingParameters]:
    """The resolution of every CanSend binding of both parties, in document order."""
    out = []
    for index, info in enumerate(cpa.party_infos):
        other = cpa.party_infos[1 - index]
        for role in info.collaboration_roles:
            binding = role.service_binding
            for action in binding.can_send:
                exchange = AgreementExchange(
                    info.party_ids,
                    other.party_ids,
                    binding.service,
                    action.action,
                    service_type=binding.service_type,
                    from_role=role.role,
                )
                out.append(resolve(cpa, exchange, now=now))
    return out


def as_written(p: SendingParameters) -> tuple[object, ...]:
    """What a resolution says besides endpoints and certificates."""
    transport = dataclasses.replace(
        p.transport, endpoint_url="", tls_client_certificate=None, tls_server_trust=None, tls_server_certificate=None
    )
    blank = dataclasses.replace(
        p, transport=transport, doc_exchange=dataclasses.replace(p.doc_exchange, signing=None, encryption=None)
    )
    nr, envelope = p.doc_exchange.signing, p.doc_exchange.encryption
    signing = (nr.signature_algorithm, nr.hash_function) if nr is not None else None
    encryption = envelope.encryption_algorithm if envelope is not None else None
    return (blank, signing, encryption)


def test_every_copy_is_accepted_and_says_what_the_original_says(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    files = sorted(shared_dir().joinpath("interop", "cpas").glob("*.xml"))
    assert len(files) == 16
    now = datetime.now(UTC)
    for path in files:
        pair = pair_from_agreement(path, tmp_path / path.stem, now=now)
        # Status agreed, Start 2011 or 2016, End 2031-01-01: in force; had one ended, the copy's End would
        # have been moved and said so here.
        assert pair.adjustments == (), (path.name, pair.adjustments)
        assert main(["cpa", "validate", str(pair.cpa)]) == 0, capsys.readouterr()
        assert capsys.readouterr().out.startswith(f"{pair.cpa}: ok")
        original, copy = load(path), load(pair.cpa)
        assert (copy.cpaid, copy.status, copy.start, copy.end) == (
            original.cpaid,
            original.status,
            original.start,
            original.end,
        )
        assert [as_written(p) for p in can_sends(copy, now)] == [as_written(p) for p in can_sends(original, now)]
        urls = [p.transport.endpoint_url for p in can_sends(copy, now)]
        scheme = "https" if ".https" in path.name or "https.xml" in path.name else "http"
        assert {u.split("://")[0] for u in urls} == {scheme}
        assert {u.split("/")[2].split(":")[0] for u in urls} == {"127.0.0.1"}


def test_message_order_with_sync_reply_is_refused_as_ebms2_9_1_says(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # ebMS2 §9.1: with MessageOrder, "the SyncReply element MUST NOT be present": the sync agreement made to
    # guarantee order cannot be run; msh cpa validate and msh serve both refuse it, each binding named.
    source = shared_dir() / "interop" / "cpas" / "cpaStubEBF.rm.http.unsigned.sync.xml"
    pair = pair_from_agreement(with_order_guaranteed(source.read_bytes()), tmp_path / "pair")
    expected = [
        f"agreement cpaStubEBF.rm.http.unsigned.sync: {party} sending {service}/{action} (channel {channel}) "
        'guarantees message order and asks for SyncReply (syncReplyMode signalsAndResponse): ebMS2 §9.1 "SyncReply '
        'MUST NOT be present" with MessageOrder; set syncReplyMode none'
        for party, channel, service, action in (
            (
                "Logius",
                "DIGIPOORT_defaultDeliveryChannel_ProfileReliableMessaging",
                "osb:afleveren:1.1$1.0",
                "afleveren",
            ),
            (
                "Logius",
                "DIGIPOORT_defaultDeliveryChannel_ProfileReliableMessaging",
                "osb:aanleveren:1.1$1.0",
                "bevestigAanleveren",
            ),
            (
                "Overheid",
                "OVERHEID_defaultDeliveryChannel_ProfileReliableMessaging",
                "osb:afleveren:1.1$1.0",
                "bevestigAfleveren",
            ),
            (
                "Overheid",
                "OVERHEID_defaultDeliveryChannel_ProfileReliableMessaging",
                "osb:aanleveren:1.1$1.0",
                "aanleveren",
            ),
        )
    ]
    assert main(["cpa", "validate", str(pair.cpa)]) == 1
    assert capsys.readouterr().out.splitlines() == [f"{pair.cpa}: {line}" for line in expected]
    partner = pair.parties[0].partner
    try:
        with pytest.raises(ConfigurationError, match="exited at start"):
            partner.start(timeout=30)
    finally:
        pair.stop()
    assert f"msh serve: error: {'; '.join(expected)}" in partner.log.read_text(encoding="utf-8")


# -- running them ------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Sent:
    message_id: str
    exchange: Exchange
    conversation: str
    payload: bytes


@pytest.fixture(params=list(CASES), ids=list(CASES))
def running(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[Case, AgreementPair, tuple[Msh, Msh]]]:
    case = CASES[request.param]
    data = (shared_dir() / "interop" / "cpas" / case.file).read_bytes()
    pair = pair_from_agreement(case.variant(data) if case.variant else data, tmp_path / "pair")
    assert pair.adjustments == ()
    try:
        pair.start()
        mshs = tuple(Msh(load_settings(party.partner.config, env={})) for party in pair.parties)
        try:
            yield case, pair, (mshs[0], mshs[1])
        finally:
            for msh in mshs:
                msh.close()
    finally:
        pair.stop()


def submit_all(case: Case, pair: AgreementPair, mshs: tuple[Msh, Msh]) -> list[Sent]:
    sent = []
    for number, exchange in enumerate(case.exchanges):
        to = pair.parties[1 - exchange.sender]
        for c in range(case.conversations):
            conversation = f"conv-{number}-{c}"
            for n in range(case.messages):
                payload = f"<document exchange='{number}' conversation='{c}' n='{n}'>{'x' * 1000}</document>".encode()
                submission = Submission(
                    to.party_id,
                    exchange.service,
                    exchange.action,
                    (Payload(payload, "application/xml"),),
                    service_type=exchange.service_type,
                    conversation_id=conversation,
                )
                message_id = mshs[exchange.sender].submit(submission)
                sent.append(Sent(message_id, exchange, conversation, payload))
    return sent


def wait_until(done: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + DEADLINE
    while not done():
        if time.monotonic() > deadline:
            raise AssertionError(f"not within {DEADLINE:g} s: {what}")
        time.sleep(0.1)


def journal(msh: Msh) -> list[Event]:
    with msh.store.transaction(readonly=True) as tx:
        return tx.list_events(0, limit=100_000)


def sent_message(msh: Msh, message_id: str) -> tuple[object, bytes, list[bytes]]:
    """The envelope, SOAP part and payloads of a message as its sender stored (and sent) it."""
    with msh.store.transaction(readonly=True) as tx:
        stored = tx.get_outbound(message_id)
        assert stored is not None
        with tx.open_blob(stored.body_blob_id) as blob:
            body = blob.read()
    message = parse_message(body, stored.content_type, mode=ParseMode.LENIENT)
    try:
        return message.envelope, message.soap, [p.body.read_bytes() for p in message.payloads]
    finally:
        message.close()


def test_agreement_runs_both_ways_as_it_says(running: tuple[Case, AgreementPair, tuple[Msh, Msh]]) -> None:
    case, pair, mshs = running
    sent = submit_all(case, pair, mshs)
    directions = Counter(s.exchange.sender for s in sent)
    assert directions[0] > 0 and directions[1] > 0  # both ways

    def final() -> bool:
        return all((s := mshs[m.exchange.sender].status(m.message_id)) and s.state.status.final for m in sent)

    wait_until(final, "every message final at its sender")

    def received(index: int) -> int:
        return len(mshs[index].inbox(None, limit=10_000))

    wait_until(lambda: all(received(1 - i) >= directions[i] for i in (0, 1)), "every message in its receiver's inbox")

    events = [journal(msh) for msh in mshs]
    inboxes = [{e.message_id: e for e in msh.inbox(None, limit=10_000)} for msh in mshs]
    for m in sent:
        profile, sender, receiver = m.exchange.profile, m.exchange.sender, 1 - m.exchange.sender
        s_msh, r_msh = mshs[sender], mshs[receiver]
        where = f"{m.message_id} ({m.exchange.action}, {m.exchange.service_type})"

        # The message as sent: what the agreement asks the header to carry (ebMS2 §6.3.1, §6.4.1, §4.3, §9).
        envelope, soap, payloads = sent_message(s_msh, m.message_id)
        header = envelope.message_header  # type: ignore[attr-defined]
        assert (header.service.value, header.service.type, header.action) == (
            m.exchange.service,
            m.exchange.service_type,
            m.exchange.action,
        ), where
        assert header.duplicate_elimination is profile.reliable, where
        ack_requested = envelope.ack_requested  # type: ignore[attr-defined]
        assert [a.signed for a in ack_requested] == ([profile.ack_signed] if profile.reliable else []), where
        assert (envelope.sync_reply is not None) is profile.sync, where  # type: ignore[attr-defined]
        assert (envelope.message_order is not None) is profile.ordered, where  # type: ignore[attr-defined]
        methods = [e.get("Algorithm") for e in etree.fromstring(soap).iter(f"{{{DS}}}SignatureMethod")]
        assert methods == ([profile.signature] if profile.signature else []), where
        # ebMS2 §4.1.4.5 (XMLENC): the payload travels as xenc:EncryptedData, never as written.
        assert [b"EncryptedData" in p for p in payloads] == [profile.encrypted], where
        assert (m.payload in payloads) is not profile.encrypted, where

        # The sender's journal and status (docs/statuses.md): what each rests on.
        submitted = [e for e in events[sender] if e.kind == "submitted" and e.message_id == m.message_id]
        assert [(e.detail["signed"], e.detail["encrypted"]) for e in submitted] == [
            (profile.signature is not None, profile.encrypted)
        ], where
        stored = s_msh.status(m.message_id)
        assert stored is not None
        attempts = [(a.http_status, a.answer, a.error) for a in s_msh.attempts(m.message_id)]
        if profile.reliable:
            assert (stored.state.status, stored.state.evidence) == (
                OutboundStatus.DELIVERED,
                Evidence.TO_PARTY_ACKNOWLEDGMENT,
            ), where
            # signalsAndResponse: the Acknowledgment in the HTTP answer; none: 202, and it comes separately.
            assert attempts == [(200, "Acknowledgment", None) if profile.sync else (202, "no body", None)], where
            receipt = s_msh.receipt(m.message_id)
            if profile.ack_signed:  # ebMS2 §6.3.2.5: the signed Acknowledgment is kept as the receipt
                assert receipt is not None and stored.state.receipt_problem is None, where
                root = etree.fromstring(receipt)
                assert root.find(f".//{{{DS}}}Signature") is not None, where
                assert root.findtext(f".//{{{EB}}}Acknowledgment/{{{EB}}}RefToMessageId") == m.message_id, where
            else:
                assert receipt is None, where
        else:
            # ebMS2 §6.6: no acknowledgment asked for: handed over (2xx), never "delivered".
            assert (stored.state.status, stored.state.evidence) == (
                OutboundStatus.SENT,
                Evidence.ACCEPTED_BY_NEXT_MSH,
            ), where
            assert attempts == [(202, "no body", None)], where

        # The receiver: once, verified when signed, the payload as submitted (decrypted).
        got = [e for e in events[receiver] if e.kind == "received" and e.message_id == m.message_id]
        assert [(e.detail["signed"], e.detail["acknowledged"], e.detail["issues"]) for e in got] == [
            (profile.signature is not None, profile.reliable, [])
        ], where
        assert not [e for e in events[receiver] if e.message_id == m.message_id and e.kind == "rejected"], where
        entry = inboxes[receiver][m.message_id]
        fetched = r_msh.fetch(entry.id, mark_delivered=False)
        try:
            assert [p.body.read_bytes() for p in fetched.message.payloads] == [m.payload], where
        finally:
            fetched.close()
        with r_msh.store.transaction(readonly=True) as tx:
            record = tx.find_inbound(m.message_id)
        assert record is not None and record.duplicate_count == 0, where

    for index in (0, 1):  # nothing else arrived, nothing was refused
        assert sorted(inboxes[index]) == sorted(m.message_id for m in sent if m.exchange.sender != index)
        kinds = Counter(e.kind for e in events[index] if e.direction is Direction.INBOUND)
        assert kinds["rejected"] == 0 and kinds["abandoned"] == 0, kinds

    if any(e.profile.ordered for e in case.exchanges):
        check_order(sent, mshs, events)


def check_order(sent: list[Sent], mshs: tuple[Msh, Msh], events: list[list[Event]]) -> None:
    # ebMS2 §9.1.1: the SequenceNumber is 0 on a conversation's first message "and then incremented by one
    # for each subsequent message sent"; the receiver "MUST NOT pass the message to an application until all
    # the messages with a lower SequenceNumber have been passed".
    by_conversation: dict[tuple[int, str], list[Sent]] = defaultdict(list)
    for m in sent:
        by_conversation[(m.exchange.sender, m.conversation)].append(m)
    for (sender, conversation), messages in by_conversation.items():
        numbers = []
        for m in messages:
            envelope, _, _ = sent_message(mshs[sender], m.message_id)
            order = envelope.message_order  # type: ignore[attr-defined]
            numbers.append((order.sequence_number, order.status.value))
        assert numbers == [(0, "Reset")] + [(n, "Continue") for n in range(1, len(messages))], conversation
        receiver = 1 - sender
        offered = [e.message_id for e in mshs[receiver].inbox(None, limit=10_000)]
        ids = [m.message_id for m in messages]
        assert [i for i in offered if i in ids] == ids, conversation
        got = {
            e.message_id: e.detail.get("sequenceNumber")
            for e in events[receiver]
            if e.kind == "received" and e.message_id in ids
        }
        assert [got[i] for i in ids] == list(range(len(ids))), conversation
