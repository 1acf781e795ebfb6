"""The runtime's side of multi-hop (ebMS2 §10): whose message it is, which route, whom to trust, the bytes.

:class:`Forwarding` answers the runtime's questions about the routing table (:mod:`msh.engine.routing`)
and the MSH's own party:

* whether a received message is addressed here (its To party is our party: one of the PartyIds our
  settings or our PartyInfo in its agreement give us) or is to be forwarded (:mod:`msh.engine.intermediary`
  decides how);
* which route a message or a signal to a party takes (the first matching row), and which route an
  endpoint URL belongs to (for the TLS context of a transmission);
* whether a signal from a party that is not the one our message went to comes from an intermediary we
  trust on that message's path: it answered on the connection of our own transmission (the endpoint the
  agreement or the routing table names), or it is the declared next hop of one of our routes
  (``next_hop_party``), or its TLS client certificate is one the agreement lists for the other party (the
  certificate of the intermediary fronting it);
* the bytes forwarded to the next hop (:func:`msh.ebms.hop.forward_message`): the message as received with
  only the elements aimed at the next MSH replaced, spooled to disk when large.
"""

from __future__ import annotations

import io
import tempfile
from collections.abc import Iterable
from typing import BinaryIO, Final

from cpa.check import FROM_PARTY_ID, FROM_ROLE, CheckResult
from cpa.model import CollaborationProtocolAgreement
from cpa.resolve import PartyKey, matching_parties, party_keys
from msh.ebms.hop import forward_message
from msh.ebms.model import MessageHeader, Party, PartyId
from msh.ebms.namespaces import SERVICE_MSH
from msh.engine.routing import Route, find_route
from msh.engine.signals import party_text
from msh.runtime.core import Core
from msh.store.api import OutboundMessage
from msh.transport.tls import certificate_of

__all__ = ["KEEP_IN_MEMORY", "Forwarding"]

KEEP_IN_MEMORY: Final = 1 << 20
"""Bytes: a forwarded body this small stays in memory (for its first transmission); larger ones spool."""

# ebMS2 §6.3.2.4, §6.5.7: the signals an intermediary may send about messages it forwards.
_RELAY_ACTIONS: Final = frozenset({"Acknowledgment", "MessageError"})


