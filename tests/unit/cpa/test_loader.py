"""The CPP/CPA 2.0 loader (cpa.loader) on the project's sample agreements and on broken variants of them.

Needs nothing outside the project. Every broken agreement must give exactly one CpaError naming the
problem, its line and its place, and saying what to do.
"""

from __future__ import annotations

import base64
import threading
from datetime import UTC, datetime, timedelta, timezone
from functools import cache
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from cryptography.x509.oid import NameOID
from lxml import etree
from signxml import XMLSigner, methods

from cpa import (
    KNOWN_ALGORITHMS,
    AlgorithmUse,
    CollaborationProtocolAgreement,
    CpaError,
    CpaProblem,
    DeliveryChannel,
    EndpointType,
    MessageOrderSemantics,
    PartyId,
    PartyInfo,
    PerMessage,
    Status,
    SyncReplyMode,
    XsDuration,
    load,
    parse_duration,
)
from msh.errors import ConfigurationError, Severity
from tests.support.agreement_files import EMPTY_KEY_INFO, built_agreements, signature_template, with_signature

ROOT = Path(__file__).resolve().parents[3]
CPAS = ROOT / "samples" / "cpas"
KEYS = ROOT / "samples" / "keys"
DEMO_A_B = CPAS / "demo-a-b.xml"
DEMO_ROUTED = CPAS / "demo-routed-a-c.xml"
TP = "http://www.oasis-open.org/committees/ebxml-cppa/schema/cpp-cpa-2_0.xsd"
DS = "http://www.w3.org/2000/09/xmldsig#"
ISO6523 = "urn:oasis:names:tc:ebcore:partyid-type:iso6523:0088"
RSA_SHA256 = "http://www.w3.org/2001/04/xmldsig-more#rsa-sha256"
SHA256 = "http://www.w3.org/2001/04/xmlenc#sha256"
NEXT_MSH = "urn:oasis:names:tc:ebxml-msg:actor:nextMSH"
TO_PARTY_MSH = "urn:oasis:names:tc:ebxml-msg:actor:toPartyMSH"


def demo_bytes() -> bytes:
    return DEMO_A_B.read_bytes()


def pem_der(name: str) -> bytes:
    return x509.load_pem_x509_certificate((KEYS / f"{name}.cert.pem").read_bytes()).public_bytes(
        serialization.Encoding.DER
    )


def channel(party: PartyInfo, channel_id: str) -> DeliveryChannel:
    return next(c for c in party.delivery_channels if c.channel_id == channel_id)


def line_of(data: bytes, marker: bytes, occurrence: int = 1) -> int:
    """The line of the ``occurrence``-th ``marker`` in ``data``."""
    index = -1
    for _ in range(occurrence):
        index = data.index(marker, index + 1)
    return data.count(b"\n", 0, index) + 1


def replace_once(data: bytes, old: bytes, new: bytes) -> bytes:
    assert old in data, old
    return data.replace(old, new, 1)


def only_problem(data: bytes) -> CpaProblem:
    with pytest.raises(CpaError) as caught:
        load(data)
    problems = caught.value.problems
    assert len(problems) == 1, "\n".join(map(str, problems))
    return problems[0]


# --------------------------------------------------------------------------------------------------
# The samples
# --------------------------------------------------------------------------------------------------


def test_demo_a_b_agreement() -> None:
    cpa = load(DEMO_A_B)
    assert isinstance(cpa, CollaborationProtocolAgreement)
    assert cpa.cpaid == "cpa-demo-a-b"
    assert cpa.status is Status.AGREED
    assert cpa.start == datetime(2026, 1, 1, tzinfo=UTC)
    assert cpa.end == datetime(2036, 1, 1, tzinfo=UTC)
    assert cpa.is_valid_at(datetime(2030, 6, 1, tzinfo=UTC))
    assert cpa.signed is False
    assert cpa.source == str(DEMO_A_B)
    a, b = cpa.party_infos
    assert (a.party_name, a.party_ids) == ("Party A", (PartyId("123456789", ISO6523),))
    assert (b.party_name, b.party_ids) == ("Party B", (PartyId("987654321", ISO6523),))
    assert [r.role for r in a.collaboration_roles] == ["Buyer"]
    assert [r.role for r in b.collaboration_roles] == ["Seller"]


def test_demo_a_b_actions_and_channels() -> None:
    a, b = load(DEMO_A_B).party_infos
    buyer = a.collaboration_roles[0].service_binding
    assert buyer.service == "urn:example:services:ordering" and buyer.service_type is None
    assert [(x.action, [c.channel_id for c in x.channels]) for x in buyer.can_send] == [("NewOrder", ["A_Channel"])]
    assert [x.action for x in buyer.can_receive] == ["OrderResponse"]
    seller = b.collaboration_roles[0].service_binding
    assert [x.action for x in seller.can_send] == ["OrderResponse"]
    assert [x.action for x in seller.can_receive] == ["NewOrder"]
    assert buyer.can_send[0].package_id == "BusinessPackage"
    assert ("timeToPerform", "P1D") in buyer.can_send[0].business_transaction_characteristics
    # The default MSH channel carries signals: never acknowledged.
    assert a.default_msh_channel.channel_id == "A_SignalChannel"
    assert a.default_msh_channel.messaging_characteristics.ack_requested is PerMessage.NEVER
    assert a.default_msh_package_id == "MshSignalPackage"


