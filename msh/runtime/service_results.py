"""What the application learns from a Ping or a StatusRequest of ours (ebMS2 §8, §7): the records
:meth:`msh.runtime.msh.Msh.ping` and :meth:`~msh.runtime.msh.Msh.remote_status` return (the command line and
the REST interface print them)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from msh.ebms.model import MessageStatus
from msh.runtime.attempts import ReceivedError

__all__ = ["PingResult", "RemoteStatus"]


@dataclass(frozen=True, slots=True)
class PingResult:
    """What came of one MSH Ping (ebMS2 §8.1).

    ``message_id`` is the Ping's, ``partner`` the party pinged (``type:value``), ``cpa_id`` the agreement
    it went under and ``url`` where it went. ``pong`` is True when the Pong came (§8.2): then
    ``round_trip`` is the time from sending the Ping to receiving the Pong, ``on_connection`` says whether
    it came back on the connection (True) or later to our endpoint (False), and ``pong_message_id`` is its
    MessageId. Otherwise ``problem`` says what went wrong (connection refused, TLS failure, an HTTP status,
    an error message such as NotSupported, no Pong in time); ``errors`` are the errors of an ErrorList the
    partner answered with. ``http_status`` is the status of the answer on the connection (None: none came)."""

    message_id: str
    partner: str
    cpa_id: str
    url: str
    sent_at: datetime
    pong: bool
    round_trip: timedelta | None = None
    on_connection: bool | None = None
    pong_message_id: str | None = None
    http_status: int | None = None
    problem: str | None = None
    errors: tuple[ReceivedError, ...] = ()


@dataclass(frozen=True, slots=True)
class RemoteStatus:
    """What the To party said about one of our messages when asked (ebMS2 §7.1.1, §7.3).

    ``message_id`` is the message asked about, ``request_message_id`` the StatusRequest's MessageId;
    ``message_status`` what the StatusResponse says (Received, Processed, Forwarded, NotRecognized,
    UnAuthorized; None: no StatusResponse came, and ``problem`` says why), ``timestamp`` when the partner
    says it received the message (§7.3.2; absent for NotRecognized and UnAuthorized). ``round_trip``,
    ``on_connection``, ``response_message_id``, ``http_status`` and ``errors`` as in :class:`PingResult`."""

    message_id: str
    request_message_id: str
    partner: str
    cpa_id: str
    url: str
    sent_at: datetime
    message_status: MessageStatus | None = None
    timestamp: datetime | None = None
    round_trip: timedelta | None = None
    on_connection: bool | None = None
    response_message_id: str | None = None
    http_status: int | None = None
    problem: str | None = None
    errors: tuple[ReceivedError, ...] = ()

    @property
    def answered(self) -> bool:
        """Whether a StatusResponse came."""
        return self.message_status is not None
