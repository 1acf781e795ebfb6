"""Why a transmission failed is recorded with each attempt, logged, and shown by ``msh status`` and ``send --wait``."""

from __future__ import annotations

import asyncio
import json
import logging
import ssl
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import timedelta
from pathlib import Path
from types import SimpleNamespace

import aiohttp
import pytest

from msh.cli import main
from msh.ebms.envelope import serialise_envelope
from msh.ebms.errorlist import error_message
from msh.ebms.message import ParseMode, parse_message
from msh.engine import OutboundStatus
from msh.errors import EbmsError, ErrorCode, Severity
from msh.faults.pair import ACTION, PARTY_B, SERVICE, Pair, make_pair
from msh.runtime.attempts import Attempt, attempts, transmission_detail
from msh.runtime.compose import Payload, Submission
from msh.runtime.config import load_settings
from msh.runtime.msh import Msh
from msh.security import load_certificates, load_private_key, sign
from msh.store import open_store
from msh.store.api import Direction, Event, OutboundMessage, utc_now
from msh.testing.network import TestNetwork
from msh.testing.threaded import serving_in_thread
from msh.transport.http import describe_failure as transport_error
from msh.transport.http import may_have_arrived
from msh.transport.port import SOAP_CONTENT_TYPE
from tests.support.endpoint import RSA_SHA256, SHA256
from tests.support.json_keys import keys_off_convention
from tests.unit.runtime.test_api import settings as network_settings

URL = "https://127.0.0.1:9/msh"
CONFIG = Path(__file__).resolve().parents[3] / "samples" / "config"


def submission() -> Submission:
    return Submission(PARTY_B, SERVICE, ACTION, (Payload(b"<order/>", "application/xml"),))


def finished(msh: Msh, message_id: str) -> list[Attempt]:
    return [a for a in msh.attempts(message_id) if a.finished]


@pytest.fixture
def partner_down(tmp_path: Path) -> Pair:
    """A and B of the demo agreement, B never started: A's transmissions are refused. The first resend
    comes 0.3 s after the first transmission, the next one 30 s later (the test never waits for it)."""
    return make_pair(
        tmp_path / "pair",
        retries=3,
        retry_interval="PT30S",
        first_resend="PT0.3S",
        http_timeout="PT0.25S",
        proxy=False,
    )


@contextmanager
def running(msh: Msh) -> Iterator[None]:
    """``serve`` on a loop in a thread, stopped at the end (bounded)."""
    with serving_in_thread(msh.settings, msh):
        yield


# ----------------------------------------------------------------------------------- a partner that is down