@pytest.mark.parametrize(("index", "channel_id", "endpoint"), [(0, "A_Channel", 8081), (1, "B_Channel", 8082)])
def test_demo_a_b_reliability_and_security(index: int, channel_id: str, endpoint: int) -> None:
    party = load(DEMO_A_B).party_infos[index]
    key = channel_id[0]
    ch = channel(party, channel_id)
    mc = ch.messaging_characteristics
    assert mc.ack_requested is PerMessage.ALWAYS
    assert mc.duplicate_elimination is PerMessage.ALWAYS
    assert mc.ack_signature_requested is PerMessage.NEVER
    assert mc.sync_reply_mode is SyncReplyMode.MSH_SIGNALS_ONLY
    assert mc.actor == TO_PARTY_MSH
    for binding in (ch.doc_exchange.sender_binding, ch.doc_exchange.receiver_binding):
        assert binding is not None and binding.version == "2.0"
        rm = binding.reliable_messaging
        assert rm is not None
        assert rm.retries == 5
        assert rm.retry_interval == XsDuration.parse("PT5S")
        assert rm.message_order_semantics is MessageOrderSemantics.NOT_GUARANTEED
        assert binding.persist_duration == XsDuration.parse("P1D")
        assert binding.non_repudiation is not None
        assert binding.non_repudiation.signature_algorithm == RSA_SHA256
        assert binding.non_repudiation.hash_function == SHA256
        assert binding.digital_envelope is None
    sender_nr = ch.doc_exchange.sender_binding.non_repudiation  # type: ignore[union-attr]
    assert sender_nr is not None and sender_nr.certificate is not None
    assert sender_nr.certificate.cert_id == f"{key}_Cert"
    # Transport: HTTPS with TLS client authentication, certificates embedded from samples/keys.
    transport = ch.transport
    assert transport.receiver is not None and transport.sender is not None
    assert transport.receiver.endpoint() is not None
    assert transport.receiver.endpoint(EndpointType.REQUEST).uri == f"https://127.0.0.1:{endpoint}/msh"  # type: ignore[union-attr]
    client = transport.sender.client_security
    assert client is not None and client.protocol == "TLS" and client.protocol_version == "1.2"
    assert client.certificate is not None and client.certificate.x509 == (pem_der(f"party-{key.lower()}"),)
    server = transport.receiver.server_security
    assert server is not None and server.certificate is not None and server.certificate.cert_id == f"{key}_Cert"
    # Trust anchors are the other party's certificate: references resolve across PartyInfo elements.
    other = "b" if key == "A" else "a"
    assert server.peer_security is not None
    assert [c.x509 for c in server.peer_security.trust_anchors] == [(pem_der(f"party-{other}"),)]
    assert [c.cert_id for c in party.certificates] == [f"{key}_Cert"]


def test_demo_a_b_certificates_are_x509() -> None:
    a, b = load(DEMO_A_B).party_infos
    for party, name in ((a, "Party A (pymsh demo)"), (b, "Party B (pymsh demo)")):
        certificate = x509.load_der_x509_certificate(party.certificates[0].x509[0])
        assert certificate.subject.get_attributes_for_oid(NameOID.COMMON_NAME)[0].value == name


def test_demo_routed_a_c() -> None:
    cpa = load(DEMO_ROUTED)
    assert cpa.cpaid == "cpa-demo-routed-a-c"
    a, c = cpa.party_infos
    assert c.party_ids == (PartyId("555555555", ISO6523),)
    receive = c.collaboration_roles[0].service_binding.can_receive[0]
    assert receive.action == "NewOrder"
    actors = {ch.messaging_characteristics.actor: ch for ch in receive.channels}
    assert set(actors) == {NEXT_MSH, TO_PARTY_MSH}
    for ch in receive.channels:
        assert ch.messaging_characteristics.ack_requested is PerMessage.ALWAYS
        assert ch.transport.receiver is not None
        assert [e.uri for e in ch.transport.receiver.endpoints] == ["https://127.0.0.1:8090/msh"]
        server = ch.transport.receiver.server_security
        assert server is not None and server.certificate is not None
        assert server.certificate.x509 == (pem_der("intermediary"),)
        assert ch.doc_exchange.receiver_binding is not None
        assert ch.doc_exchange.receiver_binding.reliable_messaging is not None
        assert ch.doc_exchange.receiver_binding.reliable_messaging.retry_interval == XsDuration.parse("PT5S")
    send = a.collaboration_roles[0].service_binding.can_send[0]
    assert [ch.messaging_characteristics.actor for ch in send.channels] == [TO_PARTY_MSH, NEXT_MSH]
    assert [ch.transport.receiver.endpoints[0].uri for ch in send.channels if ch.transport.receiver] == [
        "https://127.0.0.1:8081/msh"
    ] * 2
    assert [x.action for x in c.collaboration_roles[0].service_binding.can_send] == ["OrderResponse"]


