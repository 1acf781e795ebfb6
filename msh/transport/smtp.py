"""Sending ebXML messages by e-mail (ebMS2 Appendix B.3): :class:`SmtpTransport` hands each message for a
``mailto:`` endpoint to a mail relay (aiosmtplib), as the mail :mod:`msh.transport.mail_compose` writes.

One mail transaction per message (ebMS2 B.3.6, RFC 5321 §3.3): MAIL FROM our address, RCPT TO the endpoint's,
DATA the mail. The relay's 250 after the data means it took responsibility for the mail (RFC 5321 §4.1.1.4):
the transmission succeeded, as an HTTP 2xx does (ebMS2 B.2.3), and it is answered ``Response(202, None, b"")``.
It is not delivery: the partner MSH's acknowledgment, which comes back by mail of its own (B.3.3), is.

What a failure means for the message (ebMS2 §6.5.7, :class:`~msh.transport.port.TransportFailure`):

* no connection, a TLS failure, a refused log-in, or a 4xx/5xx answer to MAIL, RCPT or DATA, or to the
  end of the data: the relay did not take the mail (RFC 5321 §4.2.1, §4.1.1.4): ``transmitted`` False;
* no answer in time, or the connection lost, after the end of the data was sent: the relay may have taken
  it: ``transmitted`` True;
* a message larger than ``max_message_bytes`` or than the relay's SIZE (RFC 1870): never sent, ``transmitted``
  False, saying which limit and what to do.

Connections to the relay are kept and reused (at most ``max_connections``, which also bounds the
transactions in flight and the mails held in memory); one the relay has closed meanwhile is replaced before
the mail is sent.
"""

from __future__ import annotations

import asyncio
import re
import ssl
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Final

import aiosmtplib
from aiosmtplib import SMTPResponse

from msh.transport.mail_compose import MailComposeError, compose_mail, mailto_address
from msh.transport.port import BodySource, Request, Response, TransportFailure

__all__ = ["SECURITY_MODES", "SmtpTransport", "relay_tls_context"]

_DOT_LINE: Final = re.compile(rb"^\.", re.MULTILINE)
_SMTP_OK: Final = 250
_SMTP_START_INPUT: Final = 354
_MIN_RATE: Final = 64 * 1024
"""Bytes per second a mail is allowed to take to reach the relay, on top of the timeout (as HTTP's min_rate)."""
SECURITY_MODES: Final = ("none", "starttls", "tls")
"""How the connection to the relay is protected (the values of ``[smtp] security``)."""


def relay_tls_context(trusted: Sequence[Path] = ()) -> ssl.SSLContext:
    """The TLS client context the relay's certificate is checked with (ebMS2 B.3.5, RFC 3207): the CAs of
    ``trusted`` (PEM files), or the system's trusted CAs when none; the host name is checked too."""
    context = ssl.create_default_context()
    if trusted:
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        context.minimum_version = ssl.TLSVersion.TLSv1_2
        for path in trusted:
            context.load_verify_locations(cafile=str(path))
    return context


class _Refused(Exception):
    """The relay answered a step with a code other than the one that lets the transaction go on."""

    def __init__(self, step: str, code: int, text: str) -> None:
        super().__init__(f"{step}: {code} {text}")
        self.step, self.code, self.text = step, code, text


@dataclass(slots=True)
class _Connection:
    client: aiosmtplib.SMTP


