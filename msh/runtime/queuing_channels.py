"""Which sending channels a queuing transport makes reliable: ``sending.reliable_messaging_method`` checked
against the agreements an MSH works under (the *Reliable Messaging* draft's ReliableMessagingMethod).

Neither the CPA 2.0 schema nor the ebMS 2.0 header has a ReliableMessagingMethod, so the MSH's setting names
the DeliveryChannels (by channelId) whose messages use ``Transport``. A name is refused at the start, with
what to do, when it is no channel of this party in the loaded agreements, when the channel sends nothing of
this party's, or (for ``Transport``) when a message sent on it goes to an endpoint that is not a queuing
transport's (an ``amqp:`` or ``amqps:`` URL): "Implementations should use the facilities of the Queuing
Transport to determine if the message was delivered" (the draft's "Queuing Transports" section), and an HTTP
or SMTP endpoint has none.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from cpa.model import CollaborationProtocolAgreement, EndpointType
from cpa.reliable_messaging_method import QUEUING_SCHEMES, ReliableMessagingMethod
from cpa.resolve import PartyKey, party_keys, routes
from msh.errors import ConfigurationError
from msh.runtime.config.messaging import reliable_messaging_methods
from msh.transport.schemes import scheme_of

__all__ = ["queuing_channels"]

_SETTING = "sending.reliable_messaging_method"


def _ours(cpa: CollaborationProtocolAgreement, party: PartyKey) -> set[str]:
    """The channelIds of the DeliveryChannels of ``party`` in ``cpa``."""
    return {
        channel.channel_id
        for info in cpa.party_infos
        if party in party_keys(info)
        for channel in (*info.delivery_channels, info.default_msh_channel)
    }


def queuing_channels(
    entries: tuple[str, ...], agreements: Iterable[CollaborationProtocolAgreement], party: PartyKey
) -> Mapping[str, ReliableMessagingMethod]:
    """Sending channel id -> ReliableMessagingMethod, from the setting's ``entries`` (``CHANNEL_ID=METHOD``),
    each checked against the ``agreements`` this ``party`` is in; a :class:`ConfigurationError` names the first
    entry that cannot be used and says what to do."""
    try:
        methods = reliable_messaging_methods(entries)
    except ValueError as exc:
        raise ConfigurationError(f"{_SETTING}: {exc}") from None
    if not methods:
        return {}
    ours = list(agreements)
    for channel_id, method in methods.items():
        in_agreements = [c for c in ours if channel_id in _ours(c, party)]
        if not in_agreements:
            loaded = ", ".join(c.cpaid for c in ours) or "none"
            raise ConfigurationError(
                f"{_SETTING}: {channel_id!r} is not the channelId of a DeliveryChannel of yours in the loaded "
                f"agreements ({loaded}); name the sending channel (its channelId) or remove the entry"
            )
        endpoints = [
            (cpa.cpaid, route, route.receiving.transport.receiver)
            for cpa in in_agreements
            for route in routes(cpa)
            if route.sending.channel_id == channel_id and party in party_keys(route.from_party)
        ]
        if not endpoints:
            raise ConfigurationError(
                f"{_SETTING}: channel {channel_id!r} sends no message of yours in agreement(s) "
                f"{', '.join(c.cpaid for c in in_agreements)} (no CanSend binding of yours names it first); name "
                "the channel your messages are sent on"
            )
        if method is not ReliableMessagingMethod.TRANSPORT:
            continue
        for cpaid, route, receiver in endpoints:
            endpoint = receiver.endpoint(EndpointType.REQUEST) if receiver is not None else None
            url = endpoint.uri if endpoint is not None else None
            if url is None or scheme_of(url) not in QUEUING_SCHEMES:
                raise ConfigurationError(
                    f"{_SETTING}: channel {channel_id!r} is set to Transport, but in agreement {cpaid} its "
                    f"{route.service} {route.action} messages go to {url or 'no endpoint'} (channel "
                    f"{route.receiving.channel_id}), which is not a queuing transport (an amqp: or amqps: URL); "
                    "reliability can be left to the transport only where a broker takes the message: use ebXML "
                    "for this channel"
                )
    return methods
