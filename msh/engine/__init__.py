"""The sans-IO reliable-messaging engine (DESIGN.md §2): state machines fed events, returning actions.

:mod:`msh.engine.sending` is the sending state machine of one outbound message (ebMS2 §6.5.1, §6.5.4,
§6.5.7), :mod:`msh.engine.receiving` decides what a receiving MSH does with one inbound message
(ebMS2 §6.5.2-§6.5.6, §7, §8) in the terms of :mod:`msh.engine.inbound` (its inputs, actions and
decision), :mod:`msh.engine.replies` builds the signals it answers with, :mod:`msh.engine.timers` holds
the retry arithmetic. Nothing here reads a clock, makes an id or does I/O: ``now`` and ids are
parameters, the runtime executes the actions.
"""

from __future__ import annotations

from msh.engine.inbound import (
    ConflictingDuplicate,
    Discard,
    EndpointRef,
    InboundAction,
    InboundDecision,
    OutboundEvent,
    RecordAcknowledgment,
    Reject,
    ReplySync,
    ResendStoredAck,
    SendAsync,
    SignalReceived,
    StatusAnswer,
    StoredAck,
    StoredInbound,
    StoreInbound,
)
from msh.engine.receiving import BUSINESS_RULES, InboundOutcome, receive
from msh.engine.replies import acknowledgment_message, pong_message, status_response_message
from msh.engine.sending import (
    DEFAULT_ACK_WAIT,
    TRANSITIONS,
    AcknowledgmentReceived,
    Action,
    CancelTimer,
    EngineError,
    ErrorReceived,
    Event,
    NotifyDelivered,
    NotifyFailed,
    OutboundState,
    OutboundStatus,
    Reliability,
    ScheduleTimer,
    Submit,
    TimerDue,
    Transition,
    Transmit,
    TransmitFailed,
    TransmitSucceeded,
    UnknownMessage,
    state_diagram,
    step,
)
from msh.engine.timers import GiveUp, nominal_schedule

__all__ = [
    "BUSINESS_RULES",
    "DEFAULT_ACK_WAIT",
    "TRANSITIONS",
    "AcknowledgmentReceived",
    "Action",
    "CancelTimer",
    "ConflictingDuplicate",
    "Discard",
    "EndpointRef",
    "EngineError",
    "ErrorReceived",
    "Event",
    "GiveUp",
    "InboundAction",
    "InboundDecision",
    "InboundOutcome",
    "NotifyDelivered",
    "NotifyFailed",
    "OutboundEvent",
    "OutboundState",
    "OutboundStatus",
    "RecordAcknowledgment",
    "Reject",
    "Reliability",
    "ReplySync",
    "ResendStoredAck",
    "ScheduleTimer",
    "SendAsync",
    "SignalReceived",
    "StatusAnswer",
    "StoreInbound",
    "StoredAck",
    "StoredInbound",
    "Submit",
    "TimerDue",
    "Transition",
    "Transmit",
    "TransmitFailed",
    "TransmitSucceeded",
    "UnknownMessage",
    "acknowledgment_message",
    "nominal_schedule",
    "pong_message",
    "receive",
    "state_diagram",
    "status_response_message",
    "step",
]
