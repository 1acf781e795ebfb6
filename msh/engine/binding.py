"""The HTTP binding's decisions (ebMS2 Appendix B.2), sans-IO: which HTTP answer goes with what the
receiving MSH decided, and what the answer to one of our transmissions means for the sending machine.

Pure functions of their inputs; the runtime serialises the envelopes and carries out the rest. The
decisions the specifications leave open:

* A message whose envelope cannot be read at all gets a SOAP Fault with HTTP 500 (SOAP 1.1 §6.2); one
  whose header can still be read (From, To, CPAId, ConversationId, MessageId) gets an ErrorList message
  with HTTP 200, whatever else is wrong (ebMS2 B.2.3, §4.2.4.2); a body that is neither
  ``multipart/related`` nor an XML media type gets a SOAP Fault with HTTP 415 (ebMS2 §2.1.2).
* An answer on the connection that carries a SOAP Fault of faultcode Client fails the message (severity
  Error): the peer could not process it at all, and resending the identical bytes cannot help (SOAP 1.1
  §4.4.1: "the message should not be resent without change"). A Server fault is the peer's own trouble
  (§4.4.1: "the message may succeed at a later point in time"): a lost transmission, resent by the timer,
  and one that was not taken (our own endpoint answers a failure of its store so, having committed
  nothing).
* Any other 2xx answer means the peer received the message (ebMS2 B.2.3; for a message without
  AckRequested that makes it ``sent``); a non-2xx answer without an ebXML message is a lost transmission,
  resent by the timer. Whether the message may have been taken (ebMS2 §6.5.7: transmitted) follows the
  status's meaning (RFC 9110 §15): a 4xx refuses the request, a 502 or 503 says it was not passed on or
  not served; any other status (500, 504, ...) leaves open that it was.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Final

from msh.ebms.errorlist import error_list, error_message, soap_fault
from msh.ebms.model import Envelope, Fault, ReplyAddress
from msh.engine.inbound import InboundDecision, Reject
from msh.engine.sending import ErrorReceived, Event, TransmitFailed, TransmitSucceeded
from msh.errors import EbmsError, EnvelopeError, ErrorCode, Issue, MimeProblemError, Severity

__all__ = ["EBXML_MEDIA_TYPES", "Answer", "refusal", "reply_status", "server_fault", "transmission_outcome"]

EBXML_MEDIA_TYPES: Final = frozenset({"multipart/related", "text/xml", "application/xml", "application/soap+xml"})
"""ebMS2 §2.1.2: an ebXML message is a multipart/related package or a bare SOAP envelope (text/xml;
lenient parsing also takes the other XML media types)."""


@dataclass(frozen=True, slots=True)
class Answer:
    """What goes back on the connection: the HTTP status and the envelope (None: no body)."""

    status: int
    envelope: Envelope | None = None


def refusal(
    error: EbmsError,
    *,
    media_type: str | None,
    reply_to: ReplyAddress | None,
    message_id: str,
    timestamp: datetime,
) -> Answer:
    """The answer to a message that failed to parse with ``error``: ``media_type`` is its Content-Type's
    media type, ``reply_to`` the addressing salvaged from its header (None: none could be read);
    ``message_id`` and ``timestamp`` are the ErrorList message's."""
    if isinstance(error, MimeProblemError) and media_type is not None and media_type not in EBXML_MEDIA_TYPES:
        # ebMS2 §2.1.2: only multipart/related or text/xml carry ebXML messages.
        return Answer(415, soap_fault(error))
    if isinstance(error, EnvelopeError) or reply_to is None:
        # SOAP 1.1 §6.2: a SOAP Fault goes back with HTTP 500 when no ebXML answer can be addressed.
        return Answer(500, soap_fault(error))
    # ebMS2 B.2.3, §4.2.4.2: the header is readable: report to its sender in an ErrorList message.
    return Answer(200, error_message(error, in_reply_to=reply_to, message_id=message_id, timestamp=timestamp))


def reply_status(decision: InboundDecision, has_reply: bool) -> int:
    """The HTTP status of the answer to a received message: 202 with no body when nothing goes back on
    the connection, 500 with the SOAP Fault of a refusal that could not be addressed, 200 with the
    acknowledgment, ErrorList or other signal."""
    if not has_reply:
        # ebMS2 B.2.5, B.2.3: nothing to return synchronously: a 2xx code with an empty body.
        return 202
    if any(isinstance(action, Reject) and action.message_id is None for action in decision.actions):
        # ebMS2 B.2.4: a SOAP Fault on the connection goes with HTTP 500.
        return 500
    return 200


_NOT_TAKEN: Final = frozenset({502, 503})
"""RFC 9110 §15.6.3, §15.6.4: a gateway that got no valid answer upstream, a server that did not serve."""


def server_fault(fault: Fault) -> bool:
    """Whether ``fault`` is a SOAP 1.1 Server fault (``Server``, ``SOAP-ENV:Server``, ``Server.Busy``)."""
    code = fault.faultcode.rsplit(":", 1)[-1]
    return code == "Server" or code.startswith("Server.")


def transmission_outcome(status: int, fault: Fault | None) -> Event:
    """The sending machine's event for one transmission whose HTTP answer had ``status`` and carried the
    SOAP ``fault`` (None: no fault; an ebXML signal it carried is handled by the receiving side)."""
    if fault is not None and server_fault(fault):
        # SOAP 1.1 §4.4.1: Server: not the message's fault; "the message may succeed at a later point in time".
        return TransmitFailed(f"HTTP {status} with a SOAP Server fault: {fault.faultstring}", transmitted=False)
    if fault is not None:
        # SOAP 1.1 §4.4.1: Client: the peer could not process our message at all; resending it will not help.
        issue = Issue(
            ErrorCode.OTHER_XML,
            Severity.ERROR,
            f"the peer answered with a SOAP Fault: {fault.faultcode} {fault.faultstring}",
        )
        return ErrorReceived(error_list(issue), fault=True)
    if 200 <= status < 300:
        # ebMS2 B.2.3: a 2xx code is returned when the posted message was received.
        return TransmitSucceeded()
    # ebMS2 §6.5.7: was it transmitted? A 4xx, 502 or 503 says the message was not taken (RFC 9110 §15).
    taken = not (400 <= status < 500 or status in _NOT_TAKEN)
    return TransmitFailed(f"HTTP {status} from the peer", transmitted=taken)
