"""The CPP/CPA 2.0 loader on the 16 real agreements of ``shared/interop/cpas`` (Digikoppeling profiles from
eluinstra/ebms-core), and the project's sample agreements under the official OASIS schema.

Reads ``shared/`` beside the project root in place and skips when it is absent. The expected values were
read from the files by hand (see EXPECTED); the loader must find exactly those.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import pytest
import xmlschema
from cryptography import x509
from lxml import etree

from cpa import CollaborationProtocolAgreement, DeliveryChannel, PerMessage, SyncReplyMode, XsDuration, load
from tests.support.shared import SHARED, shared_dir

pytestmark = pytest.mark.interop

CPAS = SHARED / "interop" / "cpas"
OFFICIAL_XSD = SHARED / "reference" / "schemas" / "cpp-cpa-2_0.xsd"
SAMPLES = Path(__file__).resolve().parents[2] / "samples" / "cpas"

RSA_SHA1 = "http://www.w3.org/2000/09/xmldsig#rsa-sha1"
SHA1 = "http://www.w3.org/2000/09/xmldsig#sha1"
RSA_SHA256 = "http://www.w3.org/2001/04/xmldsig-more#rsa-sha256"
SHA256 = "http://www.w3.org/2001/04/xmlenc#sha256"
AES256_CBC = "http://www.w3.org/2001/04/xmlenc#aes256-cbc"


@dataclass(frozen=True)
class Expected:
    """What one agreement says, read from the file by hand."""

    parties: tuple[str, str]
    channels_per_party: int
    reliable_channels_per_party: int  # channels with ReliableMessaging (ackRequested always)
    persist_duration: XsDuration | None  # of the reliable channels (all have Retries 5, RetryInterval PT5M)
    sync_reply_mode: SyncReplyMode
    https: bool
    signature: tuple[str, str] | None  # (SignatureAlgorithm, HashFunction) of the signed channels
    encrypted: bool = False
    ack_signature_requested: PerMessage = PerMessage.NEVER  # on the reliable channels
    roles_per_party: int = 2
    cpaid: str | None = None  # None: the file name without .xml


STUB = ("Logius", "Overheid")
CV = ("DK Compliancevoorziening ebMS", "Consumer")
NONE = SyncReplyMode.NONE
SYNC = SyncReplyMode.SIGNALS_AND_RESPONSE
M30, M25 = XsDuration.parse("PT30M"), XsDuration.parse("PT25M")
SHA1_SIGNED = (RSA_SHA1, SHA1)
SHA256_SIGNED = (RSA_SHA256, SHA256)
CV_ID = "CPAID_EchoService-1-0"

EXPECTED: dict[str, Expected] = {
    "cpa-cv-http.xml": Expected(CV, 6, 3, M30, NONE, False, SHA1_SIGNED, True, roles_per_party=6, cpaid=CV_ID),
    "cpa-cv-https.xml": Expected(CV, 6, 3, M30, NONE, True, SHA1_SIGNED, True, roles_per_party=6, cpaid=CV_ID),
    "cpaStubEBF.be.http.signed.xml": Expected(STUB, 1, 0, None, NONE, False, SHA1_SIGNED),
    "cpaStubEBF.be.http.unsigned.sync.xml": Expected(STUB, 1, 0, None, SYNC, False, None),
    "cpaStubEBF.be.http.unsigned.xml": Expected(STUB, 1, 0, None, NONE, False, None),
    "cpaStubEBF.be.https.signed.sync.xml": Expected(STUB, 1, 0, None, SYNC, True, SHA1_SIGNED),
    "cpaStubEBF.be.https.signed.xml": Expected(STUB, 1, 0, None, NONE, True, SHA1_SIGNED),
    "cpaStubEBF.rm.http.signed-sha256.xml": Expected(STUB, 2, 1, M30, NONE, False, SHA256_SIGNED),
    "cpaStubEBF.rm.http.signed.xml": Expected(STUB, 2, 1, M30, NONE, False, SHA1_SIGNED),
    "cpaStubEBF.rm.http.unsigned.sync.xml": Expected(STUB, 2, 1, M30, SYNC, False, None),
    "cpaStubEBF.rm.http.unsigned.xml": Expected(STUB, 2, 1, M30, NONE, False, None),
    "cpaStubEBF.rm.https.signed-sha256.xml": Expected(STUB, 2, 1, M30, NONE, True, SHA256_SIGNED),
    "cpaStubEBF.rm.https.signed.ackSigned.xml": Expected(
        STUB, 2, 1, M25, NONE, True, SHA1_SIGNED, ack_signature_requested=PerMessage.ALWAYS
    ),
    "cpaStubEBF.rm.https.signed.encrypted.xml": Expected(STUB, 2, 1, M30, NONE, True, SHA1_SIGNED, True),
    "cpaStubEBF.rm.https.signed.sync.xml": Expected(STUB, 2, 1, M25, SYNC, True, SHA1_SIGNED),
    "cpaStubEBF.rm.https.signed.xml": Expected(STUB, 2, 1, M30, NONE, True, SHA1_SIGNED),
}


def test_the_folder_holds_the_16_agreements() -> None:
    folder = shared_dir() / "interop" / "cpas"
    assert sorted(p.name for p in folder.glob("*.xml")) == sorted(EXPECTED)


def _load(name: str) -> CollaborationProtocolAgreement:
    shared_dir()
    return load(CPAS / name)


def _reliable(channel: DeliveryChannel) -> bool:
    binding = channel.doc_exchange.sender_binding
    return binding is not None and binding.reliable_messaging is not None


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_agreement_loads_with_its_values(name: str) -> None:
    expected = EXPECTED[name]
    cpa = _load(name)
    assert cpa.cpaid == (expected.cpaid or name.removesuffix(".xml"))
    assert cpa.source == str(CPAS / name)
    assert cpa.status.value == "agreed" and cpa.signed is False
    assert cpa.end == datetime(2031, 1, 1, tzinfo=UTC)
    assert tuple(p.party_name for p in cpa.party_infos) == expected.parties
    port = {expected.parties[0]: 8888, expected.parties[1]: 8088}
    scheme = "https" if expected.https else "http"
    for party in cpa.party_infos:
        assert len(party.collaboration_roles) == expected.roles_per_party
        assert len(party.delivery_channels) == expected.channels_per_party
        assert sum(_reliable(c) for c in party.delivery_channels) == expected.reliable_channels_per_party
        assert party.default_msh_channel in party.delivery_channels
        for channel in party.delivery_channels:
            mc = channel.messaging_characteristics
            assert mc.sync_reply_mode is expected.sync_reply_mode
            receiver, sender = channel.transport.receiver, channel.transport.sender
            assert receiver is not None and sender is not None
            assert [e.uri for e in receiver.endpoints] == [f"{scheme}://localhost:{port[party.party_name]}/ebms"]
            client = sender.client_security
            if expected.https:
                # TLS client authentication: the client certificate is there and is an X.509 certificate.
                assert client is not None and client.certificate is not None
                assert client.certificate.cert_id.endswith(("ClientCert", "ClientCertificate"))
                assert x509.load_der_x509_certificate(client.certificate.x509[0]).serial_number > 0
                assert receiver.server_security is not None and receiver.server_security.certificate is not None
            else:
                assert client is None and receiver.server_security is None
            binding = channel.doc_exchange.sender_binding
            assert binding is not None
            if _reliable(channel):
                rm = binding.reliable_messaging
                assert rm is not None and (rm.retries, rm.retry_interval) == (5, XsDuration.parse("PT5M"))
                assert binding.persist_duration == expected.persist_duration
                assert mc.ack_requested is PerMessage.ALWAYS and mc.duplicate_elimination is PerMessage.ALWAYS
                assert mc.ack_signature_requested is expected.ack_signature_requested
            else:
                assert binding.persist_duration is None
                assert mc.ack_requested is PerMessage.NEVER and mc.ack_signature_requested is PerMessage.NEVER
            # The cpa-cv agreements have one plain best-effort and one plain reliable channel per party.
            plain = channel.channel_id.endswith(("_BE_Channel", "_RM_Channel"))
            nr = binding.non_repudiation
            if expected.signature is not None and not plain:
                assert nr is not None
                assert (nr.signature_algorithm, nr.hash_function) == expected.signature
                assert nr.certificate is not None and nr.certificate.x509
            else:
                assert nr is None
            envelope = binding.digital_envelope
            if expected.encrypted and (name.startswith("cpaStub") or "Encrypted" in channel.channel_id):
                assert envelope is not None and envelope.encryption_algorithm == AES256_CBC
                assert envelope.protocol == "XMLENC" and envelope.protocol_version == "1.0"
            else:
                assert envelope is None


def test_cv_agreements_have_several_channels_and_services() -> None:
    cpa = _load("cpa-cv-https.xml")
    provider = cpa.party_infos[0]
    assert [c.channel_id for c in provider.delivery_channels] == [
        f"ComplianceVoorziening_{kind}_Channel"
        for kind in ("BE", "BE_Signed", "BE_Encrypted", "RM", "RM_Signed", "RM_Encrypted")
    ]
    services = [r.service_binding.service_type for r in provider.collaboration_roles]
    kinds = ("be", "be:signed", "be:encrypted", "rm", "rm:signed", "rm:encrypted")
    assert services == [f"urn:cv:{kind}:services" for kind in kinds]
    for role in provider.collaboration_roles:
        assert role.service_binding.service == "EchoService$1.0"
        assert [a.action for a in role.service_binding.can_send] == ["EchoResponse"]
        assert [a.action for a in role.service_binding.can_receive] == ["EchoRequest"]
    # Every action binding uses the channel of its profile: RM_Signed for the rm:signed service.
    rm_signed = provider.collaboration_roles[4].service_binding
    assert [c.channel_id for c in rm_signed.can_send[0].channels] == ["ComplianceVoorziening_RM_Signed_Channel"]
    assert provider.default_msh_channel.channel_id == "ComplianceVoorziening_BE_Signed_Channel"


def test_encrypted_agreement_security_details() -> None:
    cpa = _load("cpaStubEBF.rm.https.signed.encrypted.xml")
    overheid = cpa.party_infos[1]
    channel = next(c for c in overheid.delivery_channels if c.channel_id.endswith("ReliableMessagingSigned"))
    receiver = channel.doc_exchange.receiver_binding
    assert receiver is not None and receiver.digital_envelope is not None
    assert receiver.digital_envelope.certificate is not None
    assert receiver.digital_envelope.certificate.cert_id == "OVERHEID_EncryptionCert"
    sender = channel.doc_exchange.sender_binding
    assert sender is not None and sender.digital_envelope is not None
    security = sender.digital_envelope.security_details
    assert security is not None and security.security_id == "OVERHEID_Security"
    assert [c.cert_id for c in security.trust_anchors] == ["OVERHEID_SigningCert", "OVERHEID_EncryptionCert"]
    btc = dict(overheid.collaboration_roles[0].service_binding.can_send[0].business_transaction_characteristics)
    assert btc["timeToPerform"] == "P2D" and btc["isNonRepudiationRequired"] == "true"


# --------------------------------------------------------------------------------------------------
# The project's samples under the official schema
# --------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("sample", ["demo-a-b.xml", "demo-routed-a-c.xml"])
def test_samples_are_valid_under_the_official_schema(sample: str) -> None:
    shared_dir()
    document = etree.parse(str(SAMPLES / sample))
    schema = etree.XMLSchema(etree.parse(str(OFFICIAL_XSD)))
    assert schema.validate(document), schema.error_log
    errors = list(xmlschema.XMLSchema10(str(OFFICIAL_XSD), allow="local", defuse="always").iter_errors(document))
    assert errors == []


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_cpa_validate_and_show_read_every_agreement(name: str, capsys: pytest.CaptureFixture[str]) -> None:
    """``msh cpa show`` reads every agreement ``msh cpa validate`` accepts, here agreements no one here wrote."""
    from msh.cli import main

    path = shared_dir() / "interop" / "cpas" / name
    assert main(["cpa", "validate", str(path)]) == 0
    assert capsys.readouterr().out.splitlines()[-1].startswith(f"{path}: ok")
    assert main(["cpa", "show", str(path)]) == 0
    out = capsys.readouterr().out
    cpa = load(path)
    assert out.startswith(f"{path}\ncpaid: {cpa.cpaid}")
    for party in cpa.party_infos:
        assert f"party {party.party_name}: " in out
        for channel in party.delivery_channels:
            assert f"channel {channel.channel_id} " in out
    if EXPECTED[name].persist_duration is not None:
        assert "retry interval 5 minutes" in out
        assert f"persist duration {EXPECTED[name].persist_duration.describe()}" in out
