"""CPP/CPA 2.0 agreements: the typed model (:mod:`cpa.model`), the loader that builds it, the registry,
sending-parameter resolution (:func:`resolve`) and inbound header checks (:func:`check`).

    >>> from cpa import load
    >>> agreement = load("samples/cpas/demo-a-b.xml")
    >>> agreement.party_infos[0].default_msh_channel.transport.receiver.endpoints[0].uri
    'https://127.0.0.1:8081/msh'

:func:`load` raises :class:`CpaError`, whose ``problems`` say what is wrong, where, and what to do; what
is worth telling but does not stop an agreement from loading comes back in its ``warnings``. Durations are
:class:`XsDuration` values (months included).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

from cpa.algorithms import KNOWN_ALGORITHMS, AlgorithmUse
from cpa.check import CheckResult, check
from cpa.duration import XsDuration, parse_duration
from cpa.errors import CpaError, CpaProblem
from cpa.model import (
    AccessAuthentication,
    ActionBinding,
    Certificate,
    CollaborationProtocolAgreement,
    CollaborationRole,
    CompositePart,
    ConversationConstraints,
    DeliveryChannel,
    DigitalEnvelope,
    DocExchange,
    EbxmlBinding,
    Endpoint,
    EndpointType,
    MessageOrderSemantics,
    MessagingCharacteristics,
    NonRepudiation,
    Packaging,
    PartyId,
    PartyInfo,
    PerMessage,
    ReliableMessaging,
    SecurityDetails,
    ServiceBinding,
    SimplePart,
    Status,
    SyncReplyMode,
    Transport,
    TransportReceiver,
    TransportSecurity,
    TransportSender,
)
from cpa.precedence import Reading
from cpa.registry import CpaRegistry
from cpa.resolve import AgreementRefused, Exchange, SendingParameters, resolve

if TYPE_CHECKING:
    from cpa.loader import load

__all__ = [
    "AccessAuthentication",
    "ActionBinding",
    "AgreementRefused",
    "AlgorithmUse",
    "Certificate",
    "CheckResult",
    "CollaborationProtocolAgreement",
    "CollaborationRole",
    "CompositePart",
    "ConversationConstraints",
    "CpaError",
    "CpaRegistry",
    "CpaProblem",
    "DeliveryChannel",
    "DigitalEnvelope",
    "DocExchange",
    "EbxmlBinding",
    "Endpoint",
    "EndpointType",
    "Exchange",
    "KNOWN_ALGORITHMS",
    "MessageOrderSemantics",
    "MessagingCharacteristics",
    "NonRepudiation",
    "PartyId",
    "Packaging",
    "PartyInfo",
    "PerMessage",
    "Reading",
    "ReliableMessaging",
    "SecurityDetails",
    "SendingParameters",
    "ServiceBinding",
    "SimplePart",
    "Status",
    "SyncReplyMode",
    "Transport",
    "TransportReceiver",
    "TransportSecurity",
    "TransportSender",
    "XsDuration",
    "check",
    "load",
    "parse_duration",
    "resolve",
]


def __getattr__(name: str) -> object:
    """``cpa.load``, imported from :mod:`cpa.loader` on first use (PEP 562).

    The loader is the one module left out of the imports above: it brings cryptography, signxml and
    xmlschema, which importing the model, the checks or the registry (as the engine does) must not. The
    other names are bound at import: ``check`` and ``resolve`` are also the names of modules of this
    package, and a name bound later would be shadowed by the module once that is imported.
    """
    if name == "load":
        value: object = importlib.import_module("cpa.loader").load
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