def test_a_partner_that_is_down_each_attempt_records_and_logs_why(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    caplog: pytest.LogCaptureFixture,
) -> None:
    # On the test network, with A's store an SQLite file that msh status then reads.
    store_path = tmp_path / "a.sqlite"
    caplog.set_level(logging.WARNING, logger="msh.runtime")
    url = "https://127.0.0.1:8082/msh"

    async def scenario() -> tuple[str, list[Attempt], OutboundMessage | None]:
        net = TestNetwork(seed=1)
        a = net.add("a", network_settings("a"), store=open_store(str(store_path)))
        net.add("b", network_settings("b"))
        net.faults.down.add(url)
        await net.start()
        try:
            message_id = await a.submit_async(submission())
            await net.advance(timedelta(seconds=5))  # the first resend (the RetryInterval, PT5S)
            return message_id, finished(a, message_id), a.status(message_id)
        finally:
            await net.close()
            net.nodes["a"].store.close()

    message_id, tried, stored = asyncio.run(scenario())
    assert [a.number for a in tried] == [1, 2]
    for attempt in tried:
        assert attempt.failed and attempt.url == url and attempt.http_status is None
        assert attempt.error == f"connection refused ({url})"
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert f"transmission 1 of {message_id} failed: connection refused ({url})" in warnings
    assert stored is not None and stored.state.next_due_at is not None

    monkeypatch.setenv("MSH_STORE_URL", str(store_path))
    config = str(CONFIG / "party-a.toml")
    assert main(["status", "--config", config, message_id]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == (
        f"{message_id}: awaiting-ack (transmitted; waiting for the acknowledgment), 2 transmission(s), to "
        f"{PARTY_B[1]}:{PARTY_B[0]} ({ACTION})"
    )
    assert out[1] == f"  transmission 1 at 2026-12-01T09:00:00Z: failed: {tried[0].error}"
    assert out[2] == f"  transmission 2 at 2026-12-01T09:00:05Z: failed: {tried[1].error}"
    due = stored.state.next_due_at.isoformat(timespec="seconds").replace("+00:00", "Z")
    assert out[3] == f"  next attempt at {due}"

    assert main(["status", "--config", config, "--json", message_id]) == 0
    [shown] = json.loads(capsys.readouterr().out)
    assert keys_off_convention(shown) == []  # the project's JSON convention, transmissions included
    assert shown["nextAttemptAt"] == stored.state.next_due_at.isoformat() and shown["givesUpAt"] is None
    assert (shown["status"], shown["evidence"], shown["final"]) == ("awaiting-ack", "transmission", False)
    assert shown["mayHaveBeenDelivered"] is False and shown["receiptProblem"] is None
    first = shown["transmissions"][0]
    assert (first["attempt"], first["url"], first["httpStatus"], first["error"]) == (1, url, None, tried[0].error)


def test_send_wait_says_partner_not_reachable_with_the_last_error(
    partner_down: Pair, capsys: pytest.CaptureFixture[str]
) -> None:
    pair = partner_down
    msh = Msh(load_settings(pair.a.config, env={}))  # the running MSH; msh send uses the same store
    try:
        with running(msh):
            status = main(
                [
                    "send",
                    "--config",
                    str(pair.a.config),
                    "--to",
                    PARTY_B[0],
                    "--service",
                    SERVICE,
                    "--action",
                    ACTION,
                    "--wait",
                    "3",
                ]
            )
    finally:
        msh.close()
    captured = capsys.readouterr()
    message_id = captured.out.strip()
    assert status == 3
    [line] = captured.err.strip().splitlines()
    assert line.startswith(
        f"{message_id}: partner not reachable (connection refused by 127.0.0.1:{pair.b_public_port} "
    ), line
    assert "still queued after" in line and "next attempt at" in line and "is msh serve running" not in line


# ----------------------------------------------------------------------------------- answers that refuse


def _answer_unit(tmp_path: Path) -> tuple[Msh, str]:
    pair = make_pair(tmp_path / "pair", proxy=False)
    msh = Msh(load_settings(pair.a.config, env={}))
    return msh, msh.submit(submission())


def _error_list_from_b(msh: Msh, message_id: str) -> bytes:
    stored = msh.status(message_id)
    assert stored is not None
    with msh.store.open_blob(stored.body_blob_id) as blob:
        sent = parse_message(blob.read(), stored.content_type, mode=ParseMode.LENIENT)
    header = sent.envelope.message_header
    sent.close()
    assert header is not None
    refusal = EbmsError(
        "the order number is unknown",
        error_code=ErrorCode.VALUE_NOT_RECOGNIZED,
        severity=Severity.ERROR,
        location="//Header/MessageHeader/Action",
    )
    reply = error_message(refusal, in_reply_to=header, message_id="err-1@party-b.example", timestamp=utc_now())
    # The agreement's signal channel has B sign its signals (ebMS2 §4.1.3): an unsigned ErrorList is refused.
    keys = CONFIG.parent / "keys"
    key, [certificate] = load_private_key(keys / "party-b.key.pem"), load_certificates(keys / "party-b.cert.pem")
    return sign(serialise_envelope(reply), {}, key, certificate, RSA_SHA256, SHA256)


def test_an_error_list_received_is_stored_with_the_attempt(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    msh, message_id = _answer_unit(tmp_path)
    try:
        body = _error_list_from_b(msh, message_id)
        asyncio.run(msh.sender.outcome(message_id, 1, URL, 200, SOAP_CONTENT_TYPE, body))
        [attempt] = msh.attempts(message_id)
        stored = msh.status(message_id)
    finally:
        msh.close()
    assert (attempt.number, attempt.url, attempt.http_status, attempt.answer, attempt.error) == (
        1,
        URL,
        200,
        "ErrorList",
        None,
    )
    [error] = attempt.errors
    assert (error.error_code, error.severity, error.location, error.description) == (
        "ValueNotRecognized",
        "Error",
        "//Header/MessageHeader/Action",
        "the order number is unknown",
    )
    assert attempt.failed and attempt.reason() == str(error)
    assert stored is not None and stored.state.status is OutboundStatus.FAILED


def test_an_http_error_status_is_a_failed_attempt(tmp_path: Path) -> None:
    msh, message_id = _answer_unit(tmp_path)
    try:
        asyncio.run(msh.sender.outcome(message_id, 1, URL, 503, "text/plain", b"try later"))
        [attempt] = msh.attempts(message_id)
    finally:
        msh.close()
    assert (attempt.http_status, attempt.error, attempt.answer) == (
        503,
        "HTTP 503 from the peer",
        "not an ebXML message",
    )
    assert attempt.failed


# ------------------------------------------------------------------------------------------- the words


def _key(host: str = "partner.example", port: int = 443) -> SimpleNamespace:
    return SimpleNamespace(host=host, port=port, ssl=True)


@pytest.mark.parametrize(
    ("exc", "expected", "transmitted"),
    [
        (TimeoutError(), f"no answer within 2 s from {URL}", True),
        (aiohttp.SocketTimeoutError(), f"no answer within 2 s from {URL}", True),
        (aiohttp.ConnectionTimeoutError(), f"no connection within 1 s to {URL}", False),
        (
            aiohttp.ClientConnectorError(_key(), ConnectionRefusedError(111, "Connect call failed")),  # type: ignore[arg-type]
            f"connection refused by partner.example:443 ({URL})",
            False,
        ),
        (
            aiohttp.ClientConnectorError(_key(), OSError(113, "No route to host")),  # type: ignore[arg-type]
            f"cannot connect to partner.example:443: No route to host ({URL})",
            False,
        ),
        (aiohttp.ServerDisconnectedError(), f"the connection was closed before an answer came from {URL}", True),
        (ConnectionResetError(104, "Connection reset by peer"), f"the connection was reset by {URL}", True),
        (
            ssl.SSLError(1, "[SSL: TLSV1_ALERT_UNKNOWN_CA] tlsv1 alert unknown ca"),
            f"TLS failure ([SSL: TLSV1_ALERT_UNKNOWN_CA] tlsv1 alert unknown ca) at {URL}",
            True,
        ),
    ],
)
def test_transport_errors_in_words(exc: BaseException, expected: str, transmitted: bool) -> None:
    assert transport_error(exc, url=URL, timeout_s=2, connect_timeout_s=1) == expected
    # ebMS2 §6.5.7: "could not transmit" only when no connection was made (aiohttp writes nothing before); a
    # timeout, a reset or a closed connection after the request could have left may have delivered it.
    assert may_have_arrived(exc) is transmitted


def test_an_untrusted_server_certificate_is_a_tls_failure() -> None:
    cause = ssl.SSLCertVerificationError(1, "certificate verify failed")
    cause.verify_message = "self-signed certificate"
    exc = aiohttp.ClientConnectorCertificateError(_key(), cause)  # type: ignore[arg-type]
    text = transport_error(exc, url=URL, timeout_s=2, connect_timeout_s=1)
    assert text == f"TLS failure: the partner's certificate was not accepted (self-signed certificate) at {URL}"


def test_attempts_read_back_from_the_journal_in_order() -> None:
    t = utc_now()

    def event(i: int, kind: str, detail: dict[str, object]) -> Event:
        return Event(i, t + timedelta(seconds=i), kind, "m@x", Direction.OUTBOUND, detail)

    events = [
        event(1, "submitted", {}),
        event(2, "transmission", transmission_detail(1, URL, error="connection refused")),
        event(3, "resent", {"attempt": 2}),
        event(4, "transmission", transmission_detail(2, URL, http_status=200, answer="ErrorList")),
        event(5, "error-received", {"attempt": 2, "errors": [{"errorCode": "Inconsistent", "severity": "Warning"}]}),
        event(6, "resent", {"attempt": 3}),
    ]
    one, two, three = attempts(events)
    assert (one.number, one.failed, one.reason()) == (1, True, "connection refused")
    assert (two.http_status, two.answer, two.failed, [str(e) for e in two.errors]) == (
        200,
        "ErrorList",
        False,  # a Warning does not refuse the message (ebMS2 §4.2.3.2.4)
        ["Warning Inconsistent"],
    )
    assert (three.number, three.finished, three.at) == (3, False, t + timedelta(seconds=6))
