"""Sending by e-mail (msh.transport.smtp) against a real SMTP server (aiosmtpd) started here on 127.0.0.1: what the
relay takes, what it refuses, TLS, log-in, size limits, kept connections (ebMS2 Appendix B.3, RFC 5321)."""

from __future__ import annotations

import asyncio
import contextlib
import io
import ipaddress
import socket
import ssl
import tomllib
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from email import policy
from email.parser import BytesParser
from pathlib import Path
from typing import Any

import pytest
from aiosmtpd.controller import Controller
from aiosmtpd.smtp import SMTP as SmtpServer
from aiosmtpd.smtp import AuthResult, Envelope, LoginPassword, Session
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from cpa import load
from msh.ebms.message import ParseMode, parse_message
from msh.engine import OutboundStatus
from msh.runtime.compose import Payload, Submission
from msh.runtime.config import settings_from_mapping
from msh.runtime.msh import Msh
from msh.runtime.transports import transports_from
from msh.transport.port import BodySource, Request, TransportFailure
from msh.transport.smtp import SmtpTransport, relay_tls_context
from tests.support.mail_agreements import sync_none, with_b_receiving
from tests.support.secure_network import ACTION, PARTY_B, SERVICE

SAMPLES = Path(__file__).resolve().parents[2] / "samples"
FROM, TO = "msh-a@a.example", "msh-b@b.example"
BODY = b'<?xml version="1.0" encoding="UTF-8"?>\r\n<SOAP:Envelope xmlns:SOAP="x"/>'
PASSWORD_VARIABLE = "MSH_TEST_SMTP_PASSWORD"


def request(body: bytes | BodySource = BODY, *, message_id: str = "m-1@a.example", to: str = TO) -> Request:
    return Request(f"mailto:{to}", 'text/xml; charset="UTF-8"', body, message_id=message_id)


@dataclass
class Relay:
    """What the test relay saw: each accepted mail (envelope sender, recipients, content, client address)."""

    mails: list[tuple[str, list[str], bytes, object]] = field(default_factory=list)
    refuse_rcpt: str | None = None
    refuse_data: str | None = None
    hang_after_data: asyncio.Event | None = None
    close_after_data: bool = False

    async def handle_RCPT(
        self, server: SmtpServer, session: Session, envelope: Envelope, address: str, options: list[str]
    ) -> str:
        if self.refuse_rcpt is not None:
            return self.refuse_rcpt
        envelope.rcpt_tos.append(address)
        return "250 OK"

    async def handle_DATA(self, server: SmtpServer, session: Session, envelope: Envelope) -> str:
        if self.refuse_data is not None:
            return self.refuse_data
        if self.hang_after_data is not None:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.hang_after_data.wait(), 10)
        content = envelope.original_content or b""
        self.mails.append((str(envelope.mail_from), list(envelope.rcpt_tos), content, session.peer))
        if self.close_after_data:
            # The relay drops the connection once it has answered (as one does after its idle timeout).
            asyncio.get_running_loop().call_soon(server.transport.close)
        return "250 2.0.0 queued"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextlib.contextmanager
def relay(handler: Relay, **smtp: Any) -> Iterator[int]:
    """An aiosmtpd server on 127.0.0.1 (a free port) with ``handler``; its port. Skipped if it cannot start."""
    port = free_port()
    controller = Controller(handler, hostname="127.0.0.1", port=port, ready_timeout=10, **smtp)
    try:
        controller.start()
    except (OSError, RuntimeError, TimeoutError) as exc:
        pytest.skip(f"the test SMTP server (aiosmtpd) could not start on 127.0.0.1: {exc}")
    try:
        yield port
    finally:
        controller.stop()


@dataclass(frozen=True)
class Pki:
    ca: Path
    server: ssl.SSLContext


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    """A CA and the relay's certificate for 127.0.0.1 and localhost, made for this test."""
    folder = tmp_path_factory.mktemp("relay-pki")
    now = datetime.now(UTC)
    ca_key, leaf_key = ec.generate_private_key(ec.SECP256R1()), ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "test relay CA")])
    ca = (
        x509.CertificateBuilder()
        .subject_name(ca_name)
        .issuer_name(ca_name)
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - timedelta(days=1))
        .not_valid_after(now + timedelta(days=2))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .add_extension(x509.KeyUsage(False, False, False, False, False, True, True, False, False), critical=True)
        .sign(ca_key, hashes.SHA256())
    )
    leaf = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")]))
        .issuer_name(ca_name)
        .public_key(leaf_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - timedelta(days=1))
        .not_valid_after(now + timedelta(days=2))
        .add_extension(
            x509.SubjectAlternativeName([x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
            critical=False,
        )
        .sign(ca_key, hashes.SHA256())
    )
    (folder / "ca.pem").write_bytes(ca.public_bytes(serialization.Encoding.PEM))
    (folder / "relay.pem").write_bytes(leaf.public_bytes(serialization.Encoding.PEM))
    (folder / "relay.key").write_bytes(
        leaf_key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )
    )
    server = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    server.load_cert_chain(folder / "relay.pem", folder / "relay.key")
    return Pki(folder / "ca.pem", server)


