"""Receiving ebXML messages by mail (ebMS2 Appendix B.3): party B's MSH with its own SMTP listener (aiosmtpd on the
MSH's loop), fed by a real SMTP client (aiosmtplib), and reading a real IMAP mailbox (a private Dovecot).

The mails are in the shape ebMS2 B.3.2 gives (the package's MIME headers as the mail's, SOAPAction, From, To);
what becomes of each follows B.3.3: responses go back asynchronously by mail, an unidentified mail is kept as a
dead letter, a delivery failure notification is traced to the message that caused it.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any, TypeVar

import aiosmtplib
import pytest
from aioimaplib import IMAP4

from msh.engine import OutboundStatus
from msh.runtime.mailbox_reader import MailboxReader
from msh.runtime.msh import Msh
from msh.runtime.smtp_listener import SmtpListener
from msh.store.api import StoreError, utc_now
from msh.store.events import EventKind
from msh.store.records import Event
from msh.transport.port import Request, Response
from msh.transport.schemes import SchemeTransport
from tests.support.dovecot import PASSWORD, USER, Dovecot, dovecot, private_dovecot
from tests.support.endpoint import KEYS_DIR as KEYS
from tests.support.endpoint import party_b_settings, valid_message
from tests.support.mail import delivery_report, ebxml_mail, plain_mail, seven_bit
from tests.support.store import add_outbound, outbound_state

__all__ = ["dovecot"]  # the fixture, used by the mailbox tests

A_MAIL = "msh@party-a.example"
B_MAIL = "msh@party-b.example"
WAIT = 30.0  # seconds a condition may take to come true before the test fails
_T = TypeVar("_T")


@dataclass
class Outbox:
    """The MSH's transport for ``mailto:``: records what it was asked to send (the sending side is not tested here)."""

    sent: list[Request] = field(default_factory=list)

    async def send(self, request: Request) -> Response:
        self.sent.append(request)
        return Response(250, None, b"")

    async def close(self) -> None:
        return None


def _msh(tmp_path: Path, outbox: Outbox | None, **sections: dict[str, Any]) -> Msh:
    settings = party_b_settings(tmp_path)
    if sections:
        from dataclasses import replace

        from msh.runtime.config.mail import MailboxSettings, SmtpdSettings

        changes: dict[str, Any] = {}
        if "smtpd" in sections:
            changes["smtpd"] = SmtpdSettings(**sections["smtpd"])
        if "mailbox" in sections:
            changes["mailbox"] = MailboxSettings(**sections["mailbox"])
        settings = replace(settings, **changes)
    transport = SchemeTransport({"mailto": outbox}) if outbox is not None else None
    return Msh(settings, transport=transport)


def _events(msh: Msh, kind: EventKind) -> list[Event]:
    with msh.store.transaction(readonly=True) as tx:
        return [e for e in tx.list_events(limit=1000) if e.kind == kind]


async def _eventually(check: Callable[[], _T], what: str) -> _T:
    """``check()`` once it is truthy, looked at every 50 ms for at most WAIT seconds."""
    for _ in range(int(WAIT / 0.05)):
        value = check()
        if value:
            return value
        await asyncio.sleep(0.05)
    raise AssertionError(f"not within {WAIT:.0f} s: {what}")


def _b32_mail(msh: Msh, message_id: str, **kw: Any) -> bytes:
    content_type, body = valid_message(msh, message_id)
    body = seven_bit(content_type, body)  # ebMS2 B.3.2: transfer-encoded for SMTP's 7-bit, 998-character lines
    return ebxml_mail(content_type, body, message_id=message_id, sender=A_MAIL, to=B_MAIL, **kw)


# ---------------------------------------------------------------------------------------------- SMTP listener


@pytest.fixture
def listening(tmp_path: Path) -> Iterator[Callable[[Callable[[Msh, SmtpListener, Outbox], Awaitable[None]]], None]]:
    """Run a scenario against party B's MSH with its SMTP listener on a free port."""
    outbox = Outbox()
    msh = _msh(tmp_path, outbox, smtpd={"enabled": True, "port": 0, "dead_letters": tmp_path / "dead"})

    def run(scenario: Callable[[Msh, SmtpListener, Outbox], Awaitable[None]]) -> None:
        async def main() -> None:
            await msh.start()
            listener = SmtpListener(msh.core.settings, msh)
            await listener.start()
            try:
                await scenario(msh, listener, outbox)
            finally:
                await listener.stop()
                await msh.stop()

        asyncio.run(main())

    try:
        yield run
    finally:
        msh.close()


