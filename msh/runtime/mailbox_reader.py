"""Reading ebXML messages from an IMAP mailbox (``[mailbox]``; ebMS2 Appendix B.3, IMAP4rev1 RFC 3501): a
:class:`~msh.runtime.serving.Companion` of ``msh serve``.

The reader logs in, selects ``mailbox.folder`` and takes every mail in it, one at a time by UID: it fetches the
mail with ``BODY.PEEK[]`` (so a mail not yet dealt with is not even marked seen), hands it to
:class:`~msh.runtime.mail_intake.MailIntake`, and only then acts on the mailbox:

* taken (committed, refused with an answer, or a delivery report recorded): the mail is deleted (``UID STORE
  +FLAGS.SILENT (\\Deleted)`` then ``UID EXPUNGE`` (RFC 4315), or ``EXPUNGE`` without UIDPLUS);
* the MSH cannot take it now (its store failed): the mail stays and the round ends; it is taken again at the
  next one;
* no ebXML message nor delivery report: copied to ``mailbox.dead_letter_folder`` (created when missing), then
  deleted from the folder read (ebMS2 B.3.3).

A crash between the commit and the deletion leaves the mail in the mailbox; taken again, it is a duplicate the
inbound pipeline eliminates (ebMS2 §6.4.4). Between rounds the reader waits with IDLE (RFC 2177) when the server
offers it and ``mailbox.idle`` is on, at most ``mailbox.poll_interval``, else it sleeps that long. When the
server goes away (restarted, network down, log-in refused) the reader logs it and connects again with a growing
pause (1 s doubling to 60 s); it never stops the MSH.
"""

from __future__ import annotations

import asyncio
import logging
import re
import ssl
from collections.abc import Awaitable
from pathlib import Path
from typing import TYPE_CHECKING, Final, TypeVar

from aioimaplib import IMAP4, AioImapException, Command, Response

from msh.errors import ConfigurationError
from msh.runtime.config import Settings
from msh.runtime.config.mail import MailSecurity
from msh.runtime.config.secrets import read_secret, settings_folder
from msh.runtime.mail_intake import Disposition, MailIntake

if TYPE_CHECKING:
    from msh.runtime.msh import Msh

__all__ = ["MailboxReader", "client_context"]

log = logging.getLogger("msh.runtime.mail")

COMMAND_TIMEOUT: Final = 60.0
"""Seconds an IMAP command may take before the connection is taken for lost."""
FIRST_PAUSE: Final = 1.0
LONGEST_PAUSE: Final = 60.0
_T = TypeVar("_T")
_LITERAL: Final = re.compile(rb"\{(\d+)\}$")


def client_context(trusted: tuple[Path, ...]) -> ssl.SSLContext:
    """The TLS context of the IMAP connection (TLS 1.2 or newer, the host name checked): the server's
    certificate must chain to a system CA or to one of the ``tls.trusted`` certificates (a self-signed server
    certificate named there is trusted by itself)."""
    context = ssl.create_default_context()
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    context.verify_flags |= ssl.VERIFY_X509_PARTIAL_CHAIN
    for path in trusted:
        try:
            context.load_verify_locations(cafile=str(path))
        except (OSError, ssl.SSLError) as exc:
            raise ConfigurationError(f"tls.trusted: cannot load {path} as PEM certificates: {exc}") from None
    return context


class _Lost(Exception):
    """The IMAP connection is no good any more (closed, silent, or a command refused): connect again."""


def _quoted(name: str) -> str:
    """A mailbox name as an IMAP quoted string (RFC 3501 §4.3)."""
    return '"' + name.replace("\\", "\\\\").replace('"', '\\"') + '"'