def test_load_from_bytes_names_the_source() -> None:
    assert load(demo_bytes()).source == "<bytes>"


def test_expired_and_proposed_agreements_still_load() -> None:
    # The resolver refuses them; loading is not the place (the operator may want to look at them).
    data = replace_once(demo_bytes(), b"<tp:End>2036-01-01T00:00:00Z", b"<tp:End>2020-01-01T00:00:00Z")
    data = replace_once(data, b'tp:value="agreed"', b'tp:value="proposed"')
    cpa = load(data)
    assert cpa.status is Status.PROPOSED
    assert not cpa.is_valid_at(datetime(2026, 6, 1, tzinfo=UTC))


def test_naive_and_offset_datetimes() -> None:
    data = replace_once(demo_bytes(), b"<tp:Start>2026-01-01T00:00:00Z", b"<tp:Start>2026-01-01T00:00:00")
    data = replace_once(data, b"<tp:End>2036-01-01T00:00:00Z", b"<tp:End>2036-01-01T02:00:00+02:00")
    cpa = load(data)
    assert cpa.start == datetime(2026, 1, 1, tzinfo=UTC) and cpa.start.tzinfo is UTC
    assert cpa.end.utcoffset() == timedelta(hours=2)
    assert cpa.end == datetime(2036, 1, 1, tzinfo=UTC)
    assert cpa.end.tzinfo == timezone(timedelta(hours=2))


def test_fractional_and_day_durations() -> None:
    data = replace_once(demo_bytes(), b"<tp:RetryInterval>PT5S", b"<tp:RetryInterval>PT1M1.5S")
    data = replace_once(data, b"<tp:PersistDuration>P1D", b"<tp:PersistDuration>P2DT3H")
    a = load(data).party_infos[0]
    binding = channel(a, "A_Channel").doc_exchange.sender_binding
    assert binding is not None and binding.reliable_messaging is not None
    assert binding.reliable_messaging.retry_interval.to_timedelta() == timedelta(seconds=61.5)
    assert binding.persist_duration == XsDuration.from_timedelta(timedelta(days=2, hours=3))


def test_loading_is_thread_safe() -> None:
    results: list[str] = []
    errors: list[BaseException] = []

    def work() -> None:
        try:
            for _ in range(3):
                results.append(load(DEMO_ROUTED).cpaid)
                try:
                    load(replace_once(demo_bytes(), b'<tp:Status tp:value="agreed"/>', b""))
                except CpaError:
                    results.append("refused")
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert sorted(set(results)) == ["cpa-demo-routed-a-c", "refused"] and len(results) == 24


# --------------------------------------------------------------------------------------------------
# Broken agreements: one clear problem each, at the right line
# --------------------------------------------------------------------------------------------------


def test_schema_invalid_missing_status() -> None:
    data = replace_once(demo_bytes(), b'  <tp:Status tp:value="agreed"/>\n', b"")
    problem = only_problem(data)
    assert problem.line == line_of(data, b"<tp:Start>")
    assert problem.path == "/CollaborationProtocolAgreement/Start"
    assert "tp:Status" in problem.message and "expected" in problem.message
    assert "schemas/cpp-cpa-2_0.xsd" in problem.message
    assert problem.source == "<bytes>"


def test_schema_problems_fall_back_on_libxml2(monkeypatch: pytest.MonkeyPatch) -> None:
    # Where xmlschema finds nothing to say but libxml2 refuses the document, libxml2's findings are given.
    monkeypatch.setattr("cpa.schema._explain", lambda name, root: [])
    data = replace_once(demo_bytes(), b'  <tp:Status tp:value="agreed"/>\n', b"")
    problem = only_problem(data)
    assert problem.line == line_of(data, b"<tp:Start>")
    assert problem.path == "/CollaborationProtocolAgreement/Start"
    assert "tp:Start" in problem.message and "This element is not expected" in problem.message


def test_schema_invalid_value() -> None:
    data = replace_once(demo_bytes(), b'tp:ackRequested="always"', b'tp:ackRequested="sometimes"')
    problem = only_problem(data)
    assert problem.line == line_of(data, b'tp:ackRequested="sometimes"')
    assert problem.path.endswith("/PartyInfo[1]/DeliveryChannel[1]/MessagingCharacteristics/@ackRequested")
    assert "sometimes" in problem.message


def test_dangling_channel_id() -> None:
    data = replace_once(demo_bytes(), b"<tp:ChannelId>A_Channel<", b"<tp:ChannelId>A_Chanel<")
    problem = only_problem(data)
    assert problem.line == line_of(data, b"<tp:ChannelId>A_Chanel<")
    assert problem.path == (
        "/CollaborationProtocolAgreement/PartyInfo[1]/CollaborationRole/ServiceBinding/CanSend/"
        "ThisPartyActionBinding/ChannelId"
    )
    assert problem.message == (
        "ChannelId 'A_Chanel' names no DeliveryChannel; define a DeliveryChannel with channelId=\"A_Chanel\" "
        "or fix the reference"
    )
    assert str(problem) == f"<bytes>:{problem.line}: {problem.path}: {problem.message}"


