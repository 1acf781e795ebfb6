"""Registry, resolve and check on the 16 real agreements of ``shared/interop/cpas`` (through the loader).

For every CanSend binding of each party the resolution is compared with values read off the files by
hand (retries and interval for the reliable ones, syncReplyMode for the sync ones, the client TLS
certificate for the https ones, signing and encryption where they sign or encrypt). A header built from
each resolution passes :func:`cpa.check.check`, and mutated headers get the expected ebMS errors.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from functools import cache
from pathlib import Path

import pytest

from cpa.check import check
from cpa.duration import XsDuration
from cpa.loader import load
from cpa.model import CollaborationProtocolAgreement, PerMessage, SyncReplyMode
from cpa.registry import CpaRegistry
from cpa.resolve import AgreementRefused, Exchange, RefusalReason, SendingParameters, resolve
from msh.ebms import model as m
from msh.ebms.namespaces import SERVICE_MSH
from msh.errors import ErrorCode, Severity
from tests.support.shared import SHARED, shared_dir

pytestmark = pytest.mark.interop

CPAS = SHARED / "interop" / "cpas"
NOW = datetime(2026, 3, 1, 9, 30, tzinfo=UTC)
RSA_SHA1 = "http://www.w3.org/2000/09/xmldsig#rsa-sha1"
RSA_SHA256 = "http://www.w3.org/2001/04/xmldsig-more#rsa-sha256"
AES256 = "http://www.w3.org/2001/04/xmlenc#aes256-cbc"
VNR, INC, NSUP, TTLX = (
    ErrorCode.VALUE_NOT_RECOGNIZED,
    ErrorCode.INCONSISTENT,
    ErrorCode.NOT_SUPPORTED,
    ErrorCode.TIME_TO_LIVE_EXPIRED,
)
ERR, WARN = Severity.ERROR, Severity.WARNING


@dataclass(frozen=True)
class Expect:
    """What a file's business channels say (read off the XML by hand)."""

    persist: XsDuration | None = None  # None: no ReliableMessaging; else Retries 5, RetryInterval PT5M
    sync: SyncReplyMode = SyncReplyMode.NONE
    https: bool = False
    signature: str | None = None
    encrypted: bool = False
    ack_signed: bool = False


M30, M25 = XsDuration.parse("PT30M"), XsDuration.parse("PT25M")
STUBS = {
    "cpaStubEBF.be.http.signed.xml": Expect(signature=RSA_SHA1),
    "cpaStubEBF.be.http.unsigned.sync.xml": Expect(sync=SyncReplyMode.SIGNALS_AND_RESPONSE),
    "cpaStubEBF.be.http.unsigned.xml": Expect(),
    "cpaStubEBF.be.https.signed.sync.xml": Expect(
        sync=SyncReplyMode.SIGNALS_AND_RESPONSE, https=True, signature=RSA_SHA1
    ),
    "cpaStubEBF.be.https.signed.xml": Expect(https=True, signature=RSA_SHA1),
    "cpaStubEBF.rm.http.signed-sha256.xml": Expect(persist=M30, signature=RSA_SHA256),
    "cpaStubEBF.rm.http.signed.xml": Expect(persist=M30, signature=RSA_SHA1),
    "cpaStubEBF.rm.http.unsigned.sync.xml": Expect(persist=M30, sync=SyncReplyMode.SIGNALS_AND_RESPONSE),
    "cpaStubEBF.rm.http.unsigned.xml": Expect(persist=M30),
    "cpaStubEBF.rm.https.signed-sha256.xml": Expect(persist=M30, https=True, signature=RSA_SHA256),
    "cpaStubEBF.rm.https.signed.ackSigned.xml": Expect(persist=M25, https=True, signature=RSA_SHA1, ack_signed=True),
    "cpaStubEBF.rm.https.signed.encrypted.xml": Expect(persist=M30, https=True, signature=RSA_SHA1, encrypted=True),
    "cpaStubEBF.rm.https.signed.sync.xml": Expect(
        persist=M25, sync=SyncReplyMode.SIGNALS_AND_RESPONSE, https=True, signature=RSA_SHA1
    ),
    "cpaStubEBF.rm.https.signed.xml": Expect(persist=M30, https=True, signature=RSA_SHA1),
}
# The Digikoppeling compliance agreements bind EchoService$1.0 under six service types.
CV_TYPES = {
    "urn:cv:be:services": Expect(),
    "urn:cv:be:signed:services": Expect(signature=RSA_SHA1),
    "urn:cv:be:encrypted:services": Expect(signature=RSA_SHA1, encrypted=True),
    "urn:cv:rm:services": Expect(persist=M30),
    "urn:cv:rm:signed:services": Expect(persist=M30, signature=RSA_SHA1),
    "urn:cv:rm:encrypted:services": Expect(persist=M30, signature=RSA_SHA1, encrypted=True),
}
FILES = sorted([*STUBS, "cpa-cv-http.xml", "cpa-cv-https.xml"])