async def _send(listener: SmtpListener, mail: bytes) -> tuple[int, str]:
    """Send ``mail`` over SMTP to the listener: the reply code and text to its DATA."""
    async with aiosmtplib.SMTP(hostname="127.0.0.1", port=listener.port, timeout=WAIT) as client:
        try:
            _refused, text = await client.sendmail(A_MAIL, [B_MAIL], mail)
        except aiosmtplib.SMTPResponseException as exc:
            return exc.code, exc.message
    return 250, text


def test_an_ebxml_mail_is_received_once_and_answered_by_mail(listening: Any) -> None:
    """ebMS2 B.3.2: the mail's body is the package; B.3.3: "All ebXML response messages ... are delivered
    asynchronously": the acknowledgment goes back by mail to the sender; 250 only after the commit."""

    async def scenario(msh: Msh, listener: SmtpListener, outbox: Outbox) -> None:
        mail = _b32_mail(msh, "mail-1@party-a.example")
        code, _ = await _send(listener, mail)
        assert code == 250
        [received] = _events(msh, EventKind.RECEIVED)  # committed before the 250
        assert received.message_id == "mail-1@party-a.example"
        [answer] = await _eventually(lambda: outbox.sent, "the acknowledgment mailed back")
        assert answer.url == f"mailto:{A_MAIL}"
        assert answer.content_type.startswith("text/xml")
        assert b"Acknowledgment" in bytes(answer.body)  # type: ignore[arg-type]
        assert answer.message_id is not None and answer.message_id != "mail-1@party-a.example"

    listening(scenario)


def test_the_same_mail_twice_is_delivered_once(listening: Any) -> None:
    """ebMS2 §6.4.4 (the agreement asks DuplicateElimination): a mail the MTA delivers again is a duplicate."""

    async def scenario(msh: Msh, listener: SmtpListener, outbox: Outbox) -> None:
        mail = _b32_mail(msh, "mail-2@party-a.example")
        assert (await _send(listener, mail))[0] == 250
        assert (await _send(listener, mail))[0] == 250
        assert [e.message_id for e in _events(msh, EventKind.RECEIVED)] == ["mail-2@party-a.example"]
        assert [e.message_id for e in _events(msh, EventKind.DUPLICATE)] == ["mail-2@party-a.example"]
        # ebMS2 §6.4.4: the duplicate is answered with the same acknowledgment again, by mail.
        await _eventually(lambda: len(outbox.sent) == 2, "both acknowledgments mailed back")

    listening(scenario)


def test_a_mail_without_soapaction_is_received(listening: Any) -> None:
    """ebMS2 B.3.2 asks for SOAPAction in the mail's header; without it the message is taken all the same."""

    async def scenario(msh: Msh, listener: SmtpListener, outbox: Outbox) -> None:
        mail = _b32_mail(msh, "mail-3@party-a.example", soap_action=False)
        assert (await _send(listener, mail))[0] == 250
        assert [e.message_id for e in _events(msh, EventKind.RECEIVED)] == ["mail-3@party-a.example"]

    listening(scenario)


def test_a_forwarded_mail_with_bare_line_feeds_is_received(listening: Any) -> None:
    """A mail forwarded by a client with LF line ends is read with CRLF (lenient reading, warned)."""

    async def scenario(msh: Msh, listener: SmtpListener, outbox: Outbox) -> None:
        listener_mail = _b32_mail(msh, "mail-4@party-a.example").replace(b"\r\n", b"\n")
        # SMTP itself delivers CRLF lines; the listener is handed the mail as it was saved, LF and all.
        assert await listener.receive(listener_mail) == "250 2.0.0 taken"
        assert [e.message_id for e in _events(msh, EventKind.RECEIVED)] == ["mail-4@party-a.example"]

    listening(scenario)