def test_dangling_cert_id() -> None:
    old = b'<tp:ClientCertificateRef tp:certId="A_Cert"/>'
    data = replace_once(demo_bytes(), old, b'<tp:ClientCertificateRef tp:certId="A_Certificate"/>')
    problem = only_problem(data)
    assert problem.line == line_of(data, b'tp:certId="A_Certificate"')
    assert problem.path.endswith("/Transport/TransportSender/TransportClientSecurity/ClientCertificateRef/@certId")
    assert "'A_Certificate' names no Certificate" in problem.message
    assert 'define a Certificate with certId="A_Certificate"' in problem.message


def test_reference_to_the_wrong_kind_of_element() -> None:
    old = b'<tp:ServerCertificateRef tp:certId="B_Cert"/>'
    data = replace_once(demo_bytes(), old, b'<tp:ServerCertificateRef tp:certId="B_TrustedPeers"/>')
    problem = only_problem(data)
    assert problem.line == line_of(data, b'tp:certId="B_TrustedPeers"')
    assert "'B_TrustedPeers' names a SecurityDetails, not a Certificate" in problem.message


def test_dangling_doc_exchange_id() -> None:
    old = b'tp:transportId="A_Transport" tp:docExchangeId="A_ReliableSigned"'
    data = replace_once(demo_bytes(), old, b'tp:transportId="A_Transport" tp:docExchangeId="A_Reliable"')
    problem = only_problem(data)
    assert problem.line == line_of(data, b'tp:docExchangeId="A_Reliable"')
    assert problem.path == "/CollaborationProtocolAgreement/PartyInfo[1]/DeliveryChannel[1]/@docExchangeId"
    assert "DeliveryChannel@docExchangeId 'A_Reliable' names no DocExchange" in problem.message


def test_dangling_default_msh_channel_and_security_details() -> None:
    data = replace_once(demo_bytes(), b'tp:defaultMshChannelId="B_SignalChannel"', b'tp:defaultMshChannelId="B_Signal"')
    problem = only_problem(data)
    assert problem.line == line_of(data, b'tp:defaultMshChannelId="B_Signal"')
    assert problem.path == "/CollaborationProtocolAgreement/PartyInfo[2]/@defaultMshChannelId"
    old = b'<tp:SigningSecurityDetailsRef tp:securityId="A_TrustedPeers"/>'
    data = replace_once(demo_bytes(), old, b'<tp:SigningSecurityDetailsRef tp:securityId="A_Trusted"/>')
    problem = only_problem(data)
    assert problem.line == line_of(data, b'tp:securityId="A_Trusted"')
    assert "names no SecurityDetails" in problem.message


def test_unknown_signature_algorithm() -> None:
    old = RSA_SHA256.encode() + b"</tp:SignatureAlgorithm>"
    data = replace_once(demo_bytes(), old, b"http://www.w3.org/2000/09/xmldsig#rsa-md5</tp:SignatureAlgorithm>")
    problem = only_problem(data)
    assert problem.line == line_of(data, b"xmldsig#rsa-md5")
    assert problem.path.endswith("/ebXMLSenderBinding/SenderNonRepudiation/SignatureAlgorithm")
    assert "'http://www.w3.org/2000/09/xmldsig#rsa-md5' is not a known signature algorithm URI" in problem.message
    assert RSA_SHA256 in problem.message  # says what to use instead


def test_digest_uri_as_signature_algorithm_and_unknown_encryption() -> None:
    data = replace_once(demo_bytes(), RSA_SHA256.encode() + b"</tp:Sig", SHA256.encode() + b"</tp:Sig")
    assert "is a digest algorithm, not a signature algorithm" in only_problem(data).message
    envelope = (
        b'<tp:SenderDigitalEnvelope><tp:DigitalEnvelopeProtocol tp:version="1.0">XMLENC</tp:DigitalEnvelopeProtocol>'
        b"<tp:EncryptionAlgorithm>urn:example:rot13</tp:EncryptionAlgorithm></tp:SenderDigitalEnvelope>"
    )
    data = replace_once(demo_bytes(), b"</tp:SenderNonRepudiation>\n", b"</tp:SenderNonRepudiation>\n" + envelope)
    problem = only_problem(data)
    assert problem.path.endswith("/SenderDigitalEnvelope/EncryptionAlgorithm")
    assert "'urn:example:rot13' is not a known encryption algorithm URI" in problem.message


def test_known_algorithm_table() -> None:
    assert KNOWN_ALGORITHMS[RSA_SHA256] is AlgorithmUse.SIGNATURE
    assert KNOWN_ALGORITHMS[SHA256] is AlgorithmUse.DIGEST
    assert KNOWN_ALGORITHMS["http://www.w3.org/2009/xmlenc11#aes128-gcm"] is AlgorithmUse.ENCRYPTION