def transport(port: int, **options: Any) -> SmtpTransport:
    return SmtpTransport(
        host="127.0.0.1", port=port, from_address=FROM, security=options.pop("security", "none"), **options
    )


def send(t: SmtpTransport, *requests: Request) -> list[object]:
    """Send each request in turn (one event loop), then close the transport: the response or the failure of each."""

    async def run() -> list[object]:
        outcomes: list[object] = []
        try:
            for r in requests:
                try:
                    outcomes.append(await t.send(r))
                except TransportFailure as failure:
                    outcomes.append(failure)
        finally:
            await t.close()
        return outcomes

    return asyncio.run(run())


# --------------------------------------------------------------------------------------------- accepted


def test_a_mail_the_relay_accepts_is_a_transmission_received_by_the_next_hop() -> None:
    handler = Relay()
    with relay(handler) as port:
        [response] = send(transport(port), request())
    # ebMS2 B.2.3 applied to the relay (RFC 5321 §4.1.1.4: 250 after the data = responsibility taken).
    assert (response.status, response.content_type, response.body) == (202, None, b"")  # type: ignore[attr-defined]
    [(sender, recipients, content, _)] = handler.mails
    # ebMS2 B.3.2: From and To are the MSHs' addresses; RFC 5321 §3.3: so are MAIL FROM and RCPT TO.
    assert (sender, recipients) == (FROM, [TO])
    mail = BytesParser(policy=policy.default).parsebytes(content)
    assert (mail["From"], mail["To"], mail["Message-ID"]) == (FROM, TO, "<m-1@a.example>")
    assert mail["SOAPAction"] == '"ebXML"' and mail["MIME-Version"] == "1.0"
    # The data ends with a line end (RFC 5321 §4.1.1.4): after the root element, white space (XML 1.0 §2.8 Misc).
    assert mail.get_payload(decode=True) == BODY + b"\r\n"


def test_a_body_source_is_read_and_a_kept_connection_serves_the_next_mail() -> None:
    handler = Relay()
    source = BodySource(len(BODY), lambda: io.BytesIO(BODY))
    with relay(handler) as port:
        outcomes = send(transport(port), request(source), request(message_id="m-2@a.example"))
    assert [o.status for o in outcomes] == [202, 202]  # type: ignore[attr-defined]
    assert len(handler.mails) == 2
    assert handler.mails[0][3] == handler.mails[1][3]  # the same client address and port: one connection


def test_mails_sent_at_once_share_at_most_max_connections() -> None:
    handler = Relay()

    async def run(port: int) -> list[int]:
        t = transport(port, max_connections=2)
        try:
            responses = await asyncio.gather(*(t.send(request(message_id=f"m-{i}@a.example")) for i in range(6)))
        finally:
            await t.close()
        return [r.status for r in responses]

    with relay(handler) as port:
        assert asyncio.run(run(port)) == [202] * 6
    assert len(handler.mails) == 6
    assert len({peer for *_, peer in handler.mails}) <= 2


def test_a_connection_the_relay_closed_is_replaced_before_the_next_mail() -> None:
    handler = Relay(close_after_data=True)
    with relay(handler) as port:
        outcomes = send(transport(port), request(), request(message_id="m-2@a.example"))
    assert [o.status for o in outcomes] == [202, 202]  # type: ignore[attr-defined]
    assert len(handler.mails) == 2 and handler.mails[0][3] != handler.mails[1][3]


# --------------------------------------------------------------------------------------------- refused