def test_a_mail_that_is_no_ebxml_message_is_a_dead_letter(listening: Any, tmp_path: Path) -> None:
    """ebMS2 B.3.3: "SHOULD retain the unidentified message in a 'dead letter' folder" and "SHOULD place an
    entry in an audit log indicating the disposition of each received message"."""

    async def scenario(msh: Msh, listener: SmtpListener, outbox: Outbox) -> None:
        code, _ = await _send(listener, plain_mail("not for an MSH"))
        assert code == 250
        [kept] = list((tmp_path / "dead").glob("*.eml"))
        assert b"not for an MSH" in kept.read_bytes() and b"Subject: hello" in kept.read_bytes()
        [event] = _events(msh, EventKind.DEAD_LETTER)
        assert event.message_id is None and event.detail["where"] == str(kept)
        assert event.detail["mailId"] == "hello-1@elsewhere.example"
        assert _events(msh, EventKind.RECEIVED) == [] and outbox.sent == []

    listening(scenario)


def test_a_store_that_fails_gets_451_and_the_mail_comes_again(listening: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """RFC 5321 §4.2.5: the mail stays the MTA's until the reply to DATA; 451 when nothing could be committed,
    so the MTA tries again and nothing is lost."""

    async def scenario(msh: Msh, listener: SmtpListener, outbox: Outbox) -> None:
        writer = msh.core.writer
        real = writer.run

        async def broken(unit: Any) -> Any:
            raise StoreError("the database is not reachable")

        monkeypatch.setattr(writer, "run", broken)
        mail = _b32_mail(msh, "mail-5@party-a.example")
        code, text = await _send(listener, mail)
        assert code == 451 and "try again later" in text
        monkeypatch.setattr(writer, "run", real)
        assert _events(msh, EventKind.RECEIVED) == []
        assert (await _send(listener, mail))[0] == 250  # the MTA's next try
        assert [e.message_id for e in _events(msh, EventKind.RECEIVED)] == ["mail-5@party-a.example"]

    listening(scenario)


def test_an_answer_that_cannot_be_mailed_is_logged(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """ebMS2 B.3.3: the response goes by mail; with no way to send mail, that is said in the log, not lost silently."""
    caplog.set_level(logging.WARNING, logger="msh.runtime.mail")
    msh = _msh(tmp_path, None, smtpd={"enabled": True, "port": 0, "dead_letters": tmp_path / "dead"})

    async def main() -> None:
        await msh.start()
        listener = SmtpListener(msh.core.settings, msh)
        await listener.start()
        try:
            assert (await _send(listener, _b32_mail(msh, "mail-6@party-a.example")))[0] == 250
        finally:
            await listener.stop()
            await msh.stop()

    try:
        asyncio.run(main())
    finally:
        msh.close()
    said = [r.getMessage() for r in caplog.records]
    assert any(f"could not be sent to mailto:{A_MAIL}" in line for line in said), said


def test_a_delivery_failure_notification_is_traced_to_the_message(listening: Any) -> None:
    """ebMS2 B.3.3: "MUST be capable of receiving a delivery failure notification ... SHOULD examine the message
    to determine which ebXML message ... resulted in a message delivery failure ... SHOULD attempt to notify the
    application": a message awaiting its acknowledgment counts the mail as lost (resent by its timer, ebMS2
    §6.5.4); one handed over without an acknowledgment asked fails with a DeliveryFailure (ebMS2 §6.5.7)."""

    async def scenario(msh: Msh, listener: SmtpListener, outbox: Outbox) -> None:
        now = utc_now()
        with msh.store.transaction() as tx:
            waiting = outbound_state(
                "out-1@party-b.example", status=OutboundStatus.AWAITING_ACK, attempts=1, first_sent_at=now
            )
            add_outbound(tx, "out-1@party-b.example", state=waiting, endpoint_url=f"mailto:{A_MAIL}")
            sent = outbound_state("out-2@party-b.example", status=OutboundStatus.SENT, attempts=1, first_sent_at=now)
            add_outbound(tx, "out-2@party-b.example", state=sent, endpoint_url=f"mailto:{A_MAIL}")
        assert (await _send(listener, delivery_report("out-1@party-b.example")))[0] == 250
        assert (await _send(listener, delivery_report("out-2@party-b.example")))[0] == 250
        reports = _events(msh, EventKind.DELIVERY_REPORT)
        assert [e.message_id for e in reports] == ["out-1@party-b.example", "out-2@party-b.example"]
        assert "550 5.1.1 no such user" in str(reports[0].detail["diagnostic"])
        with msh.store.transaction(readonly=True) as tx:
            first, second = tx.get_outbound("out-1@party-b.example"), tx.get_outbound("out-2@party-b.example")
        assert first is not None and second is not None
        assert first.state.status is OutboundStatus.AWAITING_ACK and first.state.refused == 1
        assert second.state.status is OutboundStatus.FAILED and second.state.failure is not None
        assert "returned undelivered" in second.state.failure.description

    listening(scenario)


def test_a_delivery_report_about_no_message_of_ours_is_journaled(
    listening: Any, caplog: pytest.LogCaptureFixture
) -> None:
    """ebMS2 B.3.3: "If the MSH is unable to determine the source of the offending message the MSH administrator
    should be notified": an error in the log, and the report in the journal."""
    caplog.set_level(logging.ERROR, logger="msh.runtime.mail")

    async def scenario(msh: Msh, listener: SmtpListener, outbox: Outbox) -> None:
        assert (await _send(listener, delivery_report("stranger@elsewhere.example")))[0] == 250
        [event] = _events(msh, EventKind.DELIVERY_REPORT)
        assert event.message_id is None

    listening(scenario)
    assert any("names no message this MSH sent" in r.getMessage() for r in caplog.records)


# ------------------------------------------------------------------------------------------- IMAP mailbox


async def _imap(server: Dovecot) -> IMAP4:
    client = IMAP4("127.0.0.1", server.port, timeout=WAIT)
    await client.wait_hello_from_server()
    assert (await client.login(USER, PASSWORD)).result == "OK"
    return client


async def _uids(server: Dovecot, folder: str) -> list[str]:
    client = await _imap(server)
    try:
        selected = await client.select(f'"{folder}"')
        if selected.result != "OK":
            return []
        found = await client.uid_search("UNDELETED")
        return [u for line in found.lines[:-1] for u in bytes(line).decode().split()]
    finally:
        await client.logout()


async def _append(server: Dovecot, mail: bytes) -> None:
    client = await _imap(server)
    try:
        assert (await client.append(mail, mailbox="INBOX")).result == "OK"
    finally:
        await client.logout()


def _reading(tmp_path: Path, server: Dovecot, monkeypatch: pytest.MonkeyPatch, **box: Any) -> Msh:
    monkeypatch.setenv("MSH_TEST_MAILBOX_SECRET", PASSWORD)
    mailbox = {
        "enabled": True,
        "host": "127.0.0.1",
        "port": server.port,
        "security": "none",
        "username": USER,
        "password": "env:MSH_TEST_MAILBOX_SECRET",
        "poll_interval": timedelta(seconds=1),
        **box,
    }
    from msh.runtime.config.mail import MailSecurity

    mailbox["security"] = MailSecurity(mailbox["security"])
    return _msh(tmp_path, Outbox(), mailbox=mailbox)


def test_a_mail_in_the_mailbox_is_received_once_and_removed_after_the_commit(
    tmp_path: Path, dovecot: Dovecot, monkeypatch: pytest.MonkeyPatch
) -> None:
    """ebMS2 B.3: the reader takes the mail by UID with BODY.PEEK[], the inbound pipeline commits it, and only
    then is it removed from the mailbox (a crash before leaves it there, to come again as a duplicate)."""
    msh = _reading(tmp_path, dovecot, monkeypatch)
    seen_at_commit: list[list[str]] = []

    async def main() -> None:
        await msh.start()
        real = msh.core.writer.run

        async def watching(unit: Any) -> Any:
            result = await real(unit)
            if not seen_at_commit and _events(msh, EventKind.RECEIVED):  # the unit that committed the message
                seen_at_commit.append(await _uids(dovecot, "INBOX"))  # the mail is still there at that moment
            return result

        msh.core.writer.run = watching  # type: ignore[method-assign]
        reader = MailboxReader(msh.core.settings, msh)
        await _append(dovecot, _b32_mail(msh, "box-1@party-a.example"))
        await reader.start()
        try:
            await _eventually(lambda: _events(msh, EventKind.RECEIVED), "the message received")
            assert await _eventually_async(lambda: _uids(dovecot, "INBOX"), []) == []
        finally:
            await reader.stop()
            await msh.stop()

    try:
        asyncio.run(main())
        assert [e.message_id for e in _events(msh, EventKind.RECEIVED)] == ["box-1@party-a.example"]
        assert seen_at_commit == [["1"]]
    finally:
        msh.close()


async def _eventually_async(read: Callable[[], Awaitable[_T]], wanted: _T) -> _T:
    for _ in range(int(WAIT / 0.1)):
        value = await read()
        if value == wanted:
            return value
        await asyncio.sleep(0.1)
    return await read()


def test_a_mail_that_is_no_ebxml_message_goes_to_the_dead_letter_folder(
    tmp_path: Path, dovecot: Dovecot, monkeypatch: pytest.MonkeyPatch
) -> None:
    """ebMS2 B.3.3: the unidentified mail is retained in a "dead letter" folder (created when missing) and
    leaves the folder the MSH reads; its disposition is journaled."""
    msh = _reading(tmp_path, dovecot, monkeypatch)

    async def main() -> None:
        await msh.start()
        reader = MailboxReader(msh.core.settings, msh)
        await _append(dovecot, plain_mail("a note for a person"))
        await reader.start()
        try:
            await _eventually(lambda: _events(msh, EventKind.DEAD_LETTER), "the dead letter journaled")
            assert await _eventually_async(lambda: _uids(dovecot, "INBOX"), []) == []
            assert await _uids(dovecot, "ebXML dead letters") == ["1"]
        finally:
            await reader.stop()
            await msh.stop()

    try:
        asyncio.run(main())
        [event] = _events(msh, EventKind.DEAD_LETTER)
        assert "ebXML dead letters" in str(event.detail["where"])
        assert _events(msh, EventKind.RECEIVED) == []
    finally:
        msh.close()


def test_the_reader_reconnects_after_the_mail_server_restarts(
    tmp_path: Path, dovecot: Dovecot, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The IMAP server goes away while the reader waits (IDLE); the MSH goes on, the reader connects again once
    the server is back and takes a mail appended after the restart."""
    msh = _reading(tmp_path, dovecot, monkeypatch, poll_interval=timedelta(seconds=2))

    async def main() -> None:
        await msh.start()
        reader = MailboxReader(msh.core.settings, msh)
        await reader.start()
        try:
            await _eventually(lambda: reader.sessions >= 1, "the first session")
            await asyncio.to_thread(dovecot.stop)
            await asyncio.sleep(0.5)
            await asyncio.to_thread(dovecot.start)
            await _append(dovecot, _b32_mail(msh, "box-2@party-a.example"))
            await _eventually(lambda: _events(msh, EventKind.RECEIVED), "the mail appended after the restart")
            assert reader.sessions >= 2
        finally:
            await reader.stop()
            await msh.stop()

    try:
        asyncio.run(main())
        assert [e.message_id for e in _events(msh, EventKind.RECEIVED)] == ["box-2@party-a.example"]
    finally:
        msh.close()


def test_a_mail_stays_in_the_mailbox_while_the_store_fails(
    tmp_path: Path, dovecot: Dovecot, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """Nothing is removed from the mailbox before it is committed: with the store down the mail stays, and it
    is taken at a later round once the store is back (here the reader polls: idle off)."""
    msh = _reading(tmp_path, dovecot, monkeypatch, idle=False)

    async def main() -> None:
        await msh.start()
        writer = msh.core.writer
        real = writer.run
        caplog.set_level(logging.WARNING, logger="msh.runtime.mail")

        def tried() -> int:
            return sum("mail box-3@party-a.example left for later" in r.getMessage() for r in caplog.records)

        async def broken(unit: Any) -> Any:
            raise StoreError("the database is not reachable")

        monkeypatch.setattr(writer, "run", broken)
        reader = MailboxReader(msh.core.settings, msh)
        await _append(dovecot, _b32_mail(msh, "box-3@party-a.example"))
        await reader.start()
        try:
            await _eventually(lambda: tried() >= 2, "two rounds that found the store down")
            assert await _uids(dovecot, "INBOX") == ["1"]
            monkeypatch.setattr(writer, "run", real)
            await _eventually(lambda: _events(msh, EventKind.RECEIVED), "the message received once the store is back")
            assert await _eventually_async(lambda: _uids(dovecot, "INBOX"), []) == []
        finally:
            await reader.stop()
            await msh.stop()

    try:
        asyncio.run(main())
        assert [e.message_id for e in _events(msh, EventKind.RECEIVED)] == ["box-3@party-a.example"]
    finally:
        msh.close()


@pytest.mark.parametrize("security", ["tls", "starttls"])
def test_the_mailbox_over_tls(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, security: str) -> None:
    """The mailbox read over TLS from the first byte (RFC 8314) or after STARTTLS (RFC 3501 §6.2.1), the server's
    certificate trusted through tls.trusted and its host name checked."""
    from dataclasses import replace

    from msh.runtime.config.model import TlsSettings

    with private_dovecot(KEYS / "party-b.cert.pem", KEYS / "party-b.key.pem") as server:
        port = server.tls_port if security == "tls" else server.port
        msh = _reading(tmp_path, server, monkeypatch, security=security, port=port)
        settings = msh.core.settings
        trusting = replace(settings, tls=replace(settings.tls, trusted=(KEYS / "party-b.cert.pem",)))
        assert isinstance(trusting.tls, TlsSettings)

        async def main() -> None:
            await msh.start()
            reader = MailboxReader(trusting, msh)
            await _append(server, _b32_mail(msh, f"box-{security}@party-a.example"))
            await reader.start()
            try:
                await _eventually(lambda: _events(msh, EventKind.RECEIVED), f"the message received over {security}")
            finally:
                await reader.stop()
                await msh.stop()

        try:
            asyncio.run(main())
        finally:
            msh.close()
        assert ", TLS," in server.log  # Dovecot logs the log-in as made over TLS


def test_the_listener_offers_starttls_and_takes_mail_only_after_it(tmp_path: Path) -> None:
    """ebMS2 B.3.5 (RFC 3207): with smtpd.tls the listener offers STARTTLS with our [tls] certificate and refuses
    mail before it (530), takes it after (250)."""
    import ssl

    msh = _msh(tmp_path, Outbox(), smtpd={"enabled": True, "port": 0, "tls": True, "dead_letters": tmp_path / "dead"})

    async def main() -> None:
        await msh.start()
        listener = SmtpListener(msh.core.settings, msh)
        await listener.start()
        try:
            mail = _b32_mail(msh, "mail-tls@party-a.example")
            async with aiosmtplib.SMTP(
                hostname="127.0.0.1", port=listener.port, timeout=WAIT, start_tls=False
            ) as plain:
                with pytest.raises(aiosmtplib.SMTPResponseException) as refused:
                    await plain.sendmail(A_MAIL, [B_MAIL], mail)
                assert refused.value.code == 530
            context = ssl.create_default_context(cafile=str(KEYS / "party-b.cert.pem"))
            async with aiosmtplib.SMTP(
                hostname="127.0.0.1", port=listener.port, timeout=WAIT, start_tls=False
            ) as client:
                await client.starttls(tls_context=context)
                _refused, text = await client.sendmail(A_MAIL, [B_MAIL], mail)
            assert text.startswith("2.0.0")
            assert [e.message_id for e in _events(msh, EventKind.RECEIVED)] == ["mail-tls@party-a.example"]
        finally:
            await listener.stop()
            await msh.stop()

    try:
        asyncio.run(main())
    finally:
        msh.close()


def test_a_mail_whose_envelope_cannot_be_read_is_a_dead_letter(listening: Any, tmp_path: Path) -> None:
    """ebMS2 B.3.3: a mail that says text/xml but holds no SOAP envelope cannot be identified as an ebXML
    message (the pipeline answers a SOAP Client fault, SOAP 1.1 §4.4.1): it is kept as a dead letter, not
    retried as a Server fault would be."""

    async def scenario(msh: Msh, listener: SmtpListener, outbox: Outbox) -> None:
        mail = ebxml_mail("text/xml", b"this is not XML\r\n", message_id="broken-1@party-a.example")
        code, _ = await _send(listener, mail)
        assert code == 250
        [kept] = list((tmp_path / "dead").glob("*.eml"))
        assert kept.read_bytes() == mail
        [event] = _events(msh, EventKind.DEAD_LETTER)
        assert "no ebXML message could be read" in str(event.detail["reason"])
        assert event.detail["mailId"] == "broken-1@party-a.example"

    listening(scenario)