def test_durations_in_months_and_years_load_as_written() -> None:
    # XML Schema Part 2 §3.2.6: P1M, P180M and P1Y are legal xs:durations; agreements in production use them.
    data = replace_once(demo_bytes(), b"<tp:RetryInterval>PT5S<", b"<tp:RetryInterval>P1M<")
    data = replace_once(data, b"<tp:PersistDuration>P1D<", b"<tp:PersistDuration>P180M<")
    data = replace_once(data, b'tp:timeToPerform="P1D"', b'tp:timeToPerform="P1Y"')
    cpa = load(data)
    assert cpa.warnings == ()
    binding = channel(cpa.party_infos[0], "A_Channel").doc_exchange.sender_binding
    assert binding is not None and binding.reliable_messaging is not None
    assert binding.reliable_messaging.retry_interval == XsDuration(months=1)
    assert str(binding.persist_duration) == "P15Y"
    characteristics = dict(
        cpa.party_infos[0].collaboration_roles[0].service_binding.can_send[0].business_transaction_characteristics
    )
    assert characteristics["timeToPerform"] == "P1Y"


def test_business_transaction_durations_are_kept_even_when_negative() -> None:
    # The MSH does not act on BusinessTransactionCharacteristics: any legal xs:duration is kept as written.
    data = replace_once(demo_bytes(), b'tp:timeToPerform="P1D"', b'tp:timeToPerform="-P1Y2M"')
    binding = load(data).party_infos[0].collaboration_roles[0].service_binding.can_send[0]
    assert ("timeToPerform", "-P1Y2M") in binding.business_transaction_characteristics


@pytest.mark.parametrize(
    ("element", "value"),
    [
        (b"<tp:PersistDuration>P1D<", b"-P1D"),
        (b"<tp:RetryInterval>PT5S<", b"-P1M"),
        (b"<tp:RetryInterval>PT5S<", b"-PT0.5S"),
    ],
)
def test_a_negative_duration_the_msh_acts_on_is_refused(element: bytes, value: bytes) -> None:
    label = element[4:].split(b">")[0].decode()
    data = replace_once(demo_bytes(), element, element.split(b">")[0] + b">" + value + b"<")
    problem = only_problem(data)
    assert problem.line == line_of(data, value)
    assert problem.path.endswith(f"/{label}")
    assert problem.message == f"{label} '{value.decode()}' is negative; give a positive duration"


def test_a_duration_too_long_to_reach_an_instant_is_refused() -> None:
    # PersistDuration after the agreement's End (2036) is past the year 9999: no instant the MSH could use.
    data = replace_once(demo_bytes(), b"<tp:PersistDuration>P1D<", b"<tp:PersistDuration>P8000Y<")
    problem = only_problem(data)
    assert problem.line == line_of(data, b"P8000Y")
    assert problem.path.endswith("/ebXMLSenderBinding/PersistDuration")
    assert problem.message == (
        "PersistDuration 'P8000Y' is too long to be used: PersistDuration 'P8000Y' after the agreement's End "
        "(2036-01-01T00:00:00+00:00) is past the year 9999; give a shorter duration"
    )
    # RetryInterval counts (Retries + 1) times: 6 x P1500Y after 2036 is past 9999, though P1500Y alone is not.
    data = replace_once(demo_bytes(), b"<tp:RetryInterval>PT5S<", b"<tp:RetryInterval>P1500Y<")
    problem = only_problem(data)
    assert problem.path.endswith("/ReliableMessaging/RetryInterval")
    assert "(Retries + 1) x RetryInterval = 6 x 'P1500Y' after the agreement's End" in problem.message
    # Just short of the limit loads.
    data = replace_once(demo_bytes(), b"<tp:RetryInterval>PT5S<", b"<tp:RetryInterval>P1300Y<")
    assert load(data).cpaid == "cpa-demo-a-b"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("PT30S", timedelta(seconds=30)),
        ("P1D", timedelta(days=1)),
        ("PT0.5S", timedelta(milliseconds=500)),
        ("P1DT2H", timedelta(days=1, hours=2)),
        ("PT1M1.5S", timedelta(seconds=61.5)),
        ("PT0S", timedelta(0)),
        ("P0M", timedelta(0)),  # zero months is a fixed length
    ],
)
def test_parse_duration(text: str, expected: timedelta) -> None:
    assert parse_duration(text) == expected


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("P1M", "'P1M' counts months or years, which have no fixed length; express it in days"),
        ("P1Y", "'P1Y' counts months or years, which have no fixed length; express it in days"),
        ("P1Y2DT3H", "'P1Y2DT3H' counts months or years"),
        ("garbage", "'garbage' is not an xs:duration; write it like PT30S or P1D"),
        ("30s", "'30s' is not an xs:duration; write it like PT30S or P1D"),
        ("", "'' is not an xs:duration; write it like PT30S or P1D"),
        ("-PT1S", "'-PT1S' is negative; give a positive duration"),
        ("-P1D", "'-P1D' is negative; give a positive duration"),
        ("P99999999999D", "'P99999999999D' is too long to be used; give a shorter duration"),
    ],
)
def test_parse_duration_refuses(text: str, message: str) -> None:
    with pytest.raises(ValueError) as exc:
        parse_duration(text)
    assert str(exc.value).startswith(message)