class Forwarding:
    """The routing table and the MSH's own party, as the runtime asks about them (see the module docs)."""

    def __init__(self, core: Core) -> None:
        self.core = core
        value, type_ = core.party
        self.own_party = Party((PartyId(value, type_),))
        self.own_id = party_text(value, type_)
        self._own_keys: dict[str, frozenset[PartyKey]] = {}

    @property
    def routes(self) -> tuple[Route, ...]:
        return self.core.routes

    # -- whose message

    def own_keys(self, cpa_id: str) -> frozenset[PartyKey]:
        """Our PartyIds in the agreement ``cpa_id``: the settings' one, and every other PartyId of the
        PartyInfo that lists it (ebMS2 §3.1.1: several PartyIds may name one party)."""
        keys = self._own_keys.get(cpa_id)
        if keys is None:
            found: set[PartyKey] = {self.core.party}
            cpa = self.core.registry.get(cpa_id)
            if cpa is not None:
                for info in matching_parties(cpa, (self.core.party,)):
                    found.update(party_keys(info))
            keys = frozenset(found)
            if len(self._own_keys) < 10_000:
                self._own_keys[cpa_id] = keys
        return keys

    def addressed_here(self, header: MessageHeader) -> bool:
        """Whether the message's To party is this MSH's party (else it is forwarded, ebMS2 §10).

        A To PartyId with one of our values but another type, under an agreement we are a party of and with
        no route for it, is ours too: the agreement's check answers it (Inconsistent at the To PartyId,
        ebMS2 §3.1.1.1, §3.1.2), rather than a DeliveryFailure for want of a route to a party that is not
        there."""
        mine = self.own_keys(header.cpa_id)
        if any((p.value, p.type) in mine for p in header.to_party.party_ids):
            return True
        cpa = self.core.registry.get(header.cpa_id)
        if cpa is None or not matching_parties(cpa, (self.core.party,)):
            return False
        values = {value for value, _ in mine}
        if not any(p.value in values for p in header.to_party.party_ids):
            return False
        return self.route(header.to_party, header.cpa_id, header.service.value, header.action) is None

    # -- routes

    def route(self, to_party: Party, cpa_id: str, service: str, action: str) -> Route | None:
        """The route a message to ``to_party`` takes (the first matching row), or None."""
        if not self.routes:
            return None
        keys = tuple((p.value, p.type) for p in to_party.party_ids)
        return find_route(self.routes, keys, cpa_id, service, action)

    def not_the_next_hop(self, stored: OutboundMessage, sender: Party | None) -> str | None:
        """Why a signal from ``sender`` about ``stored`` (a message this MSH forwards, or a signal of its own)
        does not come from its next hop: the party it went to, or the intermediary the route to it names as
        next hop; None when it does."""
        if sender is None:
            return None
        hop = self.route_for_url(stored.endpoint_url)
        expected = {stored.to_party}
        if hop is not None and hop.next_hop_party is not None:
            expected.add(party_text(*hop.next_hop_party))
        if any(party_text(p.value, p.type) in expected for p in sender.party_ids):
            return None
        first = sender.party_ids[0]
        hops = ", ".join(sorted(expected))
        return f"it comes from {party_text(first.value, first.type)}, not from the next hop ({hops})"

    def route_for_url(self, url: str) -> Route | None:
        """The first route whose next hop is ``url`` (for the TLS context of a transmission there)."""
        for route in self.routes:
            if route.next_hop == url:
                return route
        return None

    # -- whom to trust

    def _declared_hop(self, party: Party) -> bool:
        keys = {(p.value, p.type) for p in party.party_ids}
        return any(r.next_hop_party in keys for r in self.routes if r.next_hop_party is not None)

    def _other_parties_certificates(self, cpa: CollaborationProtocolAgreement) -> Iterable[bytes]:
        for info in cpa.party_infos:
            if self.core.party in party_keys(info):
                continue
            for cert in info.certificates:
                yield from cert.x509

    def relayed(
        self,
        header: MessageHeader,
        result: CheckResult,
        *,
        peer_certificate: bytes | None,
        on_connection: bool,
    ) -> CheckResult | None:
        """The check result without its From-party errors when ``header`` is an acknowledgment or error
        message from an intermediary we trust (see the module docs); None when it is not one."""
        cpa = result.cpa
        if cpa is None or header.service.value != SERVICE_MSH or header.action not in _RELAY_ACTIONS:
            return None
        if matching_parties(cpa, party_keys(header.from_party)):
            return None  # From is a party of the agreement: judged as such
        trusted = on_connection or self._declared_hop(header.from_party)
        if not trusted and peer_certificate is not None:
            trusted = certificate_of(peer_certificate, self._other_parties_certificates(cpa))
        if not trusted:
            return None
        # ebMS2 §10, §6.5.7: the intermediary is not a party of the agreement; everything else still counts.
        kept = tuple(i for i in result.issues if i.location not in (FROM_PARTY_ID, FROM_ROLE))
        return CheckResult(kept, result.effective, cpa, result.sending_channel_id, result.receiving_channel_id)

    # -- the bytes

    def rewrite(
        self, raw: BinaryIO | bytes, content_type: str, insert: tuple[str, ...]
    ) -> tuple[BinaryIO | bytes, str]:
        """The body to forward (bytes when small, else a spooled file at position 0) and its Content-Type:
        ``raw`` with the elements aimed at the next MSH replaced by ``insert`` (ebMS2 §10.1.5)."""
        source: BinaryIO
        if isinstance(raw, bytes):
            source = io.BytesIO(raw)
        else:
            source = raw
            source.seek(0)
        spool = tempfile.SpooledTemporaryFile(max_size=KEEP_IN_MEMORY)  # noqa: SIM115 (returned or closed)
        try:
            forwarded = forward_message(
                source,
                content_type,
                spool,  # type: ignore[arg-type]
                insert=insert,
                allow_unterminated=self.core.settings.receiving.accept_unterminated_packages,
            )
            size = spool.tell()
            spool.seek(0)
            if size <= KEEP_IN_MEMORY:
                body = spool.read()
                spool.close()
                return body, forwarded.content_type
            return spool, forwarded.content_type  # type: ignore[return-value]
        except BaseException:
            spool.close()
            raise