class SmtpTransport:
    """:class:`~msh.transport.port.Transport` for ``mailto:`` endpoints: mail through one relay (see the module
    docs). ``security`` is ``"starttls"`` (STARTTLS before anything else, refused if the relay does not offer
    it), ``"tls"`` (implicit TLS) or ``"none"``; ``username`` (with ``password``, already read) logs in with
    SMTP AUTH (ebMS2 B.3.4); ``from_address`` is our MSH's address; ``timeout`` (seconds) bounds each step."""

    def __init__(
        self,
        *,
        host: str,
        port: int,
        from_address: str,
        security: str = "starttls",
        username: str = "",
        password: str = "",
        timeout: float = 60.0,
        max_message_bytes: int = 32 * 1024 * 1024,
        tls_context: ssl.SSLContext | None = None,
        max_connections: int = 4,
    ) -> None:
        if security not in SECURITY_MODES:
            raise ValueError(f"security must be none, starttls or tls, not {security!r}")
        self.host, self.port, self.from_address = host, port, from_address
        self.security = security
        self._username, self._password = username, password
        self.timeout = timeout
        self.max_message_bytes = max_message_bytes
        self._tls = tls_context if tls_context is not None else relay_tls_context()
        self._idle: list[_Connection] = []
        self._slots = asyncio.Semaphore(max_connections)
        self._closed = False
        self._local_hostname = from_address.rpartition("@")[2] or "localhost"

    @property
    def relay(self) -> str:
        """``host:port`` of the relay, for messages."""
        return f"{self.host}:{self.port}"

    async def send(self, request: Request) -> Response:
        """Mail ``request`` to its ``mailto:`` address through the relay; ``Response(202, None, b"")`` once the
        relay took it, :class:`TransportFailure` otherwise (see the module docs)."""
        where = f"mail to {request.url} through the relay {self.relay}"
        if self._closed:
            raise TransportFailure(f"{where}: the transport is closed", transmitted=False)
        async with self._slots:  # also bounds the mails held in memory at once
            # Reading the stored body and encoding it are blocking work: off the event loop.
            recipient, mail = await asyncio.to_thread(self._mail, request, where)
            await self._transaction(recipient, mail, where)
        # ebMS2 B.2.3 (as for HTTP's 2xx): received by the next hop, here the relay.
        return Response(202, None, b"")

    def _mail(self, request: Request, where: str) -> tuple[str, bytes]:
        """The recipient and the mail of ``request`` (:mod:`msh.transport.mail_compose`)."""
        try:
            recipient = mailto_address(request.url)
            mail = compose_mail(
                url=request.url,
                content_type=request.content_type,
                body=self._read_body(request, where),
                from_address=self.from_address,
                headers=request.headers,
                message_id=request.message_id,
                now=datetime.now().astimezone(),
            )
        except MailComposeError as exc:
            raise TransportFailure(f"{where}: the message cannot be sent as a mail: {exc}", transmitted=False) from None
        return recipient, mail

    def _read_body(self, request: Request, where: str) -> bytes:
        """The message whole, read only up to ``max_message_bytes``."""
        body = request.body
        size = len(body) if isinstance(body, bytes) else body.size
        if size > self.max_message_bytes:
            raise TransportFailure(
                f"{where}: the message is {size} bytes, more than smtp.max_message_bytes = {self.max_message_bytes}"
                " (a mail is held whole and goes through the relay whole); send it over HTTP, or raise the limit "
                "if the relay and the partner's mailbox take mails that large",
                transmitted=False,
            )
        if isinstance(body, bytes):
            return body
        return self._read_source(body, where)

    def _read_source(self, source: BodySource, where: str) -> bytes:
        try:
            with source.open() as stream:
                data = stream.read(self.max_message_bytes + 1)
        except OSError as exc:
            raise TransportFailure(f"{where}: the stored message cannot be read: {exc}", transmitted=False) from None
        if len(data) != source.size:
            raise TransportFailure(
                f"{where}: the stored message gave {len(data)} bytes, {source.size} announced", transmitted=False
            )
        return data

    async def _transaction(self, recipient: str, mail: bytes, where: str) -> None:
        connection = await self._connection(where)
        try:
            try:
                await self._envelope(connection, recipient, mail, where)
            except (aiosmtplib.SMTPServerDisconnected, ConnectionError) as exc:
                raise TransportFailure(f"{where}: the relay closed the connection ({exc})", transmitted=False) from None
            await self._data(connection, mail, where)
        except BaseException:
            connection.client.close()
            raise
        self._idle.append(connection)

    async def _envelope(self, connection: _Connection, recipient: str, mail: bytes, where: str) -> None:
        """MAIL FROM and RCPT TO (RFC 5321 §3.3), after checking the relay's SIZE (RFC 1870)."""
        client = connection.client
        options = []
        announced = client.esmtp_extensions.get("size", "").strip()
        if client.supports_extension("size"):
            if announced.isdigit() and int(announced) > 0 and len(mail) > int(announced):
                raise TransportFailure(
                    f"{where}: the mail is {len(mail)} bytes, more than the {announced} the relay takes (its SIZE, "
                    "RFC 1870); send the message over HTTP, or have the relay take larger mails",
                    transmitted=False,
                )
            options.append(f"SIZE={len(mail)}")
        try:
            response = await client.mail(self.from_address, options=options)
            self._expect(response, "MAIL FROM", _SMTP_OK)
            response = await client.rcpt(recipient)
            self._expect(response, f"RCPT TO <{recipient}>", _SMTP_OK)
        except aiosmtplib.SMTPResponseException as exc:
            raise TransportFailure(
                f"{where}: the relay refused {self._step_of(exc)} with {exc.code} {exc.message}", transmitted=False
            ) from None
        except _Refused as exc:
            raise TransportFailure(
                f"{where}: the relay refused {exc.step} with {exc.code} {exc.text}", transmitted=False
            ) from None
        except aiosmtplib.SMTPTimeoutError:
            raise TransportFailure(
                f"{where}: no answer from the relay within {self.timeout:g} s before the mail was sent",
                transmitted=False,
            ) from None

    @staticmethod
    def _step_of(exc: aiosmtplib.SMTPResponseException) -> str:
        if isinstance(exc, aiosmtplib.SMTPSenderRefused):
            return "MAIL FROM"
        if isinstance(exc, aiosmtplib.SMTPRecipientRefused):
            return f"RCPT TO <{exc.recipient}>"
        return "the mail"

    @staticmethod
    def _expect(response: SMTPResponse, step: str, code: int) -> None:
        if response.code != code:
            raise _Refused(step, response.code, response.message)

    async def _data(self, connection: _Connection, mail: bytes, where: str) -> None:
        """DATA, the mail (dot-stuffed, RFC 5321 §4.5.2) and the end of data; the relay's answer to that end
        decides (RFC 5321 §4.1.1.4)."""
        client = connection.client
        try:
            response = await client.execute_command(b"DATA", timeout=self.timeout)
        except aiosmtplib.SMTPTimeoutError:
            raise TransportFailure(f"{where}: no answer to DATA within {self.timeout:g} s", transmitted=False) from None
        except (aiosmtplib.SMTPServerDisconnected, ConnectionError) as exc:
            raise TransportFailure(
                f"{where}: the relay closed the connection at DATA ({exc})", transmitted=False
            ) from None
        if response.code != _SMTP_START_INPUT:
            raise TransportFailure(
                f"{where}: the relay refused DATA with {response.code} {response.message}", transmitted=False
            )
        protocol = client.protocol
        if protocol is None:
            raise TransportFailure(f"{where}: the relay closed the connection at DATA", transmitted=False)
        try:
            protocol.write(_DOT_LINE.sub(b"..", mail) + b".\r\n")
        except (aiosmtplib.SMTPServerDisconnected, ConnectionError) as exc:
            raise TransportFailure(f"{where}: the relay closed the connection ({exc})", transmitted=False) from None
        # The mail leaves while the answer is awaited: a large one gets its size at _MIN_RATE more time.
        wait = self.timeout + len(mail) / _MIN_RATE
        try:
            response = await protocol.read_response(timeout=wait)
        except aiosmtplib.SMTPTimeoutError:
            # The end of the data left: the relay may have taken the mail and its answer was lost.
            raise TransportFailure(
                f"{where}: no answer to the end of the mail within {wait:g} s; the relay may have taken it",
                transmitted=True,
            ) from None
        except (aiosmtplib.SMTPServerDisconnected, ConnectionError) as exc:
            raise TransportFailure(
                f"{where}: the connection was lost after the mail was sent ({exc}); the relay may have taken it",
                transmitted=True,
            ) from None
        if response.code != _SMTP_OK:
            # RFC 5321 §4.1.1.4: without 250 after the data the relay has not taken responsibility for the mail.
            raise TransportFailure(
                f"{where}: the relay refused the mail with {response.code} {response.message}", transmitted=False
            )

    async def _connection(self, where: str) -> _Connection:
        """A connection to the relay: a kept one that still answers, else a new one (connected, TLS, logged in)."""
        while self._idle:
            kept = self._idle.pop()
            if await self._still_open(kept.client):
                return kept
            kept.client.close()
        client = aiosmtplib.SMTP(
            hostname=self.host,
            port=self.port,
            timeout=self.timeout,
            use_tls=self.security == "tls",
            start_tls=False,
            tls_context=self._tls if self.security != "none" else None,
            local_hostname=self._local_hostname,
        )
        try:
            await self._open(client, where)
        except BaseException:
            client.close()
            raise
        return _Connection(client)

    async def _open(self, client: aiosmtplib.SMTP, where: str) -> None:
        try:
            await client.connect()
            await client.ehlo()  # RFC 5321 §4.1.1.1: the extensions (SIZE, STARTTLS, AUTH) come with its answer
            if self.security == "starttls":
                if not client.supports_extension("starttls"):
                    raise TransportFailure(
                        f'{where}: the relay does not offer STARTTLS and smtp.security is "starttls"; use its '
                        'TLS port with security = "tls", or "none" only for a relay on a trusted network',
                        transmitted=False,
                    )
                await client.starttls(tls_context=self._tls)
                await client.ehlo()  # RFC 3207 §4.2: what the relay offered before TLS is forgotten; ask again
            if self._username:
                await client.login(self._username, self._password)
        except TransportFailure:
            raise
        except aiosmtplib.SMTPAuthenticationError as exc:
            raise TransportFailure(
                f"{where}: the relay refused the log-in of {self._username!r} with {exc.code} {exc.message}; check "
                "smtp.username and the password smtp.password names",
                transmitted=False,
            ) from None
        except aiosmtplib.SMTPResponseException as exc:
            raise TransportFailure(
                f"{where}: the relay refused the connection with {exc.code} {exc.message}", transmitted=False
            ) from None
        except (aiosmtplib.SMTPException, OSError) as exc:
            tls = exc if isinstance(exc, ssl.SSLError) else exc.__cause__
            if isinstance(tls, ssl.SSLError):
                # ebMS2 B.3.5, RFC 3207: no mail over a connection whose TLS failed.
                raise TransportFailure(
                    f"{where}: TLS with the relay failed ({tls.reason or tls}); check smtp.trusted (the CAs of the "
                    "relay's certificate) and smtp.security",
                    transmitted=False,
                ) from None
            raise TransportFailure(f"{where}: no connection to the relay ({exc})", transmitted=False) from None

    async def _still_open(self, client: aiosmtplib.SMTP) -> bool:
        """True when a kept connection answers RSET (RFC 5321 §4.1.1.5): relays close idle connections, and
        one that did is replaced before anything of the next mail is sent."""
        if not client.is_connected:
            return False
        try:
            response = await client.rset(timeout=self.timeout)
        except (aiosmtplib.SMTPException, OSError):
            return False
        return response.code == _SMTP_OK

    async def close(self) -> None:
        """Say QUIT on every kept connection (bounded by the timeout) and send no more."""
        self._closed = True
        idle, self._idle = self._idle, []
        for connection in idle:
            try:
                if connection.client.is_connected:
                    await connection.client.quit()
            except (aiosmtplib.SMTPException, OSError):
                pass
            finally:
                connection.client.close()