def test_parse_duration_reads_what_the_loader_reads() -> None:
    # The settings' fixed-length reader and the agreement's reader agree wherever there are no months.
    for text in ("PT30S", "P1DT2H", "PT1M1.5S", "PT0S", "P0M"):
        assert XsDuration.parse(text).to_timedelta() == parse_duration(text)


@pytest.mark.parametrize("garbage", [b"!!! not base64 !!!", b"!!!notbase64"])
def test_bad_base64_certificate(garbage: bytes) -> None:
    # libxml2 refuses the first (so the schema step reports it) but lets the second through (so the
    # certificate check does): the operator reads the same message either way.
    data = demo_bytes()
    body = data[data.index(b"<ds:X509Certificate>") :]
    first_line = body.split(b"\n")[1]
    data = replace_once(data, first_line, b"          " + garbage)
    problem = only_problem(data)
    assert problem.line == line_of(data, b"<ds:X509Certificate>")
    assert problem.path == "/CollaborationProtocolAgreement/PartyInfo[1]/Certificate/KeyInfo/X509Data/X509Certificate"
    assert "Certificate 'A_Cert': ds:X509Certificate is not valid base64" in problem.message
    assert "base64 (DER)" in problem.message


def test_base64_that_is_not_a_certificate() -> None:
    data = demo_bytes()
    start = data.index(b"<ds:X509Certificate>", data.index(b'tp:certId="B_Cert"')) + len(b"<ds:X509Certificate>")
    end = data.index(b"</ds:X509Certificate>", start)
    data = data[:start] + base64.b64encode(b"hello, not a certificate") + data[end:]
    problem = only_problem(data)
    assert problem.line == line_of(data, b"<ds:X509Certificate>", 2)
    assert "Certificate 'B_Cert'" in problem.message and "not a DER X.509 certificate" in problem.message


def test_missing_retries() -> None:
    data = replace_once(demo_bytes(), b"<tp:Retries>5</tp:Retries>", b"")
    problem = only_problem(data)
    assert problem.line == line_of(data, b"<tp:ReliableMessaging>")
    assert "ReliableMessaging has no Retries" in problem.message


def test_dtd_and_external_entity_refused() -> None:
    data = demo_bytes()
    hostile = replace_once(
        data,
        b"<!-- pymsh demo",
        b'<!DOCTYPE tp:CollaborationProtocolAgreement [<!ENTITY x SYSTEM "file:///etc/passwd">]>\n<!-- pymsh demo',
    )
    problem = only_problem(hostile)
    assert problem.line == 2 == line_of(hostile, b"<!DOCTYPE")
    assert "DTD" in problem.message and "remove the <!DOCTYPE" in problem.message
    assert problem.path == ""


def test_not_well_formed() -> None:
    data = replace_once(demo_bytes(), b"</tp:Start>", b"</tp:Stat>")
    problem = only_problem(data)
    assert problem.line == line_of(data, b"</tp:Stat>")
    assert problem.message.startswith("not well-formed XML")


@pytest.mark.parametrize(
    ("document", "expected"),
    [
        (f'<tp:CollaborationProtocolProfile xmlns:tp="{TP}"/>'.encode(), "CollaborationProtocolProfile (one party"),
        (b'<CollaborationProtocolAgreement xmlns="http://www.ebxml.org/namespaces/tradePartner"/>', "CPP/A 2.0"),
        (b"<Envelope/>", "the root element is Envelope"),
    ],
)
def test_not_an_agreement(document: bytes, expected: str) -> None:
    problem = only_problem(document)
    assert expected in problem.message and problem.line == 1


def test_unreadable_file(tmp_path: Path) -> None:
    missing = tmp_path / "nope.xml"
    with pytest.raises(CpaError) as caught:
        load(missing)
    assert str(caught.value) == f"{missing}: cannot read the agreement: No such file or directory; check the path"


def test_several_problems_in_one_error() -> None:
    data = replace_once(demo_bytes(), b"<tp:ChannelId>A_Channel<", b"<tp:ChannelId>X<")
    data = replace_once(data, b"<tp:RetryInterval>PT5S<", b"<tp:RetryInterval>-P1Y<")
    with pytest.raises(CpaError) as caught:
        load(data)
    error = caught.value
    assert isinstance(error, ConfigurationError)
    assert len(error.problems) == 2
    assert str(error).splitlines() == [str(p) for p in error.problems]
    assert error.source == "<bytes>"


def test_cpa_problem_without_line_or_path() -> None:
    assert str(CpaProblem("a.xml", None, "", "broken; fix it")) == "a.xml: broken; fix it"
    assert str(CpaProblem("a.xml", 3, "/X", "broken")) == "a.xml:3: /X: broken"
    with pytest.raises(ValueError):
        CpaError([])


# --------------------------------------------------------------------------------------------------
# The agreement's own signature
# --------------------------------------------------------------------------------------------------


