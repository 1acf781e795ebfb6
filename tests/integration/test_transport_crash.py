"""Real processes over the other bindings (docs/transports): 500 signed messages A -> B over SMTP (ebMS2
Appendix B.3) and over an AMQP 1.0 broker while B is killed with SIGKILL and restarted at least twice; over
SMTP also with B reading a mailbox whose server is killed and restarted, over AMQP also with the broker
dropping every connection. Each message must reach B's application exactly once, payload intact, and end
acknowledged at A (ebMS2 §6: OnceAndOnlyOnce; the acknowledgment travelled back over the binding).
An intermediary bridges HTTPS to SMTP and to AMQP (ebMS2 §10).

The long forms are ``scripts/crash_test.py --transport smtp|amqp``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

import pytest

from msh.faults.bridge import run_bridge
from msh.faults.crash_transport import run_transport_crash_test
from msh.faults.transport_pair import TransportKind


def _broker() -> str:
    from msh.demos.transports import broker_problem

    problem = broker_problem("amqp://127.0.0.1:5672")
    if problem is not None:
        pytest.skip(f"no AMQP 1.0 broker on 127.0.0.1:5672: {problem}")
    return "amqp://127.0.0.1:5672"


def _check(report, messages: int) -> None:  # type: ignore[no-untyped-def]
    assert report.ok, report.summary()
    assert report.acknowledged == report.delivered_once == report.payloads_intact == messages, report.summary()
    assert report.delivered_twice_or_more == 0, report.summary()


def test_smtp_500_messages_with_the_receiver_killed_twice(tmp_path: Path) -> None:
    report = run_transport_crash_test(tmp_path / "run", "smtp", messages=500, kill_for=20.0, min_each=2, seed=7)
    assert dict(report.disruptions)["B killed"] >= 2, report.summary()
    _check(report, 500)


def test_smtp_through_a_mailbox_500_messages_with_the_receiver_and_the_mailbox_server_killed(tmp_path: Path) -> None:
    # B reads an IMAP mailbox (a private Dovecot) that a mail drop delivers A's mail into; B and the IMAP
    # server are each killed (SIGKILL) and restarted at least twice (ebMS2 B.3).
    from tests.support.dovecot import private_dovecot

    with private_dovecot() as server:
        report = run_transport_crash_test(
            tmp_path / "run", "smtp", messages=500, kill_for=20.0, min_each=2, seed=9, mailbox=server
        )
    disruptions = dict(report.disruptions)
    assert disruptions["B killed"] >= 2 and disruptions["mailbox server killed"] >= 2, report.summary()
    _check(report, 500)


def test_amqp_500_messages_with_the_receiver_killed_twice_and_connections_dropped(tmp_path: Path) -> None:
    url = _broker()
    report = run_transport_crash_test(
        tmp_path / "run", "amqp", messages=500, kill_for=20.0, min_each=2, seed=8, drop_connections=True, amqp_url=url
    )
    disruptions = dict(report.disruptions)
    assert disruptions["B killed"] >= 2 and disruptions["broker connections dropped"] >= 2, report.summary()
    _check(report, 500)


@pytest.mark.parametrize("direction", ["out", "in"])
@pytest.mark.parametrize("transport", ["smtp", "amqp"])
def test_an_intermediary_bridges_https_and_the_binding(
    tmp_path: Path, transport: TransportKind, direction: Literal["in", "out"]
) -> None:
    # ebMS2 §10: the intermediary takes each message on one binding and forwards it on the other ("out": it
    # takes HTTPS and forwards by mail or broker; "in": the other way round); C acknowledges end to end.
    url = _broker() if transport == "amqp" else "amqp://127.0.0.1:5672"
    report = run_bridge(tmp_path / "bridge", transport, direction=direction, messages=20, amqp_url=url)
    assert report.ok, report.summary()


def test_amqp_with_reliable_messaging_method_transport_the_broker_keeps_what_the_receiver_cannot_take(
    tmp_path: Path,
) -> None:
    # The reliable-messaging draft, "Queuing Transports": "use the facilities of the Queuing Transport to
    # determine if the message was delivered". B is down while A sends: the broker accepts and keeps every
    # message, A resends none (one hand-off each), and B's acknowledgments make them delivered once it is back.
    from msh.faults.crash_transport import run_broker_reliability

    url = _broker()
    report = run_broker_reliability(tmp_path / "run", messages=40, receiver_down_for=6.0, amqp_url=url)
    assert report.ok, report.summary()