class MailboxReader:
    """The mailbox reader of ``msh serve`` as ``settings.mailbox`` describes it (see the module docs)."""

    def __init__(self, settings: Settings, msh: Msh, *, env: dict[str, str] | None = None) -> None:
        box = settings.mailbox
        if not box.host.strip():
            raise ConfigurationError(
                'mailbox.enabled is true but mailbox.host is empty: name the IMAP server, e.g. "imap.example.com"'
            )
        if not box.username.strip() or not box.password:
            raise ConfigurationError(
                "mailbox.enabled is true but mailbox.username or mailbox.password is empty: give the log-in and "
                'where its password is (e.g. "env:MSH_MAILBOX_SECRET")'
            )
        self.password = read_secret(
            box.password, setting="mailbox.password", env=env, base_dir=settings_folder(settings.source)
        )
        self.msh = msh
        self.host, self.port, self.security = box.host.strip(), box.port, box.security
        self.username = box.username.strip()
        self.folder, self.dead_letter_folder = box.folder, box.dead_letter_folder
        self.poll_seconds = box.poll_interval.total_seconds()
        self.use_idle = box.idle
        self.intake = MailIntake(msh, source="mailbox")
        self.sessions = 0
        """How many times the reader has logged in and selected the folder (for monitoring and tests)."""
        self._tls = client_context(settings.tls.trusted) if box.security is not MailSecurity.NONE else None
        self._stopping = asyncio.Event()
        self._lost = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._client: IMAP4 | None = None

    @property
    def where(self) -> str:
        """``user@host:port/folder``, as the log says it."""
        return f"{self.username}@{self.host}:{self.port}/{self.folder}"

    @property
    def announce(self) -> str:
        """The line ``msh serve`` prints once serving."""
        return (
            f"msh: reading the mailbox {self.where} (IMAP, {self.security.value}), dead letters to "
            f"{self.dead_letter_folder!r} (ebMS2 B.3)"
        )

    async def start(self) -> None:
        self._stopping.clear()
        self._task = asyncio.create_task(self._run(), name="msh-mailbox-reader")

    async def stop(self) -> None:
        """Let the mail being dealt with end (bounded), then log out."""
        self._stopping.set()
        task, self._task = self._task, None
        if task is None:
            return
        try:
            await asyncio.wait_for(asyncio.shield(task), COMMAND_TIMEOUT)
        except TimeoutError:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)

    # -- the connection

    async def _run(self) -> None:
        pause = FIRST_PAUSE
        while not self._stopping.is_set():
            before = self.sessions
            problem = "the session ended"
            try:
                await self._session()
            except (_Lost, OSError, TimeoutError, AioImapException) as exc:
                problem = str(exc) or type(exc).__name__
            except Exception:
                log.exception("mailbox %s: the reader failed", self.where)
                problem = "the reader failed (see above)"
            finally:
                await self._close()
            if self._stopping.is_set():
                return
            if self.sessions > before:
                pause = FIRST_PAUSE  # it had got in: the pauses start again from the shortest
            log.warning("mailbox %s: %s; connecting again in %.0f s", self.where, problem, pause)
            if await self._sleep(pause):
                return
            pause = min(pause * 2, LONGEST_PAUSE)

    async def _session(self) -> None:
        self._lost.clear()
        tls = self._tls if self.security is MailSecurity.TLS else None
        client = IMAP4(
            self.host, self.port, timeout=COMMAND_TIMEOUT, conn_lost_cb=lambda _exc: self._lost.set(), ssl_context=tls
        )
        self._client = client
        await self._do(client.wait_hello_from_server(), "the greeting")
        if self.security is MailSecurity.STARTTLS:
            await self._starttls(client)
        login = await self._do(client.login(self.username, self.password), "LOGIN")
        if login.result != "OK":
            raise _Lost(f"the server refused the log-in of {self.username!r}: {_said(login)}")
        await self._ok(client.select(_quoted(self.folder)), f"SELECT {self.folder}")
        self.sessions += 1
        log.info("mailbox %s: connected (IDLE %s)", self.where, "used" if self._idles(client) else "not used")
        while not self._stopping.is_set():
            await self._take_all(client)
            if self._stopping.is_set():
                break
            await self._wait(client)

    async def _starttls(self, client: IMAP4) -> None:
        """RFC 3501 §6.2.1: STARTTLS, then the TLS handshake on the same connection and CAPABILITY again."""
        protocol = client.protocol
        assert protocol is not None and self._tls is not None
        command = Command("STARTTLS", protocol.new_tag(), loop=protocol.loop)
        await self._ok(protocol.execute(command), "STARTTLS")
        loop = asyncio.get_running_loop()
        transport = await self._do(
            loop.start_tls(protocol.transport, protocol, self._tls, server_hostname=self.host), "the TLS handshake"
        )
        protocol.transport = transport
        await self._do(protocol.capability(), "CAPABILITY")

    async def _close(self) -> None:
        client, self._client = self._client, None
        if client is None:
            return
        try:
            if not self._lost.is_set() and client.get_state() in ("AUTH", "SELECTED"):
                await asyncio.wait_for(client.logout(), 5)
        except (OSError, TimeoutError, AioImapException):
            pass
        transport = client.protocol.transport if client.protocol is not None else None
        if transport is not None:
            transport.close()

    async def _do(self, awaitable: Awaitable[_T], what: str) -> _T:
        """``awaitable`` (an IMAP command), unless the connection is lost or silent meanwhile."""
        task = asyncio.ensure_future(awaitable)
        lost = asyncio.ensure_future(self._lost.wait())
        try:
            done, _ = await asyncio.wait({task, lost}, timeout=COMMAND_TIMEOUT, return_when=asyncio.FIRST_COMPLETED)
        finally:
            lost.cancel()
        if task in done:
            return task.result()
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        if lost in done:
            raise _Lost(f"the IMAP server closed the connection during {what}")
        raise _Lost(f"no answer to {what} within {COMMAND_TIMEOUT:.0f} s")

    async def _ok(self, awaitable: Awaitable[Response], what: str) -> Response:
        response = await self._do(awaitable, what)
        if response.result != "OK":
            raise _Lost(f"the server refused {what}: {_said(response)}")
        return response

    async def _sleep(self, seconds: float) -> bool:
        """Wait ``seconds``, or less if the reader stops (then True)."""
        try:
            await asyncio.wait_for(self._stopping.wait(), seconds)
        except TimeoutError:
            return False
        return True

    def _idles(self, client: IMAP4) -> bool:
        return self.use_idle and client.has_capability("IDLE")

    async def _wait(self, client: IMAP4) -> None:
        """Until the server says the folder changed (IDLE), the poll interval passes, or the reader stops."""
        if not self._idles(client):
            await self._sleep(self.poll_seconds)
            return
        idle = await self._do(client.idle_start(timeout=self.poll_seconds), "IDLE")
        push = asyncio.ensure_future(client.wait_server_push(timeout=self.poll_seconds + 5))
        stop = asyncio.ensure_future(self._stopping.wait())
        lost = asyncio.ensure_future(self._lost.wait())
        try:
            await asyncio.wait({push, stop, lost}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for task in (push, stop, lost):
                task.cancel()
            await asyncio.gather(push, stop, lost, return_exceptions=True)
        if self._lost.is_set():
            raise _Lost("the IMAP server closed the connection while idling")
        client.idle_done()
        await self._do(idle, "DONE")

    # -- the mail

    async def _take_all(self, client: IMAP4) -> None:
        found = await self._ok(client.uid_search("UNDELETED"), "UID SEARCH")
        uids = [u for line in found.lines[:-1] for u in bytes(line).decode("ascii", "replace").split() if u.isdigit()]
        for uid in uids:
            if self._stopping.is_set():
                return
            if not await self._take(client, uid):
                return  # the MSH cannot take mail now: the rest waits for the next round too

    async def _take(self, client: IMAP4, uid: str) -> bool:
        """Deal with the mail ``uid``; False when it stays for the next round (the MSH cannot take it now)."""
        fetched = await self._ok(client.uid("fetch", uid, "(BODY.PEEK[])"), f"UID FETCH {uid}")
        data = _literal(fetched)
        if data is None:
            return True  # deleted meanwhile by another reader
        try:
            taken = await self.intake.take(data)
        except Exception:
            # Left where it is, and the round goes on: one mail that cannot be dealt with never holds up the others.
            log.exception("mailbox %s: mail %s could not be dealt with; it stays in the folder", self.where, uid)
            return True
        if taken.disposition is Disposition.RETRY:
            return False
        if taken.disposition is Disposition.DEAD_LETTER:
            await self._keep_dead_letter(client, uid)
            await self.intake.dead_lettered(
                taken.reason,
                f"the IMAP folder {self.dead_letter_folder!r} of {self.username}@{self.host}",
                taken.mail_id,
            )
        await self._delete(client, uid)
        return True

    async def _keep_dead_letter(self, client: IMAP4, uid: str) -> None:
        """ebMS2 B.3.3: copy the mail to the dead-letter folder, created when missing (RFC 3501 §6.4.7 TRYCREATE)."""
        target = _quoted(self.dead_letter_folder)
        copied = await self._do(client.uid("copy", uid, target), f"UID COPY {uid}")
        if copied.result == "OK":
            return
        created = await self._do(client.create(target), f"CREATE {self.dead_letter_folder}")
        if created.result != "OK" and b"ALREADYEXISTS" not in b" ".join(bytes(x) for x in created.lines).upper():
            raise _Lost(f"the dead-letter folder {self.dead_letter_folder!r} cannot be created: {_said(created)}")
        await self._ok(client.uid("copy", uid, target), f"UID COPY {uid}")

    async def _delete(self, client: IMAP4, uid: str) -> None:
        await self._ok(client.uid("store", uid, "+FLAGS.SILENT", "(\\Deleted)"), f"UID STORE {uid}")
        if "UIDPLUS" in client.protocol.capabilities:
            await self._ok(client.uid("expunge", uid), f"UID EXPUNGE {uid}")  # RFC 4315 §2.1: this mail only
        else:
            await self._ok(client.expunge(), "EXPUNGE")


def _literal(response: Response) -> bytes | None:
    """The message literal of a ``UID FETCH ... BODY[]`` answer (None: the answer holds none)."""
    lines = response.lines
    for index, line in enumerate(lines[:-1]):
        if isinstance(line, bytes | bytearray) and _LITERAL.search(bytes(line)) and index + 1 < len(lines):
            following = lines[index + 1]
            if isinstance(following, bytearray):
                return bytes(following)
    return None


def _said(response: Response) -> str:
    text = " ".join(bytes(line).decode("utf-8", "replace") for line in response.lines)
    return f"{response.result} {text}".strip()[:300]
