"""What an agreement that sends by e-mail cannot ask for (ebMS2 Appendix B.3): refused when it is loaded.

A TransportReceiver whose Endpoint is a ``mailto:`` URI takes its messages by SMTP (ebMS2 B.3; CPP/A 2.0
§8.4.28-§8.4.29: the Endpoint is where the TransportProtocol delivers). Two things such an agreement cannot say:

* a ``mailto:`` Endpoint under a TransportProtocol other than SMTP, or an SMTP TransportReceiver whose Endpoint
  is not ``mailto:``: the agreement contradicts itself about how messages travel;
* replies on the connection (``syncReplyMode`` other than ``none``) for messages sent to a mail endpoint:
  ebMS2 B.3.3, "All ebXML response messages, including errors and acknowledgments, are delivered
  asynchronously". A mail relay answers with an SMTP code, never with the partner's acknowledgment; waiting
  for one would never end, and the partner would answer on a connection that does not exist.

:func:`smtp_binding_problems` lists them, one sentence each naming the rule, the channel and what to write.
"""

from __future__ import annotations

from cpa.model import (
    CollaborationProtocolAgreement,
    DeliveryChannel,
    EndpointType,
    PartyInfo,
    SyncReplyMode,
    TransportReceiver,
)
from cpa.resolve import routes

__all__ = ["by_mail", "smtp_binding_problems"]

SMTP = "SMTP"
"""The TransportProtocol of the SMTP binding (CPP/A 2.0 §8.4.24: HTTP, SMTP, ...)."""


def _is_mailto(uri: str) -> bool:
    head, colon, _ = uri.partition(":")
    return bool(colon) and head.strip().lower() == "mailto"


def by_mail(receiver: TransportReceiver | None) -> bool:
    """True when messages to ``receiver`` travel by e-mail: its TransportProtocol is SMTP, or its request (or
    allPurpose) Endpoint is a ``mailto:`` URI."""
    if receiver is None:
        return False
    endpoint = receiver.endpoint(EndpointType.REQUEST)
    return receiver.protocol.strip().upper() == SMTP or (endpoint is not None and _is_mailto(endpoint.uri))


def _protocol_problems(cpa: CollaborationProtocolAgreement, info: PartyInfo) -> list[str]:
    problems: list[str] = []
    seen: set[str] = set()
    for channel in (*info.delivery_channels, info.default_msh_channel):
        transport = channel.transport
        receiver = transport.receiver
        if receiver is None or transport.transport_id in seen:
            continue
        seen.add(transport.transport_id)
        smtp = receiver.protocol.strip().upper() == SMTP
        where = (
            f"agreement {cpa.cpaid}: the TransportReceiver of {info.party_name} (transport {transport.transport_id})"
        )
        for endpoint in receiver.endpoints:
            # ebMS2 B.3, CPP/A 2.0 §8.4.28-§8.4.29: a mailto: Endpoint is reached by SMTP, and SMTP reaches a mailbox.
            if _is_mailto(endpoint.uri) and not smtp:
                problems.append(
                    f"{where} has the Endpoint {endpoint.uri} under the TransportProtocol {receiver.protocol}: a "
                    "mailto: endpoint takes messages by e-mail (ebMS2 B.3); write "
                    "<tp:TransportProtocol>SMTP</tp:TransportProtocol>, or an http(s) Endpoint"
                )
            elif smtp and not _is_mailto(endpoint.uri):
                problems.append(
                    f"{where} is SMTP but its Endpoint {endpoint.uri} is not a mailto: address (ebMS2 B.3); write "
                    'the MSH\'s mailbox, e.g. <tp:Endpoint tp:uri="mailto:msh@partner.example" tp:type="allPurpose"/>'
                )
    return problems


def _sync_reply_problem(what: str, sending: DeliveryChannel, receiving: DeliveryChannel) -> str | None:
    mode = sending.messaging_characteristics.sync_reply_mode
    receiver = receiving.transport.receiver
    if mode is SyncReplyMode.NONE or not by_mail(receiver):
        return None
    endpoint = receiver.endpoint(EndpointType.REQUEST) if receiver is not None else None
    to = endpoint.uri if endpoint is not None else f"transport {receiving.transport.transport_id} (SMTP)"
    # ebMS2 B.3.3: over SMTP every response message is delivered asynchronously.
    return (
        f"{what} (channel {sending.channel_id}) asks for replies on the connection (syncReplyMode {mode.value}) but "
        f'its messages go by mail to {to}: ebMS2 B.3.3 "All ebXML response messages, including errors and '
        'acknowledgments, are delivered asynchronously"; set tp:syncReplyMode="none" on the '
        f"MessagingCharacteristics of channel {sending.channel_id}"
    )


def smtp_binding_problems(cpa: CollaborationProtocolAgreement) -> list[str]:
    """What of ``cpa`` the SMTP binding makes impossible (see the module docs), one sentence each; empty when
    nothing is."""
    problems: list[str] = []
    for info in cpa.party_infos:
        problems += _protocol_problems(cpa, info)
    seen: set[str] = set()
    for route in routes(cpa):
        what = f"agreement {cpa.cpaid}: {route.from_party.party_name} sending {route.service}/{route.action}"
        problem = _sync_reply_problem(what, route.sending, route.receiving)
        if problem is not None and route.sending.channel_id not in seen:
            seen.add(route.sending.channel_id)
            problems.append(problem)
    a, b = cpa.party_infos
    for sender, receiver in ((a, b), (b, a)):
        # Signals (acknowledgments, errors, status requests, pings) travel on the default MSH channels.
        what = f"agreement {cpa.cpaid}: {sender.party_name} sending MSH signals"
        problem = _sync_reply_problem(what, sender.default_msh_channel, receiver.default_msh_channel)
        if problem is not None and sender.default_msh_channel.channel_id not in seen:
            seen.add(sender.default_msh_channel.channel_id)
            problems.append(problem)
    return problems