@pytest.mark.parametrize(
    ("refusal", "where"),
    [
        ({"refuse_rcpt": "550 5.1.1 no such mailbox"}, "RCPT TO <msh-b@b.example> with 550 5.1.1 no such mailbox"),
        ({"refuse_rcpt": "451 4.3.0 try again later"}, "RCPT TO <msh-b@b.example> with 451 4.3.0 try again later"),
        ({"refuse_data": "550 5.7.1 content rejected"}, "the mail with 550 5.7.1 content rejected"),
        ({"refuse_data": "451 4.3.0 queue full"}, "the mail with 451 4.3.0 queue full"),
    ],
)
def test_a_refusal_by_the_relay_is_a_failure_that_never_transmitted(refusal: dict[str, str], where: str) -> None:
    # RFC 5321 §4.2.1: 4yz and 5yz refuse the command; after the data, the mail is not taken (§4.1.1.4), so the
    # message was not transmitted (ebMS2 §6.5.7).
    handler = Relay(**refusal)  # type: ignore[arg-type]
    with relay(handler) as port:
        [failure] = send(transport(port), request())
    assert isinstance(failure, TransportFailure) and failure.transmitted is False
    assert f"refused {where}" in failure.reason and "mailto:msh-b@b.example" in failure.reason
    assert handler.mails == []


def test_nothing_listening_is_a_failure_that_never_transmitted() -> None:
    [failure] = send(transport(free_port()), request())
    assert isinstance(failure, TransportFailure) and failure.transmitted is False
    assert "no connection to the relay" in failure.reason


def test_no_answer_after_the_end_of_the_mail_may_have_transmitted_it() -> None:
    async def run() -> object:
        handler = Relay(hang_after_data=asyncio.Event())
        with relay(handler) as port:
            t = transport(port, timeout=0.5)
            try:
                return await t.send(request())
            except TransportFailure as failure:
                return failure
            finally:
                await t.close()

    failure = asyncio.run(run())
    assert isinstance(failure, TransportFailure) and failure.transmitted is True
    assert "may have taken it" in failure.reason


# ---------------------------------------------------------------------------------------------- limits


def test_a_message_over_max_message_bytes_is_not_sent() -> None:
    handler = Relay()
    opened: list[int] = []

    def open_body() -> io.BytesIO:
        opened.append(1)
        return io.BytesIO(b"x" * 5000)

    source = BodySource(5000, open_body)
    with relay(handler) as port:
        [failure] = send(transport(port, max_message_bytes=4096), request(source))
    assert isinstance(failure, TransportFailure) and failure.transmitted is False
    assert "more than smtp.max_message_bytes = 4096" in failure.reason and "over HTTP" in failure.reason
    assert opened == [] and handler.mails == []


def test_a_mail_over_the_relays_size_is_not_sent() -> None:
    # RFC 1870 §4: the relay announces SIZE; a larger mail would be refused after it had been sent whole.
    handler = Relay()
    with relay(handler, data_size_limit=2000) as port:
        [failure] = send(transport(port), request(b"<a>" + b"x" * 3000 + b"</a>"))
    assert isinstance(failure, TransportFailure) and failure.transmitted is False
    assert "more than the 2000 the relay takes (its SIZE, RFC 1870)" in failure.reason
    assert handler.mails == []


# ------------------------------------------------------------------------------------------ TLS, log-in


def _settings(port: int, ca: Path, **smtp: Any) -> Any:
    data = tomllib.loads((SAMPLES / "config" / "party-a.toml").read_text(encoding="utf-8"))
    data["store"] = {"url": "memory:"}
    data["smtp"] = {
        "host": "127.0.0.1",
        "port": port,
        "security": "starttls",
        "from_address": FROM,
        "trusted": [str(ca)],
        "timeout": 10,
        **smtp,
    }
    return settings_from_mapping(data, base_dir=SAMPLES / "config", source="party-a.toml", env={})


def _authenticator(
    server: SmtpServer, session: Session, envelope: Envelope, mechanism: str, data: object
) -> AuthResult:
    good = isinstance(data, LoginPassword) and (data.login, data.password) == (b"msh-a", b"s3cret pass")
    return AuthResult(success=good, handled=False)


