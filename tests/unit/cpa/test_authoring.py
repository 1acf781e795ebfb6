"""cpa.authoring: agreements written from a few answers are schema-valid, load, are usable by the MSH, and
mean what the answers say (checked through cpa.resolve, the way the MSH reads them)."""

from __future__ import annotations

import dataclasses
import itertools
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from cryptography import x509

from cpa import load
from cpa.authoring import Answers, Direction, Exchange, PartyAnswers, agreement_bytes, answer_problems
from cpa.interactions import interaction_problems
from cpa.model import PerMessage, SyncReplyMode
from cpa.resolve import AgreementRefused, SendingParameters, resolve
from cpa.resolve import Exchange as Question
from msh.security.agreement import agreement_security_problems

KEYS = Path(__file__).resolve().parents[3] / "samples" / "keys"
NOW = datetime(2026, 12, 1, tzinfo=UTC)
OURS = ("123456789", "urn:oasis:names:tc:ebcore:partyid-type:iso6523:0088")
THEIRS = ("urn:example:partner", None)


def _cert(name: str) -> x509.Certificate:
    return x509.load_pem_x509_certificate((KEYS / f"{name}.cert.pem").read_bytes())


def answers(scheme: str = "http", **changes: object) -> Answers:
    base = Answers(
        ours=PartyAnswers(*OURS, f"{scheme}://127.0.0.1:9001/msh", _cert("party-a")),
        theirs=PartyAnswers(*THEIRS, f"{scheme}://partner.example:443/msh", _cert("party-b")),
        service="urn:example:services:ordering",
        exchanges=(Exchange("NewOrder"), Exchange("Order Response", Direction.RECEIVE)),
        cpa_id="cpa-test",
        start=NOW - timedelta(days=1),
        end=NOW + timedelta(days=365),
    )
    return dataclasses.replace(base, **changes)  # type: ignore[arg-type]


def ask(cpa_bytes: bytes, action: str, ours_sends: bool = True) -> SendingParameters:
    """How the MSH sends ``action`` under the agreement: from our party, or (``ours_sends`` False) to it."""
    sender, receiver = (OURS, THEIRS) if ours_sends else (THEIRS, OURS)
    return resolve(load(cpa_bytes), Question(sender, receiver, "urn:example:services:ordering", action), now=NOW)


@pytest.mark.parametrize(
    ("reliable", "sign", "encrypt", "sync_acks", "scheme"),
    list(itertools.product((False, True), (False, True), (False, True), (False, True), ("http", "https"))),
)
def test_every_combination_is_schema_valid_loads_and_is_usable(
    reliable: bool, sign: bool, encrypt: bool, sync_acks: bool, scheme: str
) -> None:
    given = answers(scheme, reliable=reliable, sign=sign, encrypt=encrypt, sync_acks=sync_acks)
    assert answer_problems(given) == []
    cpa = load(agreement_bytes(given))  # the schema, every reference, certificates, algorithms
    assert cpa.warnings == ()
    assert agreement_security_problems(cpa) == [] and interaction_problems(cpa) == []
    sent = ask(agreement_bytes(given), "NewOrder")
    received = ask(agreement_bytes(given), "Order Response", ours_sends=False)
    for params in (sent, received):
        m = params.messaging
        expected = PerMessage.ALWAYS if reliable else PerMessage.NEVER
        assert (m.ack_requested, m.duplicate_elimination) == (expected, expected)
        assert m.ack_signature_requested is PerMessage.NEVER
        assert m.sync_reply_mode is (SyncReplyMode.MSH_SIGNALS_ONLY if sync_acks else SyncReplyMode.NONE)
        assert (params.reliable_messaging is not None) == reliable
        assert (params.doc_exchange.signing is not None) == sign
        assert (params.doc_exchange.encryption is not None) == encrypt
        assert (params.transport.tls_protocol == "TLS") == (scheme == "https")
    assert sent.transport.endpoint_url == f"{scheme}://partner.example:443/msh"
    assert received.transport.endpoint_url == f"{scheme}://127.0.0.1:9001/msh"


def test_reliable_messaging_carries_the_retries_interval_and_persist_duration() -> None:
    params = ask(agreement_bytes(answers(reliable=True, retries=7, retry_interval="PT10S")), "NewOrder")
    assert params.reliable_messaging is not None
    assert params.reliable_messaging.retries == 7
    assert params.reliable_messaging.retry_interval.describe() == "10 seconds"
    assert params.doc_exchange.persist_duration is not None


def test_signing_names_each_sender_s_certificate_and_encryption_the_receiver_s() -> None:
    data = agreement_bytes(answers(sign=True, encrypt=True))
    sent, received = ask(data, "NewOrder"), ask(data, "Order Response", ours_sends=False)
    assert sent.doc_exchange.signing is not None and sent.doc_exchange.signing.certificate is not None
    assert sent.doc_exchange.signing.certificate.cert_id == "A_Cert"
    assert received.doc_exchange.signing is not None and received.doc_exchange.signing.certificate is not None
    assert received.doc_exchange.signing.certificate.cert_id == "B_Cert"
    assert sent.doc_exchange.encryption is not None and sent.doc_exchange.encryption.certificate is not None
    assert sent.doc_exchange.encryption.certificate.cert_id == "B_Cert"


def test_actions_go_only_the_way_the_answers_say() -> None:
    data = agreement_bytes(answers())
    with pytest.raises(AgreementRefused):
        ask(data, "NewOrder", ours_sends=False)
    with pytest.raises(AgreementRefused):
        ask(data, "Order Response")


def test_the_validity_window_is_the_answers() -> None:
    cpa = load(agreement_bytes(answers()))
    assert (cpa.start, cpa.end) == (NOW - timedelta(days=1), NOW + timedelta(days=365))
    assert cpa.cpaid == "cpa-test"


@pytest.mark.parametrize(
    ("changes", "expected"),
    [
        (
            {"sign": True, "ours": PartyAnswers(*OURS, "http://a/msh")},
            "signing need both parties' certificates, and ours is missing",
        ),
        (
            {"ours": PartyAnswers(*OURS, "https://a/msh"), "theirs": PartyAnswers(*THEIRS, "http://b/msh")},
            "https need both parties' certificates, and ours and the partner's are missing",
        ),
        ({"encrypt": True, "theirs": PartyAnswers(*THEIRS, "http://b/msh")}, "encryption need both"),
        ({"ours": PartyAnswers(*OURS, "ftp://a/msh", None)}, "our URL 'ftp://a/msh' is not an http:// or https:// URL"),
        ({"theirs": PartyAnswers(*THEIRS, "b.example", None)}, "their URL 'b.example' is not"),
        ({"service": "Ordering"}, "service 'Ordering' is not a URI"),
        ({"exchanges": ()}, "no action given"),
        ({"exchanges": (Exchange("A"), Exchange("A"))}, "an action is given twice"),
        ({"end": NOW - timedelta(days=2)}, "ends before it starts"),
        ({"cpa_id": "a\x01b"}, "control character"),
        ({"theirs": PartyAnswers(*OURS, "http://b/msh")}, "our PartyId and the partner's are the same"),
    ],
)
def test_bad_answers_are_each_named(changes: dict[str, object], expected: str) -> None:
    problems = answer_problems(answers(**changes))
    assert any(expected in p for p in problems), problems


def test_a_service_that_is_not_a_uri_is_fine_with_its_type() -> None:
    given = answers(service="Ordering", service_type="example-services")
    assert answer_problems(given) == []
    service = load(agreement_bytes(given)).party_infos[0].collaboration_roles[0].service_binding
    assert (service.service, service.service_type) == ("Ordering", "example-services")