# Party name -> (certificate prefix, port of its endpoint).
STUB_PARTIES = {"Logius": ("DIGIPOORT", 8888), "Overheid": ("OVERHEID", 8088)}
CV_PARTIES = {"DK Compliancevoorziening ebMS": ("ComplianceVoorziening", 8888), "Consumer": ("Consumer", 8088)}
# (from party, service, action) of every CanSend binding of the stubs.
STUB_SENDS = [
    ("Logius", "osb:afleveren:1.1$1.0", "afleveren"),
    ("Logius", "osb:aanleveren:1.1$1.0", "bevestigAanleveren"),
    ("Overheid", "osb:afleveren:1.1$1.0", "bevestigAfleveren"),
    ("Overheid", "osb:aanleveren:1.1$1.0", "aanleveren"),
]


@cache
def agreement(name: str) -> CollaborationProtocolAgreement:
    return load(Path(shared_dir()) / "interop" / "cpas" / name)


def can_sends(cpa: CollaborationProtocolAgreement) -> list[tuple[int, str, str | None, str, str]]:
    """(party index, role, service type, service, action) of every CanSend binding, in document order."""
    out: list[tuple[int, str, str | None, str, str]] = []
    for index, info in enumerate(cpa.party_infos):
        for cr in info.collaboration_roles:
            sb = cr.service_binding
            out.extend((index, cr.role, sb.service_type, sb.service, ab.action) for ab in sb.can_send)
    return out


def resolve_all(name: str) -> list[SendingParameters]:
    cpa = agreement(name)
    results = []
    for index, role, stype, service, action in can_sends(cpa):
        sender, receiver = cpa.party_infos[index], cpa.party_infos[1 - index]
        exchange = Exchange(sender.party_ids, receiver.party_ids, service, action, service_type=stype, from_role=role)
        results.append(resolve(cpa, exchange, now=NOW))
    return results


def expectation(name: str, p: SendingParameters) -> tuple[Expect, dict[str, tuple[str, int]]]:
    if name.startswith("cpa-cv"):
        assert p.service_type is not None
        base = CV_TYPES[p.service_type]
        return replace(base, https=name == "cpa-cv-https.xml"), CV_PARTIES
    return STUBS[name], STUB_PARTIES


