"""What the MSH does with one received mail (ebMS2 Appendix B.3), for both mail receivers: the SMTP listener
(:mod:`msh.runtime.smtp_listener`) and the mailbox reader (:mod:`msh.runtime.mailbox_reader`).

:meth:`MailIntake.take` reads the mail (:func:`msh.transport.mail_read.read_mail`) and says what its source is
to do with it (:class:`Disposition`):

* an ebXML message goes through the same inbound pipeline as an HTTP POST (:meth:`msh.runtime.msh.Msh.handle_http`),
  which commits before it returns. Taken (``TAKEN``) when the pipeline answered 2xx, or 4xx (it refused the
  message and said why): the source may drop the mail now. What the pipeline answered "on the connection" (an
  acknowledgment, an ErrorList) goes back by mail to the sender's address, since over SMTP every response is
  asynchronous (ebMS2 B.3.3); one that cannot be sent is logged, never dropped silently (the sender resends
  and gets it again: ebMS2 §6.5.5). A 5xx with a SOAP Server fault (the store is down) is ``RETRY``: the mail
  stays at its source and comes again; a redelivered mail is a duplicate the pipeline eliminates (ebMS2
  §6.4.4). A SOAP Client fault (no SOAP envelope could be read) makes it a dead letter.
* a delivery status notification (ebMS2 B.3.3) is recorded against the message it names
  (:meth:`MailIntake.delivery_report`): a failure of a message awaiting its acknowledgment counts as a lost
  transmission (the sending machine's ``TransmitFailed``, not transmitted: the timer resends it, ebMS2
  §6.5.4); one already ``sent`` (no acknowledgment asked) fails with a DeliveryFailure Error, since the
  partner's MSH never got it (ebMS2 §6.5.7); a delay is only journaled.
* anything else is a ``DEAD_LETTER``: the source keeps it in its dead-letter folder (ebMS2 B.3.3 "SHOULD
  retain the unidentified message in a 'dead letter' folder") and :meth:`MailIntake.dead_lettered` logs and
  journals where ("SHOULD place an entry in an audit log indicating the disposition of each received message").
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from enum import StrEnum
from typing import TYPE_CHECKING

from msh.ebms.errorlist import error_list
from msh.ebms.message import ParseMode, message_id_of, parse_message
from msh.engine import ErrorReceived, TransmitFailed
from msh.engine.binding import server_fault
from msh.engine.outcomes import OutboundStatus
from msh.errors import ErrorCode, Issue, Severity
from msh.runtime.executor import AfterCommit
from msh.store.api import StoreError, Transaction
from msh.store.events import EventKind
from msh.store.records import Direction
from msh.transport.mail_read import DeliveryReport, NotEbxml, ReceivedMail, ReportAction, read_mail
from msh.transport.port import SOAP_CONTENT_TYPE, HttpReply, Request, TransportFailure

if TYPE_CHECKING:
    from msh.runtime.msh import Msh

__all__ = ["Disposition", "MailIntake", "Taken"]

log = logging.getLogger("msh.runtime.mail")


class Disposition(StrEnum):
    """What the mail's source does with it once the MSH has dealt with it."""

    TAKEN = "taken"
    """Committed (or refused with an answer): remove it from its source."""
    RETRY = "retry"
    """The MSH cannot take it now (its store failed): leave it at its source, to come again."""
    DEAD_LETTER = "dead-letter"
    """No ebXML message nor delivery report: keep it in the dead-letter folder (ebMS2 B.3.3)."""


@dataclass(frozen=True, slots=True)
class Taken:
    """The disposition of one mail and why, in words."""

    disposition: Disposition
    reason: str
    mail_id: str | None = None


