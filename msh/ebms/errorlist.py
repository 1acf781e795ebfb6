"""Turning errors into messages, in one place (docs/design.md §6).

An error found in a readable message is answered with an ebXML error message: a MessageHeader from the
receiving party back to the sender, Service ``urn:oasis:names:tc:ebxml-msg:service``, Action
``MessageError``, RefToMessageId naming the message in error, and an ``eb:ErrorList`` (ebMS2 §4.2.3,
§4.2.4). Where the envelope cannot be read at all, no such message can be addressed, and the answer is a
SOAP 1.1 Fault instead (SOAP 1.1 §4.4). Both functions are pure: the new message's id and timestamp are
inputs.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime

from msh.ebms.model import (
    Description,
    Envelope,
    Error,
    ErrorList,
    Fault,
    MessageData,
    MessageHeader,
    ReplyAddress,
    Service,
)
from msh.ebms.namespaces import SERVICE_MSH
from msh.errors import EbmsError, Issue, Severity, highest_severity
from msh.safexml import xml_safe

__all__ = ["ACTION_MESSAGE_ERROR", "error_list", "error_message", "soap_fault", "to_issues"]

# ebMS2 §4.2.4.2: the Action of an error message.
ACTION_MESSAGE_ERROR = "MessageError"


def to_issues(errors: EbmsError | Issue | Iterable[EbmsError | Issue]) -> tuple[Issue, ...]:
    """Flatten exceptions and issues into one tuple of :class:`Issue`."""
    if isinstance(errors, (EbmsError, Issue)):
        errors = (errors,)
    out: list[Issue] = []
    for item in errors:
        out.extend(item.issues if isinstance(item, EbmsError) else (item,))
    if not out:
        raise ValueError("at least one error is needed to build an ErrorList")
    return tuple(out)


def error_list(errors: EbmsError | Issue | Iterable[EbmsError | Issue], *, lang: str = "en") -> ErrorList:
    """The ``eb:ErrorList`` for ``errors``; highestSeverity per ebMS2 §4.2.3.1."""
    issues = to_issues(errors)
    return ErrorList(
        errors=tuple(
            Error(
                # Text copied from the input may hold what XML cannot: escaped, so the reply can always be built.
                error_code=xml_safe(i.error_code.value),
                severity=i.severity,
                location=xml_safe(i.location, limit=512) or None,
                description=Description(xml_safe(i.description), lang) if i.description.strip() else None,
                code_context=xml_safe(i.code_context, limit=512),
            )
            for i in issues
        ),
        highest_severity=highest_severity(issues),
    )


def error_message(
    errors: EbmsError | Issue | Iterable[EbmsError | Issue],
    *,
    in_reply_to: MessageHeader | ReplyAddress,
    message_id: str,
    timestamp: datetime,
) -> Envelope:
    """The ebXML error message answering the message whose header (or just its addressing part, when
    the rest could not be read) is ``in_reply_to``.

    From and To are the reverse of the message in error, CPAId and ConversationId are kept
    (ebMS2 §4.2.4.2, §4.2.4.3), and RefToMessageId names the message in error.
    """
    address = in_reply_to if isinstance(in_reply_to, ReplyAddress) else ReplyAddress.of(in_reply_to)
    header = MessageHeader(
        from_party=address.to_party,
        to_party=address.from_party,
        cpa_id=address.cpa_id,
        conversation_id=address.conversation_id,
        # ebMS2 §4.2.4.3: error messages use the MSH service and the MessageError action.
        service=Service(SERVICE_MSH),
        action=ACTION_MESSAGE_ERROR,
        message_data=MessageData(
            message_id=message_id,
            timestamp=timestamp,
            ref_to_message_id=address.message_id,
        ),
    )
    return Envelope(message_header=header, error_list=error_list(errors))


def soap_fault(errors: EbmsError | Issue | Iterable[EbmsError | Issue], *, server: bool = False) -> Envelope:
    """A SOAP Fault for a message whose envelope could not be read.

    ``faultcode`` is ``SOAP:Client`` (the message was at fault) unless ``server`` is set (SOAP 1.1
    §4.4.1); ``faultstring`` carries the descriptions and locations of the errors.
    """
    issues = to_issues(errors)
    text = xml_safe("; ".join(str(i) for i in issues), limit=4096)
    severity = highest_severity(issues)
    return Envelope(
        fault=Fault(
            faultcode="SOAP:Server" if server else "SOAP:Client",
            faultstring=text if severity is Severity.ERROR else f"(warnings only) {text}",
        )
    )