@pytest.mark.parametrize("name", FILES)
def test_every_can_send_resolves_to_the_files_values(name: str) -> None:
    results = resolve_all(name)
    cpa = agreement(name)
    if name.startswith("cpa-cv"):
        assert cpa.cpaid == "CPAID_EchoService-1-0"
        assert len(results) == 12
        assert sorted({(p.from_party.name, p.action) for p in results}) == [
            ("Consumer", "EchoRequest"),
            ("DK Compliancevoorziening ebMS", "EchoResponse"),
        ]
        assert sorted(p.service_type or "" for p in results) == sorted(list(CV_TYPES) * 2)
    else:
        assert cpa.cpaid == name.removesuffix(".xml")
        assert [(p.from_party.name, p.service, p.action) for p in results] == STUB_SENDS
        assert {p.service_type for p in results} == {"urn:osb:services"}
    for p in results:
        exp, parties = expectation(name, p)
        prefix, _ = parties[p.from_party.name]
        to_prefix, to_port = parties[p.to_party.name]
        t, rm, dx, mc = p.transport, p.reliable_messaging, p.doc_exchange, p.messaging
        assert t.endpoint_url == f"{'https' if exp.https else 'http'}://localhost:{to_port}/ebms"
        assert (t.protocol, t.protocol_version) == ("HTTP", "1.1")
        # Reliable messaging: Retries 5, RetryInterval PT5M, PersistDuration; ack and duplicate elimination.
        if exp.persist is not None:
            assert rm is not None and (rm.retries, rm.retry_interval) == (5, XsDuration.parse("PT5M"))
            assert (rm.first_resend_timeout, dx.persist_duration) == (XsDuration.parse("PT5M"), exp.persist)
            assert (mc.ack_requested, mc.duplicate_elimination) == (PerMessage.ALWAYS, PerMessage.ALWAYS)
        else:
            assert (rm, dx.persist_duration) == (None, None)
            assert (mc.ack_requested, mc.duplicate_elimination) == (PerMessage.NEVER, PerMessage.NEVER)
        assert mc.ack_signature_requested is (PerMessage.ALWAYS if exp.ack_signed else PerMessage.NEVER)
        assert mc.sync_reply_mode is exp.sync
        assert mc.actor == "urn:oasis:names:tc:ebxml-msg:actor:toPartyMSH"
        # TLS: the sender's client certificate, its server trust, the receiver's server certificate.
        if exp.https:
            assert t.uses_tls and (t.tls_protocol, t.tls_protocol_version) == ("SSL", "3.0")
            assert t.tls_client_certificate is not None and t.tls_server_certificate is not None
            suffix = "Certificate" if name.startswith("cpa-cv") else "Cert"
            assert t.tls_client_certificate.cert_id == f"{prefix}_Client{suffix}"
            assert t.tls_server_certificate.cert_id == f"{to_prefix}_Server{suffix}"
            assert t.tls_client_certificate.x509 and t.tls_client_certificate.x509[0][:1] == b"\x30"  # DER
            assert t.tls_server_trust is not None
        else:
            assert not t.uses_tls
            assert (t.tls_client_certificate, t.tls_server_trust, t.tls_server_certificate) == (None, None, None)
        if exp.signature is not None:
            assert dx.signing is not None and dx.signing.signature_algorithm == exp.signature
            assert dx.signing.certificate is not None
            assert dx.signing.certificate.cert_id.startswith(f"{prefix}_Signing")
        else:
            assert dx.signing is None
        if exp.encrypted:
            assert dx.encryption is not None and dx.encryption.encryption_algorithm == AES256
            # The receiver's ReceiverDigitalEnvelope names the key to encrypt for.
            assert dx.encryption.certificate is not None
            assert dx.encryption.certificate.cert_id.startswith(f"{to_prefix}_Encryption")
        else:
            assert dx.encryption is None


def header_for(p: SendingParameters, *, timestamp: datetime = NOW) -> m.Envelope:
    """The message a sending MSH builds from a resolution (ebMS2 §3.1, §6.3.1, §6.4)."""
    ttl = p.time_to_live_floor(timestamp) + timedelta(minutes=1) if p.reliable_messaging is not None else None
    mc = p.messaging
    return m.Envelope(
        message_header=m.MessageHeader(
            from_party=m.Party(tuple(m.PartyId(i.value, i.type) for i in p.from_party.ids), p.from_party.role),
            to_party=m.Party(tuple(m.PartyId(i.value, i.type) for i in p.to_party.ids), p.to_party.role),
            cpa_id=p.cpaid,
            conversation_id="conv-interop-1",
            service=m.Service(p.service, p.service_type),
            action=p.action,
            message_data=m.MessageData("interop-1@example", timestamp, time_to_live=ttl),
            duplicate_elimination=mc.duplicate_elimination is PerMessage.ALWAYS,
        ),
        ack_requested=(
            (m.AckRequested(signed=mc.ack_signature_requested is PerMessage.ALWAYS, actor=mc.actor),)
            if mc.ack_requested is PerMessage.ALWAYS
            else ()
        ),
        sync_reply=m.SyncReply() if mc.sync_reply_mode is not SyncReplyMode.NONE else None,
    )