@pytest.mark.parametrize("mechanism", ["PLAIN", "LOGIN"])
def test_starttls_and_a_log_in_with_the_password_from_the_environment(
    pki: Pki, mechanism: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # ebMS2 B.3.4 (SMTP AUTH, RFC 4954) and B.3.5 (SMTP over TLS, RFC 3207).
    monkeypatch.setenv(PASSWORD_VARIABLE, "s3cret pass")
    handler = Relay()
    other = {"PLAIN": ["LOGIN"], "LOGIN": ["PLAIN"]}[mechanism]
    server = {
        "tls_context": pki.server,
        "require_starttls": True,
        "auth_required": True,
        "authenticator": _authenticator,
        "auth_exclude_mechanism": other,
    }
    with relay(handler, **server) as port:
        settings = _settings(port, pki.ca, username="msh-a", password=f"env:{PASSWORD_VARIABLE}")
        schemes = transports_from(settings)
        mail = schemes.transports["mailto"]
        assert isinstance(mail, SmtpTransport)
        [response] = send(mail, request())
        assert response.status == 202  # type: ignore[attr-defined]
        assert len(handler.mails) == 1
        monkeypatch.setenv(PASSWORD_VARIABLE, "wrong")
        [failure] = send(transports_from(settings).transports["mailto"], request())  # type: ignore[arg-type]
    assert isinstance(failure, TransportFailure) and failure.transmitted is False
    assert "refused the log-in of 'msh-a' with 535" in failure.reason
    assert "wrong" not in failure.reason and "s3cret" not in failure.reason


def test_implicit_tls_and_a_relay_certificate_nobody_trusts(pki: Pki) -> None:
    handler = Relay()
    with relay(handler, ssl_context=pki.server) as port:
        [response] = send(transport(port, security="tls", tls_context=relay_tls_context([pki.ca])), request())
        assert response.status == 202  # type: ignore[attr-defined]
        # The system's CAs do not know the test CA: the relay's certificate is not trusted, nothing is sent.
        [failure] = send(transport(port, security="tls"), request())
    assert isinstance(failure, TransportFailure) and failure.transmitted is False
    assert "TLS with the relay failed (CERTIFICATE_VERIFY_FAILED)" in failure.reason, failure.reason
    assert len(handler.mails) == 1


def test_starttls_asked_of_a_relay_that_does_not_offer_it_is_refused() -> None:
    handler = Relay()
    with relay(handler) as port:
        [failure] = send(transport(port, security="starttls"), request())
    assert isinstance(failure, TransportFailure) and failure.transmitted is False
    assert "does not offer STARTTLS" in failure.reason
    assert handler.mails == []


def test_without_smtp_settings_a_mailto_endpoint_says_what_to_configure() -> None:
    data = tomllib.loads((SAMPLES / "config" / "party-a.toml").read_text(encoding="utf-8"))
    data["store"] = {"url": "memory:"}
    settings = settings_from_mapping(data, base_dir=SAMPLES / "config", source="party-a.toml", env={})
    schemes = transports_from(settings)
    assert "mailto" not in schemes.transports
    with pytest.raises(TransportFailure) as caught:
        schemes.for_url("mailto:msh-b@b.example")
    assert caught.value.transmitted is False
    assert "no SMTP relay is configured: set [smtp] host and from_address" in caught.value.reason


# -------------------------------------------------------------------------------- an MSH sending by mail


def test_an_msh_sends_a_signed_reliable_message_by_mail_and_waits_for_the_acknowledgment(tmp_path: Path) -> None:
    # ebMS2 B.3: the agreement's mailto: endpoint makes the message a mail through the [smtp] relay; the relay's
    # acceptance is the transmission (B.2.3), the acknowledgment (B.3.3: it comes back by mail) is still awaited.
    handler = Relay()
    agreement = load(sync_none(with_b_receiving("SMTP", "mailto:msh-b@b.example")))
    payload = bytes(range(256)) * 8

    async def run(port: int) -> tuple[str, Any]:
        data = tomllib.loads((SAMPLES / "config" / "party-a.toml").read_text(encoding="utf-8"))
        data["store"] = {"url": "memory:"}
        data["smtp"] = {"host": "127.0.0.1", "port": port, "security": "none", "from_address": FROM}
        settings = settings_from_mapping(data, base_dir=SAMPLES / "config", source="party-a.toml", env={})
        msh = Msh(settings, agreements=[agreement])
        try:
            await msh.start()
            message_id = msh.submit(
                Submission(PARTY_B, SERVICE, ACTION, (Payload(payload, "application/octet-stream"),))
            )
            for _ in range(400):  # bounded: at most 20 s
                if handler.mails and msh.attempts(message_id):
                    break
                await asyncio.sleep(0.05)
            status = msh.status(message_id)
            await msh.stop()
            return message_id, status
        finally:
            msh.close()

    with relay(handler) as port:
        message_id, status = asyncio.run(run(port))
    [(sender, recipients, content, _)] = handler.mails
    assert (sender, recipients) == (FROM, [TO])
    mail = BytesParser(policy=policy.default).parsebytes(content)
    assert mail["Message-ID"] == f"<{message_id}>"
    body = content.partition(b"\r\n\r\n")[2]
    message = parse_message(body, str(mail["Content-Type"]), mode=ParseMode.STRICT)
    try:
        assert message.envelope.message_header is not None
        assert message.envelope.message_header.message_data.message_id == message_id
        assert [p.body.read_bytes() for p in message.payloads] == [payload]
        assert message.envelope.sync_reply is None  # ebMS2 B.3.3: nothing is answered on the connection
    finally:
        message.close()
    assert status is not None and status.state.status is OutboundStatus.AWAITING_ACK
