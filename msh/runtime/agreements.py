"""The agreements an MSH works under: read from the files its settings name, kept where its party is in them.

:func:`load_agreements` reads the agreement files (a problem in one stops the start, naming the file; a
warning, such as an unfilled signature template, is logged; no file at all is no agreement, for a pure
intermediary); :func:`agreement_registry` keeps the
agreements this party is in, with the first-resend timeout of the settings on their channels (never shorter
than a channel's RetryInterval, ebMS2 §6.4.4: a setting that is shorter is said at the start) and the
ReliableMessagingMethod of the channels ``sending.reliable_messaging_method`` names
(:mod:`msh.runtime.queuing_channels`).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from datetime import timedelta
from pathlib import Path

from cpa.duration import XsDuration
from cpa.errors import CpaError
from cpa.interactions import interaction_problems
from cpa.loader import load
from cpa.model import CollaborationProtocolAgreement, DeliveryChannel
from cpa.registry import CpaRegistry
from cpa.resolve import PartyKey, at_least_retry_interval, party_keys
from msh.errors import ConfigurationError
from msh.runtime.config import Settings
from msh.runtime.queuing_channels import queuing_channels
from msh.security import check_agreement_security

__all__ = ["agreement_registry", "agreements_in_use", "load_agreements"]

log = logging.getLogger("msh.runtime")


def load_agreements(files: Iterable[Path], *, verify_signatures: bool = True) -> list[CollaborationProtocolAgreement]:
    """Load every agreement file of ``files`` (:meth:`AgreementSettings.files` expands folders; none: an empty
    list); log each agreement's warnings (e.g. an unfilled signature template: it loads as unsigned)."""
    agreements = []
    for f in files:
        try:
            agreement = load(f, verify_signature=verify_signatures)
        except CpaError as exc:
            raise ConfigurationError(f"agreements.paths: {f} cannot be used:\n{exc}") from exc
        for warning in agreement.warnings:
            log.warning("agreements.paths: %s", warning)
        agreements.append(agreement)
    return agreements


def agreements_in_use(
    settings: Settings, agreements: Iterable[CollaborationProtocolAgreement] | None, party: PartyKey
) -> CpaRegistry:
    """The registry of the agreements an MSH works under: ``agreements``, or those the settings name, each
    checked for what the MSH cannot do (:func:`agreement_registry` then keeps those naming ``party``)."""
    loaded = (
        list(agreements)
        if agreements is not None
        else load_agreements(settings.agreements.files(), verify_signatures=settings.agreements.verify_signatures)
    )
    for cpa in loaded:
        # An agreement asking for security the MSH lacks is refused when loaded for use, naming the element.
        check_agreement_security(cpa)
        # ebMS2 §9.1, §10.1.1: an agreement that always asks for a combination the specification forbids.
        impossible = interaction_problems(cpa)
        if impossible:
            raise ConfigurationError("; ".join(impossible))
    return agreement_registry(settings, loaded, party)


def agreement_registry(
    settings: Settings, loaded: list[CollaborationProtocolAgreement], party: PartyKey
) -> CpaRegistry:
    """The agreements this party is in, with the first-resend timeout of the settings on their channels (never shorter
    than a channel's RetryInterval, ebMS2 §6.4.4: a setting that is shorter is said at the start).

        No agreement loaded gives an empty registry (a pure intermediary: the settings then have routes); loaded
        agreements none of which names this party are an error.
    """
    if not loaded:
        if settings.sending.reliable_messaging_method:
            raise ConfigurationError(
                "sending.reliable_messaging_method names channels, but no agreement is loaded: give "
                "agreements.paths, or remove the setting"
            )
        return CpaRegistry()
    ours = [c for c in loaded if any(party in party_keys(p) for p in c.party_infos)]
    if not ours:
        value, type_ = party
        raise ConfigurationError(
            f"identity.party_id {value!r}" + (f" (type {type_})" if type_ else "") + " is not a party "
            f"of any loaded agreement ({', '.join(c.cpaid for c in loaded)}): check identity.party_id and "
            "identity.party_id_type"
        )
    timeouts: dict[str, timedelta] = {}
    first = settings.sending.first_resend_timeout
    if first is not None:
        for cpa in ours:
            for info in cpa.party_infos:
                for channel in (*info.delivery_channels, info.default_msh_channel):
                    timeouts[channel.channel_id] = first
                    _warn_if_shorter(first, cpa, channel)
    methods = queuing_channels(settings.sending.reliable_messaging_method, ours, party)
    return CpaRegistry(ours, first_resend_timeouts=timeouts, reliable_messaging_methods=methods)


def _warn_if_shorter(first: timedelta, cpa: CollaborationProtocolAgreement, channel: DeliveryChannel) -> None:
    """Say when ``sending.first_resend_timeout`` is shorter than a channel's RetryInterval (it is not applied)."""
    binding = channel.doc_exchange.sender_binding
    rm = binding.reliable_messaging if binding is not None else None
    if rm is None:
        return
    wait = XsDuration.from_timedelta(first)
    if at_least_retry_interval(wait, rm.retry_interval) != wait:
        # ebMS2 §6.4.4: RetryInterval is also the least wait before the first retry.
        log.warning(
            "sending.first_resend_timeout %s is shorter than the RetryInterval %s of channel %s of agreement %s: "
            "the first resend waits the RetryInterval (ebMS2 §6.4.4)",
            wait,
            rm.retry_interval,
            channel.channel_id,
            cpa.cpaid,
        )