@pytest.mark.parametrize("name", FILES)
def test_check_accepts_the_header_built_from_each_resolution(name: str) -> None:
    cpa = agreement(name)
    for p in resolve_all(name):
        result = check(header_for(p), cpa, now=NOW)
        assert result.issues == (), (p.action, p.service_type, [str(i) for i in result.issues])
        assert (result.sending_channel_id, result.receiving_channel_id) == (
            p.sending_channel_id,
            p.receiving_channel_id,
        )
        assert result.effective["ackRequested"] is (p.reliable_messaging is not None)
        assert result.effective["syncReplyMode"] is (p.messaging.sync_reply_mode is not SyncReplyMode.NONE)


def _header(env: m.Envelope) -> m.MessageHeader:
    assert env.message_header is not None
    return env.message_header


def mutations(p: SendingParameters) -> list[tuple[str, m.Envelope, list[tuple[ErrorCode, Severity, str]]]]:
    """(what, mutated header, the issues expected) for one resolution."""
    env = header_for(p)
    h = _header(env)
    rm = p.reliable_messaging is not None
    sync = p.messaging.sync_reply_mode is not SyncReplyMode.NONE
    wrong_from = m.Party((m.PartyId(h.from_party.party_ids[0].value, "urn:wrong:type"),), h.from_party.role)
    order_issues = [(NSUP, ERR, "//Header/MessageOrder")]
    if sync:
        order_issues.append((INC, ERR, "//Header/MessageOrder"))  # ebMS2 §9.2
    if not rm:
        order_issues.append((INC, ERR, "//Header/MessageOrder"))  # ebMS2 §9.1: no DuplicateElimination
    past = NOW - timedelta(minutes=1)
    ttl_issues = [(TTLX, ERR, "//Header/MessageHeader/MessageData/TimeToLive")]
    if rm:
        ttl_issues.append((INC, WARN, "//Header/MessageHeader/MessageData/TimeToLive"))
    data = replace(h.message_data, time_to_live=past)
    return [
        (
            "DuplicateElimination flipped",
            replace(env, message_header=replace(h, duplicate_elimination=not rm)),
            [(INC, ERR, "//Header/MessageHeader/DuplicateElimination")],
        ),
        (
            "AckRequested flipped",
            replace(env, ack_requested=() if rm else (m.AckRequested(),)),
            [(INC, ERR, "//Header/AckRequested")],
        ),
        (
            "SyncReply flipped",
            replace(env, sync_reply=None if sync else m.SyncReply()),
            [(INC, ERR, "//Header/SyncReply")],
        ),
        (
            "MessageOrder added",
            replace(env, message_order=m.MessageOrder(0, m.SequenceStatus.RESET)),
            order_issues,
        ),
        (
            "From PartyId type changed",
            replace(env, message_header=replace(h, from_party=wrong_from)),
            [(INC, ERR, "//Header/MessageHeader/From/PartyId")],
        ),
        (
            "From Role changed",
            replace(env, message_header=replace(h, from_party=replace(h.from_party, role="Intruder"))),
            [(VNR, ERR, "//Header/MessageHeader/From/Role")],
        ),
        (
            "Action changed",
            replace(env, message_header=replace(h, action=p.action + "X")),
            [(VNR, ERR, "//Header/MessageHeader/Action")],
        ),
        (
            "Service type changed",
            replace(env, message_header=replace(h, service=m.Service(p.service, "urn:wrong:services"))),
            [(VNR, ERR, "//Header/MessageHeader/Service/@type")],
        ),
        (
            "Service changed",
            replace(env, message_header=replace(h, service=m.Service("urn:wrong:service", p.service_type))),
            [(VNR, ERR, "//Header/MessageHeader/Service")],
        ),
        (
            "TimeToLive passed",
            replace(env, message_header=replace(h, message_data=data)),
            ttl_issues,
        ),
        (
            "CPAId unknown",
            replace(env, message_header=replace(h, cpa_id="urn:unknown:cpa")),
            [(VNR, ERR, "//Header/MessageHeader/CPAId")],
        ),
    ]