@cache
def signer(common_name: str) -> tuple[rsa.RSAPrivateKey, x509.Certificate]:
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])
    now = datetime.now(UTC)
    certificate = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - timedelta(days=1))
        .not_valid_after(now + timedelta(days=30))
        .sign(key, hashes.SHA256())
    )
    return key, certificate


def agreement_with(certificate: x509.Certificate) -> etree._Element:
    """The demo agreement with ``certificate`` as Party A's A_Cert."""
    root = etree.fromstring(demo_bytes())
    node = root.find(f"{{{TP}}}PartyInfo/{{{TP}}}Certificate/{{{DS}}}KeyInfo/{{{DS}}}X509Data/{{{DS}}}X509Certificate")
    assert node is not None
    node.text = base64.b64encode(certificate.public_bytes(serialization.Encoding.DER)).decode()
    return root


def sign(root: etree._Element, key: rsa.RSAPrivateKey, certificate: x509.Certificate) -> bytes:
    """Sign ``root`` enveloped, the ds:Signature in tp:Signature (where the schema puts it)."""
    holder = etree.Element(f"{{{TP}}}Signature")
    etree.SubElement(holder, f"{{{DS}}}Signature", Id="placeholder")
    comment = root.find(f"{{{TP}}}Comment")
    assert comment is not None
    comment.addprevious(holder)
    signed = XMLSigner(method=methods.enveloped, signature_algorithm="rsa-sha256", digest_algorithm="sha256").sign(
        root, key=key, cert=[certificate]
    )
    return etree.tostring(signed, xml_declaration=True, encoding="UTF-8")


def test_signed_agreement_verifies() -> None:
    key, certificate = signer("Party A signer")
    data = sign(agreement_with(certificate), key, certificate)
    cpa = load(data)
    assert cpa.signed is True
    assert cpa.party_infos[0].certificates[0].x509 == (certificate.public_bytes(serialization.Encoding.DER),)


def test_tampered_signed_agreement_is_refused() -> None:
    key, certificate = signer("Party A signer")
    data = sign(agreement_with(certificate), key, certificate)
    tampered = replace_once(data, b"https://127.0.0.1:8082/msh", b"https://127.0.0.1:9999/msh")
    problem = only_problem(tampered)
    assert problem.path == "/CollaborationProtocolAgreement/Signature/Signature"
    assert problem.line == line_of(tampered, b"<ds:Signature>")
    assert "signature does not verify" in problem.message and "Digest mismatch" in problem.message
    # Skipping the check loads it, and says the signature was not verified.
    assert load(tampered, verify_signature=False).signed is False


def test_agreement_signed_by_an_outsider_is_refused() -> None:
    _, party_certificate = signer("Party A signer")
    outsider_key, outsider_certificate = signer("Mallory")
    data = sign(agreement_with(party_certificate), outsider_key, outsider_certificate)
    problem = only_problem(data)
    assert "signed by a certificate that is not one of the parties'" in problem.message
    assert "CN=Mallory" in problem.message


def test_packaging_is_modelled() -> None:
    from cpa import load

    agreement = load(Path(__file__).resolve().parents[3] / "samples" / "cpas" / "demo-a-b.xml")
    assert agreement.packagings, "the sample declares its packages"
    for party in agreement.party_infos:
        package = agreement.packaging(party.default_msh_package_id)
        assert package is not None and package.generate and package.parse
    assert {p.id: p.mime_type for p in agreement.simple_parts}["MsgHdr"] == "text/xml"
    binding = agreement.party_infos[0].collaboration_roles[0].service_binding.can_send[0]
    package = agreement.packaging(binding.package_id)
    assert package is not None and package.composites[0].mime_type == "multipart/related"
    ids = {p.id for p in agreement.simple_parts} | {c.id for c in package.composites}
    assert package.composites[0].constituents[0] == "MsgHdr"
    assert all(c in ids for comp in package.composites for c in comp.constituents)
    assert agreement.packaging("no-such-package") is None


# --------------------------------------------------------------------------------------------------
# Unfilled signature templates (as tools leave them in generated agreements)
# --------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("signature", "reason"),
    [
        (signature_template(), "its SignatureValue is empty"),
        (signature_template(signature_value="c2lnbmF0dXJl"), "a DigestValue is empty"),
        (
            signature_template("c2lnbmF0dXJl", "ZGlnZXN0", "<ds:KeyInfo><ds:KeyName/></ds:KeyInfo>"),
            "its KeyInfo is empty",
        ),
        (signature_template("c2lnbmF0dXJl", "ZGlnZXN0", EMPTY_KEY_INFO), "its KeyInfo is empty"),
        # Not even schema-valid (a ds:KeyInfo needs a child), yet what tools generate: set aside all the same.
        (signature_template(key_info="<ds:KeyInfo/>"), "its SignatureValue is empty"),
        (signature_template(key_info=""), "its SignatureValue is empty"),
    ],
)
def test_an_unfilled_signature_template_loads_as_unsigned_with_a_warning(signature: str, reason: str) -> None:
    data = with_signature(signature)
    cpa = load(data)
    assert cpa.signed is False
    (warning,) = cpa.warnings
    assert warning.severity is Severity.WARNING
    assert (warning.source, warning.line) == ("<bytes>", line_of(data, b"<ds:Signature"))
    assert warning.path == "/CollaborationProtocolAgreement/Signature/Signature"
    assert warning.message == (
        f"the agreement's ds:Signature is an unfilled template ({reason}), so the agreement is loaded as unsigned; "
        "have it signed, or remove the tp:Signature element if it is not meant to be signed"
    )
    assert str(warning).startswith(
        f"<bytes>:{warning.line}: /CollaborationProtocolAgreement/Signature/Signature: Warning: "
    )
    # Without verification the template is still no signature, and still said so.
    assert load(data, verify_signature=False).warnings == cpa.warnings


