"""How the AMQP receiver settles a message by the pipeline's answer (AMQP 1.0 §3.4 delivery states), and the
``[amqp]`` settings' own checks. No broker: the answers are made here."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest

from msh.ebms.envelope import serialise_envelope
from msh.ebms.errorlist import soap_fault
from msh.errors import ErrorCode, Issue, Severity
from msh.runtime.amqp_receiver import NOT_EBXML, REFUSED, AmqpReceiver, settlement_of
from msh.runtime.config import (
    AgreementSettings,
    IdentitySettings,
    ServerSettings,
    Settings,
    SettingsError,
    StoreSettings,
)
from msh.runtime.config.amqp import AmqpSettings
from msh.runtime.receivers import receivers_from
from msh.runtime.transports import transports_from
from msh.transport.amqp import AmqpTransport
from msh.transport.amqp_thread import Outcome, Settlement
from msh.transport.port import SOAP_CONTENT_TYPE, HttpReply

CPA = Path(__file__).resolve().parents[3] / "samples" / "cpas" / "demo-a-b.xml"
ISSUE = Issue(ErrorCode.SECURITY_FAILURE, Severity.ERROR, "the signature does not verify", "//Header/Signature")


def fault(*, server: bool) -> HttpReply:
    return HttpReply(500, SOAP_CONTENT_TYPE, serialise_envelope(soap_fault(ISSUE, server=server)))


def test_a_committed_message_is_accepted() -> None:
    # §3.4.2 accepted: the pipeline answered 2xx (202: nothing on the connection, 200: an acknowledgment).
    assert settlement_of(HttpReply(202)) == Settlement(Outcome.ACCEPTED)
    assert settlement_of(HttpReply(200, SOAP_CONTENT_TYPE, b"<not-parsed-as-a-refusal/>")).outcome is Outcome.ACCEPTED


def test_a_refusal_is_rejected_with_the_ebms_error_even_when_it_answers_202() -> None:
    # ebMS2 §4.2.4: the refusal's error went elsewhere (or nowhere); §3.4.3 rejected carries it.
    refusal = "Error ValueNotRecognized at //Header/MessageHeader/CPAId: CPAId 'x' names no agreement known here"
    settled = settlement_of(HttpReply(202, refusal=refusal))
    assert settled == Settlement(Outcome.REJECTED, REFUSED, f"ebMS {refusal}")


def test_a_client_fault_is_rejected_and_a_server_fault_delivered_again() -> None:
    # SOAP 1.1 §4.4.1: Client, "should not be resent without change": §3.4.3 rejected; Server, "may succeed at
    # a later point in time": §3.4.5 modified (delivery-failed), the broker delivers it again.
    client = settlement_of(fault(server=False))
    assert (client.outcome, client.condition) == (Outcome.REJECTED, NOT_EBXML)
    assert "SOAP:Client" in (client.description or "") and "SecurityFailure" in (client.description or "")
    assert settlement_of(fault(server=True)).outcome is Outcome.MODIFIED


@pytest.mark.parametrize(
    ("status", "outcome"), [(400, Outcome.REJECTED), (415, Outcome.REJECTED), (503, Outcome.MODIFIED)]
)
def test_other_statuses_follow_their_meaning(status: int, outcome: Outcome) -> None:
    # RFC 9110 §15.5: a 4xx refuses the request; §15.6: a 5xx is the server's trouble.
    assert settlement_of(HttpReply(status)).outcome is outcome


def settings(**amqp: object) -> Settings:
    return Settings(
        IdentitySettings("urn:x:1"),
        AgreementSettings((CPA,)),
        StoreSettings("memory:"),
        ServerSettings(tls=False),
        amqp=AmqpSettings(**amqp),  # type: ignore[arg-type]
    )


def test_receiving_needs_a_queue() -> None:
    with pytest.raises(SettingsError, match=r"amqp\.enabled is true but amqp\.url is empty"):
        settings(enabled=True)
    assert settings(enabled=True, url="amqp://127.0.0.1/queue/ebms-b").amqp.enabled


@pytest.mark.parametrize(
    ("amqp", "words"),
    [
        ({"url": "amqp://guest:guest@127.0.0.1/queue/x"}, "carries credentials"),
        ({"reply_to": "http://127.0.0.1/msh"}, "is not an amqp: or amqps: URL"),
        ({"password": "guest"}, "is not env:VARIABLE or file:PATH"),
        ({"credit": 0}, "less than 1"),
        ({"sasl_mechanisms": "PLAIN;EXTERNAL"}, "is not a list of SASL mechanisms"),
    ],
)
def test_bad_amqp_settings_are_named(amqp: dict[str, object], words: str) -> None:
    with pytest.raises(SettingsError, match=words) as caught:
        AmqpSettings(**amqp)  # type: ignore[arg-type]
    assert ":guest@" not in str(caught.value)


def test_the_receiver_runs_beside_the_endpoint_only_when_enabled() -> None:
    transport = transports_from(settings())
    msh = SimpleNamespace(transport=transport)
    url = "amqp://127.0.0.1:5672/queue/ebms-b"
    assert receivers_from(settings(url=url), msh) == []  # type: ignore[arg-type]
    (receiver,) = receivers_from(settings(enabled=True, url=url), msh)  # type: ignore[arg-type]
    assert isinstance(receiver, AmqpReceiver)
    assert receiver.announce == f"receiving ebXML messages from {url} (AMQP 1.0, credit 32)"


def test_amqp_endpoints_are_sent_through_the_broker_whatever_enabled_says() -> None:
    transport = transports_from(settings())
    assert isinstance(transport.for_url("amqp://127.0.0.1/queue/x"), AmqpTransport)
    assert transport.for_url("amqps://mq.example/x") is transport.for_url("amqp://127.0.0.1/queue/x")
