"""The one error tree of the MSH (docs/design.md §6).

Protocol errors carry their ebMS 2.0 meaning (ebMS2 §4.2.3.2): an ``errorCode``, a ``severity`` and a
``location`` (an XPath into the offending message, or ``cid:...`` for a payload part). Turning such an
error into an ``eb:ErrorList`` message or a SOAP Fault is done in one place, :mod:`msh.ebms.errorlist`.

Configuration errors (a bad CPA, a missing key, a bad setting) are a separate branch: they are the
operator's to fix, never sent to a partner, and their message says what to change.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

__all__ = [
    "ERROR_CODE_CONTEXT",
    "ConfigurationError",
    "EbmsError",
    "EnvelopeError",
    "ErrorCode",
    "Issue",
    "MimeProblemError",
    "MshError",
    "SecurityError",
    "Severity",
    "highest_severity",
]

# ebMS2 §4.2.3.2.2: the default codeContext of the errorCode values.
ERROR_CODE_CONTEXT = "urn:oasis:names:tc:ebxml-msg:service:errors"


class ErrorCode(StrEnum):
    """ebMS2 §4.2.3.4: the errorCode values, spelt as on the wire."""

    VALUE_NOT_RECOGNIZED = "ValueNotRecognized"
    NOT_SUPPORTED = "NotSupported"
    INCONSISTENT = "Inconsistent"
    OTHER_XML = "OtherXml"
    DELIVERY_FAILURE = "DeliveryFailure"
    TIME_TO_LIVE_EXPIRED = "TimeToLiveExpired"
    SECURITY_FAILURE = "SecurityFailure"
    MIME_PROBLEM = "MimeProblem"
    UNKNOWN = "Unknown"


class Severity(StrEnum):
    """ebMS2 §4.2.3.2.4: Warning lets processing go on; Error stops it."""

    WARNING = "Warning"
    ERROR = "Error"


@dataclass(frozen=True, slots=True)
class Issue:
    """One problem found in a message, as it would be reported in an ``eb:Error`` element.

    ``location`` is an XPath into the message (``//Header/MessageHeader/From/PartyId``) or a
    ``cid:`` URI naming a MIME part (ebMS2 §4.2.3.2.5); empty when the problem has no place.
    """

    error_code: ErrorCode
    severity: Severity
    description: str
    location: str = ""
    code_context: str = ERROR_CODE_CONTEXT

    def __str__(self) -> str:
        where = f" at {self.location}" if self.location else ""
        return f"{self.severity.value} {self.error_code.value}{where}: {self.description}"


def highest_severity(issues: list[Issue] | tuple[Issue, ...]) -> Severity:
    """ebMS2 §4.2.3.1: Error if any issue is an Error, else Warning."""
    return Severity.ERROR if any(i.severity is Severity.ERROR for i in issues) else Severity.WARNING


class MshError(Exception):
    """Root of every error the MSH raises on purpose."""


class ConfigurationError(MshError):
    """The operator's configuration (agreement, key, setting) is wrong; the message says what to fix."""


class EbmsError(MshError):
    """A protocol error with its ebMS meaning; ``issues`` holds one or more :class:`Issue`.

    The first issue is the headline; more are carried when several problems were found at once
    (a schema-invalid header usually has several).
    """

    default_code: ErrorCode = ErrorCode.UNKNOWN

    def __init__(
        self,
        description: str,
        *,
        error_code: ErrorCode | None = None,
        severity: Severity = Severity.ERROR,
        location: str = "",
        issues: tuple[Issue, ...] | list[Issue] | None = None,
    ) -> None:
        code = error_code or self.default_code
        head = Issue(code, severity, description, location)
        rest = tuple(issues or ())
        self.issues: tuple[Issue, ...] = (head, *[i for i in rest if i != head])
        super().__init__(str(head))

    @property
    def error_code(self) -> ErrorCode:
        return self.issues[0].error_code

    @property
    def severity(self) -> Severity:
        return self.issues[0].severity

    @property
    def location(self) -> str:
        return self.issues[0].location

    @property
    def description(self) -> str:
        return self.issues[0].description


class EnvelopeError(EbmsError):
    """The SOAP envelope cannot be read at all (not XML, not SOAP, hostile XML): answered with a SOAP
    Fault, since no ``eb:ErrorList`` can refer to a message nobody could read."""

    default_code = ErrorCode.OTHER_XML


class MimeProblemError(EbmsError):
    """The SOAP-with-attachments package is broken (ebMS2 §2.1, §4.2.3.4.2 MimeProblem)."""

    default_code = ErrorCode.MIME_PROBLEM


class SecurityError(EbmsError):
    """A signature or an authenticity check failed (ebMS2 §4.1, SecurityFailure)."""

    default_code = ErrorCode.SECURITY_FAILURE