@pytest.mark.parametrize("name", FILES)
def test_check_flags_mutated_headers(name: str) -> None:
    cpa = agreement(name)
    registry = CpaRegistry([cpa])
    for p in resolve_all(name):
        for what, env, expected in mutations(p):
            result = check(env, registry, now=NOW)
            got = [(i.error_code, i.severity, i.location) for i in result.issues]
            assert got == expected, (p.action, p.service_type, what, [str(i) for i in result.issues])


@pytest.mark.parametrize("name", FILES)
def test_msh_signals_use_the_default_msh_channels(name: str) -> None:
    cpa = agreement(name)
    sender, receiver = cpa.party_infos
    p = resolve(cpa, Exchange(sender.party_ids, receiver.party_ids, SERVICE_MSH, "Acknowledgment"), now=NOW)
    assert p.msh_signal
    assert (p.sending_channel_id, p.receiving_channel_id) == (
        sender.default_msh_channel.channel_id,
        receiver.default_msh_channel.channel_id,
    )
    # The second party (Overheid, Consumer) listens there.
    assert p.transport.endpoint_url.endswith("://localhost:8088/ebms")
    quiet = replace(p.messaging, ack_requested=PerMessage.NEVER, sync_reply_mode=SyncReplyMode.NONE)
    ack = header_for(replace(p, messaging=quiet))
    result = check(ack, cpa, now=NOW)
    assert result.issues == ()
    assert result.sending_channel_id == sender.default_msh_channel.channel_id


def test_outside_the_validity_window_refused_and_flagged() -> None:
    cpa = agreement("cpaStubEBF.rm.https.signed.xml")
    p = resolve_all("cpaStubEBF.rm.https.signed.xml")[0]
    end = datetime(2031, 1, 1, tzinfo=UTC)
    assert cpa.end == end
    with pytest.raises(AgreementRefused) as info:
        resolve(cpa, Exchange(p.from_party.ids, p.to_party.ids, p.service, p.action), now=end)
    assert info.value.reason is RefusalReason.EXPIRED
    result = check(header_for(p, timestamp=end), cpa, now=end)
    assert [(i.error_code, i.location) for i in result.issues] == [(INC, "//Header/MessageHeader/CPAId")]


def test_registry_of_all_agreements() -> None:
    registry = CpaRegistry(agreement(name) for name in FILES)
    # The two compliance agreements share a CPAId: the later one (https) replaces the earlier.
    assert len(registry) == 15
    cv = registry.get("CPAID_EchoService-1-0")
    assert cv is agreement("cpa-cv-https.xml")
    logius, overheid = agreement("cpaStubEBF.rm.https.signed.xml").party_infos
    stubs = registry.find(logius.party_ids, overheid.party_ids, "osb:afleveren:1.1$1.0", "afleveren", now=NOW)
    assert [c.cpaid for c in stubs] == [n.removesuffix(".xml") for n in FILES if n.startswith("cpaStub")]
    assert registry.find(overheid.party_ids, logius.party_ids, "osb:afleveren:1.1$1.0", "afleveren") == ()
    consumer = cv.party_infos[1].party_ids
    found = registry.find(consumer, cv.party_infos[0].party_ids, "EchoService$1.0", "EchoRequest", "urn:cv:rm:services")
    assert found == (cv,)
    # Without a service type the compliance agreement is ambiguous for resolve, and says how to choose.
    echo = Exchange(consumer, cv.party_infos[0].party_ids, "EchoService$1.0", "EchoRequest")
    with pytest.raises(AgreementRefused) as info:
        registry.resolve("CPAID_EchoService-1-0", echo, now=NOW)
    assert info.value.reason is RefusalReason.AMBIGUOUS
    p = registry.resolve("CPAID_EchoService-1-0", replace(echo, service_type="urn:cv:rm:signed:services"), now=NOW)
    assert p.reliable_messaging is not None
    assert (p.transport.endpoint_url, p.reliable_messaging.retries, p.sending_channel_id) == (
        "https://localhost:8888/ebms",
        5,
        "Consumer_RM_Signed_Channel",
    )
