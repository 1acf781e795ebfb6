"""Submitting a message for an application, exactly once per Message-ID/MsgCreate pair (SOA-Rity for HTTP).

The response of a new reliable request is recorded with the pair in the same transaction as the
submission itself (:meth:`msh.runtime.msh.Msh.submit_async` ``also=``): either both are committed or
neither is. Two requests racing with one pair both decide "new", but only one insert of the pair succeeds
(the store's key); the other's submission is rolled back with it, and it answers as a repeat.
A refused submission (no agreement allows it, a bad value) records nothing: nothing was done, and a
repeat is refused the same way.
"""

from __future__ import annotations

import functools
import json
from dataclasses import dataclass
from datetime import UTC

from cpa.resolve import party_keys
from msh.api import soarity
from msh.api.context import ApiContext
from msh.api.models import SubmitRequest, Submitted
from msh.api.problems import Problem
from msh.errors import ConfigurationError
from msh.runtime.compose import Payload, Submission
from msh.store.api import Direction, Event, EventKind, Transaction
from msh.store.app_records import AppRequest
from msh.store.errors import DuplicateKey

__all__ = ["Answer", "party_of", "submit", "submitter", "to_submission", "visible_to"]

_REJECTED_HEADERS = {soarity.SOARITY: soarity.REJECTED}


@dataclass(frozen=True, slots=True)
class Answer:
    """A response to send: status and JSON body (bytes, as recorded)."""

    status: int
    body: bytes
    repeated: bool = False


def submitter(events: list[Event]) -> str | None:
    """The application that submitted a message through the interfaces (from its journal), or None."""
    for event in events:
        if event.kind == EventKind.API_SUBMITTED:
            application = event.detail.get("application")
            return application if isinstance(application, str) else None
    return None


def visible_to(application: str, events: list[Event]) -> bool:
    """Whether ``application`` may see a sent message: one submitted by another application through the
    interfaces is not shown (404); one submitted otherwise (``msh send``, the Python API) is."""
    owner = submitter(events)
    return owner is None or owner == application


def party_of(ctx: ApiContext, value: str, type_: str | None) -> tuple[str, str | None]:
    """The To party: its PartyId type from the agreements when the request gives none and they know one
    (as ``msh send --to`` does); 422 when they know the value with several types."""
    if type_ is not None:
        return (value, type_)
    types = {
        kind
        for cpa in ctx.msh.registry
        for info in cpa.party_infos
        for (known, kind) in party_keys(info)
        if known == value and (known, kind) != ctx.msh.party
    }
    if len(types) > 1:
        listed = ", ".join(sorted(t or "(none)" for t in types))
        raise Problem(
            422,
            "invalid-submission",
            "Invalid submission",
            f"the agreements know the party {value!r} with several types ({listed}); give to.type",
        )
    return (value, types.pop() if types else None)


def to_submission(
    request: SubmitRequest, payloads: list[Payload] | None = None, ctx: ApiContext | None = None
) -> Submission:
    """The runtime's :class:`Submission` of a request (422 when it cannot be composed); with ``ctx``, a
    To party without a type takes the one the agreements give it."""
    ttl = request.time_to_live
    if ttl is not None and (ttl.tzinfo is None or ttl.utcoffset() is None):
        raise Problem(422, "invalid-submission", "Invalid submission", "timeToLive needs its time zone (Z or +01:00)")
    parts = (
        payloads
        if payloads is not None
        else [Payload(p.content(), p.content_type, p.content_id) for p in request.payloads]
    )
    try:
        return Submission(
            to_party=(
                party_of(ctx, request.to.party_id, request.to.type)
                if ctx is not None
                else (request.to.party_id, request.to.type)
            ),
            service=request.service,
            action=request.action,
            payloads=tuple(parts),
            cpa_id=request.cpa_id,
            service_type=request.service_type,
            conversation_id=request.conversation_id,
            ref_to_message_id=request.ref_to_message_id,
            time_to_live=ttl.astimezone(UTC) if ttl is not None else None,
            ack_requested=request.ack_requested,
            duplicate_elimination=request.duplicate_elimination,
            from_role=request.from_role,
            to_role=request.to_role,
        )
    except ValueError as exc:
        raise Problem(422, "invalid-submission", "Invalid submission", str(exc)) from None


def _known(message_id: str, tx: Transaction) -> AppRequest | None:
    return tx.app_request(message_id)


def _body(message_id: str, request_id: str | None, base: str) -> bytes:
    doc = Submitted(
        message_id=message_id, request_id=request_id, status="pending", href=f"{base}/messages/{message_id}"
    )
    return json.dumps(doc.model_dump(by_alias=True), ensure_ascii=False).encode("utf-8")


async def submit(
    ctx: ApiContext,
    application: str,
    pair: soarity.Pair | None,
    fingerprint: str,
    submission: Submission,
) -> Answer:
    """Submit ``submission`` for ``application``; with ``pair``, exactly once (see the module docs)."""
    base = ctx.settings.path.rstrip("/")
    for _ in range(2):  # a lost race with the same pair is answered as a repeat on the second round
        if pair is not None:
            known = await ctx.read(functools.partial(_known, pair.message_id))
            decision = soarity.decide(
                pair,
                application,
                fingerprint,
                known,
                now=ctx.now(),
                window=ctx.settings.window,
                clock_skew=ctx.settings.clock_skew,
            )
            if decision.outcome is soarity.Outcome.REJECTED:
                raise Problem(403, "soarity-rejected", soarity.REJECTED, decision.why, headers=_REJECTED_HEADERS)
            if decision.outcome is soarity.Outcome.DIFFERENT:
                raise Problem(
                    400,
                    "soarity-materially-different",
                    "Materially different request",
                    decision.why,
                    headers={soarity.SOARITY: soarity.SUPPORTED},
                )
            if decision.outcome is soarity.Outcome.REPEAT:
                assert known is not None
                return Answer(known.status, known.response, repeated=True)
        answer: list[Answer] = []

        def also(tx: Transaction, message_id: str, answer: list[Answer] = answer) -> None:
            body = _body(message_id, pair.message_id if pair else None, base)
            now = ctx.now()
            if pair is not None:
                tx.record_app_request(
                    AppRequest(pair.message_id, application, pair.msg_create, fingerprint, 201, body, now)
                )
            tx.append_event(
                at=now,
                kind=EventKind.API_SUBMITTED,
                message_id=message_id,
                direction=Direction.OUTBOUND,
                detail={"application": application, "requestId": pair.message_id if pair else None},
            )
            answer.append(Answer(201, body))

        try:
            await ctx.msh.submit_async(submission, also=also)
        except DuplicateKey:
            continue
        except ConfigurationError as exc:
            raise Problem(422, "submission-refused", "Submission refused", str(exc)) from None
        except ValueError as exc:
            raise Problem(422, "invalid-submission", "Invalid submission", str(exc)) from None
        return answer[-1]
    raise Problem(
        503,
        "busy",
        "Try again",
        "the same Message-ID is being submitted concurrently; repeat the request",
        headers={soarity.SOARITY: soarity.SUPPORTED, "Retry-After": "1"},
    )