def test_a_filled_in_signature_that_does_not_verify_is_still_an_error() -> None:
    # Values in every field, the certificate one of the parties': a signature, and a wrong one.
    key_info = f"<ds:KeyInfo><ds:X509Data><ds:X509Certificate>{base64.b64encode(pem_der('party-a')).decode()}"
    key_info += "</ds:X509Certificate></ds:X509Data></ds:KeyInfo>"
    data = with_signature(signature_template("c2lnbmF0dXJl", "ZGlnZXN0", key_info))
    problem = only_problem(data)
    assert problem.severity is Severity.ERROR
    assert "signature does not verify" in problem.message
    # Verification off: it loads, unsigned, and nothing is said about it (it was not checked).
    cpa = load(data, verify_signature=False)
    assert (cpa.signed, cpa.warnings) == (False, ())


def test_a_template_beside_errors_is_reported_with_them_in_document_order() -> None:
    data = with_signature(
        signature_template(), replace_once(demo_bytes(), b"<tp:RetryInterval>PT5S<", b"<tp:RetryInterval>-PT5S<")
    )
    with pytest.raises(CpaError) as caught:
        load(data)
    problems = caught.value.problems
    assert [p.severity for p in problems] == [Severity.ERROR, Severity.WARNING]
    assert "is negative" in problems[0].message and "unfilled template" in problems[1].message
    # A schema error elsewhere does not hide the warning either.
    data = with_signature(signature_template(), replace_once(demo_bytes(), b'<tp:Status tp:value="agreed"/>', b""))
    with pytest.raises(CpaError) as caught:
        load(data)
    assert Severity.WARNING in [p.severity for p in caught.value.problems]


def test_a_cpa_error_needs_an_error() -> None:
    warning = CpaProblem("a.xml", 3, "/X", "look", Severity.WARNING)
    assert str(warning) == "a.xml:3: /X: Warning: look"
    with pytest.raises(ValueError, match="severity Error"):
        CpaError([warning])


@pytest.mark.parametrize("name", sorted(built_agreements()))
def test_every_built_agreement_loads(name: str) -> None:
    cpa = load(built_agreements()[name])
    assert cpa.cpaid.startswith("cpa-demo-")
    assert all(w.severity is Severity.WARNING for w in cpa.warnings)
    assert bool(cpa.warnings) == ("template" in name)


# --- every failure is a CpaError (hostile or absurd numbers included) ----------------------------------


@pytest.mark.parametrize(
    ("old", "new"),
    [
        (b"<tp:Retries>5</tp:Retries>", b"<tp:Retries>" + b"9" * 400 + b"</tp:Retries>"),
        (b"<tp:Retries>5</tp:Retries>", b"<tp:Retries>-99999999999999999999</tp:Retries>"),
        (b"<tp:RetryInterval>PT5S</tp:RetryInterval>", b"<tp:RetryInterval>P99999999999999999999Y</tp:RetryInterval>"),
        (
            b"<tp:RetryInterval>PT5S</tp:RetryInterval>",
            b"<tp:RetryInterval>PT99999999999999999999999S</tp:RetryInterval>",
        ),
        (b"<tp:RetryInterval>PT5S</tp:RetryInterval>", b"<tp:RetryInterval>P1Y" + b"9" * 300 + b"D</tp:RetryInterval>"),
        (b"<tp:Start>", b"<tp:Start>99999"),
        (b"<tp:End>", b"<tp:End>-"),
        (b'cpaid="cpa-demo-a-b"', b'cpaid="' + b"x" * 100_000 + b'"'),
    ],
    ids=[
        "huge-retries",
        "negative-retries",
        "duration-years",
        "duration-seconds",
        "duration-digits",
        "year",
        "end",
        "cpaid",
    ],
)
def test_absurd_numbers_are_cpa_errors_never_other_exceptions(old: bytes, new: bytes) -> None:
    data = demo_bytes()
    if old not in data:
        pytest.skip(f"the sample agreement has no {old!r}")
    try:
        load(data.replace(old, new, 1))
    except CpaError as exc:
        assert exc.problems and all(str(p) for p in exc.problems)
    # Loading is also a documented outcome (a value the MSH never acts on may be absurd).