class MailIntake:
    """Hands received mail to ``msh`` (see the module docs); ``source`` names the receiver in the log."""

    def __init__(self, msh: Msh, *, source: str) -> None:
        self.msh = msh
        self.source = source

    async def take(self, data: bytes) -> Taken:
        """Deal with the mail ``data``; what its source is to do with it."""
        read = read_mail(data)
        if isinstance(read, NotEbxml):
            return Taken(Disposition.DEAD_LETTER, read.reason, read.mail_id)
        if isinstance(read, DeliveryReport):
            try:
                await self.delivery_report(read)
            except (OSError, StoreError) as exc:
                log.warning("%s: a delivery report could not be recorded now, taken again later: %s", self.source, exc)
                return Taken(Disposition.RETRY, f"the store failed: {exc}", read.mail_id)
            return Taken(Disposition.TAKEN, f"delivery report ({read.action.value})", read.mail_id)
        return await self._message(read)

    async def _message(self, mail: ReceivedMail) -> Taken:
        for warning in mail.warnings:
            log.info("%s: mail %s read with a warning: %s", self.source, mail.mail_id or "(no Message-ID)", warning)
        reply = await self.msh.handle_http(mail.body, mail.content_type, size=len(mail.body))
        if reply.status >= 500:
            fault = _fault_of(reply)
            if fault is None or fault[0]:
                # SOAP 1.1 §4.4.1: a Server fault "may succeed at a later point in time": leave the mail.
                why = fault[1] if fault is not None else f"HTTP {reply.status}"
                log.warning("%s: mail %s left for later: %s", self.source, mail.mail_id or "(no Message-ID)", why)
                return Taken(Disposition.RETRY, why, mail.mail_id)
            # SOAP 1.1 §4.4.1 Client: no ebXML message could be read from it: an unidentified message.
            return Taken(Disposition.DEAD_LETTER, f"no ebXML message could be read: {fault[1]}", mail.mail_id)
        if reply.body and reply.content_type:
            await self._answer(mail, reply.content_type, reply.body)
        elif reply.unsent_error is not None:
            # ebMS2 §4.2.4.2 and B.3.3: an error no agreement gives a way back for goes to the mail's sender.
            await self._answer(mail, SOAP_CONTENT_TYPE, reply.unsent_error)
        return Taken(Disposition.TAKEN, f"received (HTTP {reply.status} from the inbound pipeline)", mail.mail_id)

    async def _answer(self, mail: ReceivedMail, content_type: str, body: bytes) -> None:
        """ebMS2 B.3.3: "All ebXML response messages ... are delivered asynchronously": what the pipeline
        answered goes back by mail to the sender's address."""
        about = mail.mail_id or "(no Message-ID)"
        if mail.from_address is None:
            log.warning("%s: the answer to mail %s is not sent: the mail has no From or Reply-To", self.source, about)
            return
        url = f"mailto:{mail.from_address}"
        request = Request(url, content_type, body, None, message_id=message_id_of(body, content_type))
        try:
            await self.msh.transport.send(request)
        except TransportFailure as failure:
            # ebMS2 §6.5.5: the sender resends its message and gets the stored answer again.
            log.warning(
                "%s: the answer to mail %s could not be sent to %s: %s", self.source, about, url, failure.reason
            )

    async def delivery_report(self, report: DeliveryReport) -> None:
        """ebMS2 B.3.3: find the messages a delivery status notification names and record it against them."""
        msh = self.msh
        unknown: list[str] = []
        detail: dict[str, object] = {
            "action": report.action.value,
            "diagnostic": report.diagnostic,
            "recipients": list(report.recipients),
        }
        if report.mail_id:
            detail["mailId"] = report.mail_id

        def unit(tx: Transaction) -> AfterCommit:
            after = AfterCommit()
            unknown.clear()
            now = msh.clock()
            for message_id in report.message_ids:
                stored = tx.get_outbound(message_id)
                if stored is None:
                    unknown.append(message_id)
                    continue
                tx.append_event(
                    at=now,
                    kind=EventKind.DELIVERY_REPORT,
                    message_id=message_id,
                    direction=Direction.OUTBOUND,
                    detail=detail,
                )
                if report.action is ReportAction.FAILED:
                    msh.executor.step_outbound(tx, message_id, _failure_event(stored.state.status, report), now, after)
            if not report.message_ids or len(unknown) == len(report.message_ids):
                tx.append_event(at=now, kind=EventKind.DELIVERY_REPORT, direction=Direction.INBOUND, detail=detail)
            return after

        after = await msh.core.writer.run(unit)
        msh.sender.after_commit(after)
        known = [m for m in report.message_ids if m not in unknown]
        if known:
            log.warning(
                "%s: delivery report: the mail of %s was %s: %s",
                self.source,
                ", ".join(known),
                report.action.value,
                report.diagnostic,
            )
        if not known:
            # ebMS2 B.3.3: "If the MSH is unable to determine the source ... the MSH administrator should be notified."
            named = f" (it names {', '.join(unknown)}, not messages of ours)" if unknown else ""
            log.error(
                "%s: a delivery report (%s: %s) names no message this MSH sent%s; look at it in the mailbox or "
                "the journal",
                self.source,
                report.action.value,
                report.diagnostic,
                named,
            )

    async def dead_lettered(self, reason: str, where: str, mail_id: str | None) -> None:
        """ebMS2 B.3.3: log and journal that a mail was kept in the dead-letter folder ``where``."""
        log.warning(
            "%s: mail %s is no ebXML message; kept in %s (ebMS2 B.3.3): %s",
            self.source,
            mail_id or "(no Message-ID)",
            where,
            reason,
        )
        detail: dict[str, object] = {"where": where, "reason": reason, "receiver": self.source}
        if mail_id:
            detail["mailId"] = mail_id

        def unit(tx: Transaction) -> AfterCommit:
            tx.append_event(at=self.msh.clock(), kind=EventKind.DEAD_LETTER, direction=Direction.INBOUND, detail=detail)
            return AfterCommit()

        try:
            await self.msh.core.writer.run(unit)
        except (OSError, StoreError) as exc:
            log.error(
                "%s: the dead letter %s could not be journaled (the log line above is its record): %s",
                self.source,
                where,
                exc,
            )


def _failure_event(status: OutboundStatus, report: DeliveryReport) -> TransmitFailed | ErrorReceived:
    reason = f"the mail was returned undelivered: {report.diagnostic}"
    if status is OutboundStatus.SENT:
        # ebMS2 §6.5.7: handed over with no acknowledgment asked, yet it never reached the partner's MSH.
        issue = Issue(ErrorCode.DELIVERY_FAILURE, Severity.ERROR, reason)
        return ErrorReceived(error_list(issue))
    # ebMS2 §6.5.4: a transmission that did not arrive counts as a lost message; the timer resends it.
    return TransmitFailed(reason, transmitted=False)


def _fault_of(reply: HttpReply) -> tuple[bool, str] | None:
    """Whether the SOAP Fault of ``reply`` is a Server fault, and its faultstring; None: no fault in it."""
    if not reply.body:
        return None
    try:
        message = parse_message(reply.body, reply.content_type, mode=ParseMode.LENIENT)
    except Exception:
        return None
    try:
        fault = message.envelope.fault
    finally:
        message.close()
    if fault is None:
        return None
    return server_fault(fault), fault.faultstring
