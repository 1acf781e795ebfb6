"""The inbound pipeline: a received body becomes a committed decision and an HTTP answer (docs/design.md §5.2).

For each body POSTed to the endpoint (and each answer that comes back on one of our transmissions):

1. parse it (:func:`msh.ebms.message.parse_message`, in the receiving mode of the settings; small messages
   on the event loop, large ones on the work pool); a body that cannot be parsed is answered as the HTTP
   binding says (:func:`msh.engine.binding.refusal`: 415, a SOAP Fault, or an ErrorList addressed from
   whatever of its header can still be read) and nothing is stored;
2. check it against the agreements (:func:`cpa.check.check`) and the TLS client certificate it came with
   against the party it claims to come from (docs/design.md §7), and compute its content digest (what
   duplicate elimination compares, ebMS2 §6.5.6), all outside the store transaction;
3. decide and commit in one unit of work: :func:`msh.engine.receive` with what the store knows of the
   MessageId, carried out by the executor; a unit that loses the race for its MessageId to another
   process is decided again, as a duplicate;
4. answer with the reply the decision put on the connection (:func:`msh.engine.binding.reply_status`),
   and hand the rest (asynchronous replies, callbacks) to the after-commit work.
"""

from __future__ import annotations

import io
import logging
from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import datetime
from typing import BinaryIO

from cpa.check import CheckResult, check
from cpa.resolve import AgreementRefused, Exchange
from msh.ebms.digest import content_digest
from msh.ebms.envelope import serialise_envelope
from msh.ebms.errorlist import soap_fault
from msh.ebms.message import EbxmlMessage, ParseMode, parse_message
from msh.ebms.model import Envelope
from msh.ebms.namespaces import SERVICE_MSH
from msh.ebms.salvage import salvage_reply_address
from msh.engine import EndpointRef, Event, InboundDecision, Reject, receive
from msh.engine.binding import refusal, reply_status, transmission_outcome
from msh.engine.intermediary import StoreForward, forward
from msh.errors import ConfigurationError, EbmsError, EnvelopeError, SecurityError
from msh.runtime.core import PARSE_ON_LOOP, Core
from msh.runtime.executor import AfterCommit, Executor, RaceLost
from msh.runtime.inbound_facts import queried, stored_inbound
from msh.runtime.security import ReceiptVerdict
from msh.store.api import OutboundKind, Transaction
from msh.transport.asgi import server_fault
from msh.transport.port import SOAP_CONTENT_TYPE, HttpReply
from msh.transport.tls import client_certificate_issue

__all__ = ["Inbound", "InboundPipeline", "ReceiveUnit"]

log = logging.getLogger("msh.runtime")

ReceiveUnit = Callable[[Transaction], tuple[InboundDecision, bytes | None, AfterCommit]]
"""The unit of work that decides and commits one received message: the decision, the reply for the
connection, and the work for after the commit."""


@dataclass(frozen=True, slots=True)
class Inbound:
    """A received message, parsed and checked against the agreements, ready for its unit of work;
    ``raw`` the body as received (stored as it is), ``digest`` its content digest (business messages
    only: what duplicate elimination compares). ``forward``: it is addressed to another party, and
    ``forwarded`` is the body to forward with its Content-Type (ebMS2 §10; None when it will be refused);
    ``relayed``: a signal from an intermediary trusted to report on our messages it carries; ``verified``:
    its signature was verified (ebMS2 §4.1.3); ``receipts``: the checks of the signed acknowledgments it
    carries against the messages we sent (ebMS2 §6.3.2.5)."""

    message: EbxmlMessage
    raw: BinaryIO | bytes
    result: CheckResult
    now: datetime
    digest: str | None = None
    forward: bool = False
    forwarded: tuple[BinaryIO | bytes, str] | None = None
    relayed: bool = False
    verified: bool = False
    receipts: tuple[ReceiptVerdict, ...] = ()

    def close(self) -> None:
        """Release the spooled payloads and the spooled forwarded body."""
        self.message.close()
        if self.forwarded is not None and not isinstance(self.forwarded[0], bytes):
            self.forwarded[0].close()


class InboundPipeline:
    """Parses, checks, decides and commits received messages (see the module docs). The work a committed
    unit leaves for after the commit is the caller's (it is handed back, or to ``done`` of
    :meth:`handle_http`): this pipeline holds no way back into the sender."""

    def __init__(self, core: Core, executor: Executor) -> None:
        self.core = core
        self.executor = executor
        self.forwarding = executor.forwarding

    # -- 1. parse

    def parse(
        self, body: BinaryIO | bytes, content_type: str | None, peer_certificate: bytes | None = None
    ) -> Inbound | HttpReply:
        """Parse and check a POSTed message; an HttpReply when it cannot be read (nothing to commit)."""
        stream: BinaryIO = io.BytesIO(body) if isinstance(body, bytes) else body
        try:
            receiving = self.core.settings.receiving
            message = parse_message(
                stream,
                content_type,
                mode=receiving.parse_mode,
                allow_unterminated=receiving.accept_unterminated_packages,
            )
        except EnvelopeError as exc:
            self.core.counters["unreadable"] += 1
            log.info("unreadable message refused: %s", exc)
            # SOAP 1.1 §6.2, ebMS2 B.2.4: a SOAP Fault goes back with HTTP 500.
            return HttpReply(500, SOAP_CONTENT_TYPE, serialise_envelope(soap_fault(exc)))
        except EbmsError as exc:
            stream.seek(0)
            return self._refuse(exc, stream.read(1 << 20), content_type)
        try:
            if message.warnings:
                log.info("received with warnings: %s", "; ".join(str(w) for w in message.warnings))
            # Bytes stay bytes: stored with their size known, in one write.
            return self.check(message, body if isinstance(body, bytes) else stream, peer_certificate)
        except BaseException:
            message.close()
            raise

    def _refuse(self, exc: EbmsError, body: bytes, content_type: str | None) -> HttpReply:
        self.core.counters["rejected"] += 1
        log.info("unparseable message refused: %s", exc)
        media = content_type.split(";", 1)[0].strip().lower() if content_type is not None else None
        answer = refusal(
            exc,
            media_type=media,
            reply_to=salvage_reply_address(body),
            message_id=self.core.ids(),
            timestamp=self.core.clock(),
        )
        assert answer.envelope is not None
        return HttpReply(answer.status, SOAP_CONTENT_TYPE, serialise_envelope(answer.envelope))

    # -- 2. check

    def check(
        self,
        message: EbxmlMessage,
        raw: BinaryIO | bytes,
        peer_certificate: bytes | None = None,
        *,
        on_connection: bool = False,
    ) -> Inbound:
        """Check a parsed message against the agreements (no store access: done outside the writer), and
        the TLS client certificate it came with (DER) against the party it claims to come from; a message
        addressed to another party is prepared for forwarding instead (ebMS2 §10). ``on_connection``: it
        came back on the connection of one of our transmissions."""
        core = self.core
        now = core.clock()
        header = message.envelope.message_header
        if header is not None and not self.forwarding.addressed_here(header):
            return self._elsewhere(message, raw, now)
        s = core.settings.agreements
        result = check(message.envelope, core.registry, now=now, reading=s.reading, msh_time_accuracy=s.time_accuracy)
        relayed = False
        if header is not None:
            trusted = self.forwarding.relayed(
                header, result, peer_certificate=peer_certificate, on_connection=on_connection
            )
            if trusted is not None:
                result, relayed = trusted, True
        if peer_certificate is not None and result.cpa is not None and header is not None and not relayed:
            # docs/design.md §7: the certificate presented must belong to the party the header claims.
            issue = client_certificate_issue(
                result.cpa, header.from_party, peer_certificate, now=now, to_party=header.to_party
            )
            if issue is not None:
                # Logged once, when the refusal is executed (inbound_actions.reject), with every issue.
                core.counters["certificate-mismatches"] += 1
                result = replace(result, issues=(*result.issues, issue))
        verified, receipts = False, tuple[ReceiptVerdict, ...]()
        if header is not None and result.ok and result.cpa is not None and not relayed:
            message, raw, result, verified = self._open(message, raw, result, now)
            if result.ok and core.security.may_carry_receipts(message.envelope):
                receipts = self._receipts(message, verified)
        # Computed here, off the store transaction: the unit of work only compares it (ebMS2 §6.5.6).
        digest = content_digest(message) if header is not None and header.service.value != SERVICE_MSH else None
        return Inbound(message, raw, result, now, digest, relayed=relayed, verified=verified, receipts=receipts)

    def _open(
        self, message: EbxmlMessage, raw: BinaryIO | bytes, result: CheckResult, now: datetime
    ) -> tuple[EbxmlMessage, BinaryIO | bytes, CheckResult, bool]:
        """Decrypt and verify a message the agreement allows (ebMS2 §4.1): a failure is SecurityFailure,
        added to the check's issues, so the engine refuses the message (neither acknowledged nor delivered).
        The message returned replaces ``message`` (closed when it does), and the body to store ``raw``."""
        core = self.core
        security = core.security
        header = message.envelope.message_header
        assert header is not None
        try:
            opened = security.open(message, result, at=now)
        except SecurityError as exc:
            # Logged once, when the refusal is executed (inbound_actions.reject), with every issue.
            core.counters["security-failures"] += 1
            return message, raw, replace(result, issues=(*result.issues, *exc.issues)), False
        if opened.verified:
            core.counters["signatures-verified"] += 1
        if opened.body is None:
            return message, raw, result, opened.verified
        core.counters["decrypted"] += 1
        message.close()
        return opened.message, opened.body[0], result, opened.verified

    def _receipts(self, message: EbxmlMessage, verified: bool) -> tuple[ReceiptVerdict, ...]:
        """The checks of the acknowledgments in ``message`` that answer messages of ours which asked for a
        signed receipt (ebMS2 §6.3.2.5), against the messages as stored and sent."""
        core = self.core
        verdicts = []
        for ack in message.envelope.acknowledgments:
            with core.store.transaction(readonly=True) as tx:
                stored = tx.get_outbound(ack.ref_to_message_id)
            if stored is None:
                continue
            with core.store.open_blob(stored.body_blob_id) as blob:
                sent = parse_message(blob, stored.content_type, mode=ParseMode.LENIENT)
            try:
                payloads = {p.content_id or "": p.body for p in sent.payloads}
                verdict = core.security.receipt_verdict(message.envelope, message.soap, verified, sent.soap, payloads)
            finally:
                sent.close()
            if verdict is not None:
                verdicts.append(verdict)
        return tuple(verdicts)

    def _elsewhere(self, message: EbxmlMessage, raw: BinaryIO | bytes, now: datetime) -> Inbound:
        """A message for another party: the body to forward, if it will be (the unit of work decides again,
        with what the store knows; the elements inserted come out the same)."""
        forwarding = self.forwarding
        preview = forward(
            message.envelope,
            routes=forwarding.routes,
            own_party=forwarding.own_party,
            own_id=forwarding.own_id,
            now=now,
            new_message_id="preview",
            time_accuracy=self.core.settings.agreements.time_accuracy,
        )
        store = next((a for a in preview.actions if isinstance(a, StoreForward)), None)
        forwarded = None
        if store is not None:
            forwarded = forwarding.rewrite(raw, message.content_type, store.insert)
        return Inbound(message, raw, CheckResult(()), now, forward=True, forwarded=forwarded)

    # -- 3. decide and commit

    def _decide(self, tx: Transaction, inbound: Inbound, sync_override: bool | None) -> InboundDecision:
        """The engine's decision on ``inbound`` with what the store knows of it (read in ``tx``)."""
        envelope = inbound.message.envelope
        header = envelope.message_header
        core = self.core
        if inbound.forward and header is not None:
            # ebMS2 §10: addressed to another party: forwarded (never a duplicate, §10.1).
            mine = tx.get_outbound(header.message_id)
            return forward(
                envelope,
                routes=self.forwarding.routes,
                own_party=self.forwarding.own_party,
                own_id=self.forwarding.own_id,
                now=inbound.now,
                new_message_id=core.ids(),
                own_message=mine is not None and mine.kind is not OutboundKind.FORWARD,
                sync_reply_requested=sync_override,
                time_accuracy=core.settings.agreements.time_accuracy,
            )
        duplicate, ordered = stored_inbound(tx, envelope, core.settings.receiving.max_held_messages)
        return receive(
            envelope,
            check_result=inbound.result,
            duplicate=duplicate,
            now=inbound.now,
            new_message_id=core.ids(),
            sync_reply_requested=sync_override,
            queried=queried(tx, core.registry, envelope),
            digest=inbound.digest,
            next_id=core.ids,
            relayed=inbound.relayed,
            ordered=ordered,
            can_sign=core.security.can_sign,
        )

    def unit(
        self,
        inbound: Inbound,
        *,
        sync_override: bool | None,
        then: Callable[[Transaction, AfterCommit], None] | None = None,
    ) -> ReceiveUnit:
        """The unit of work that decides and commits ``inbound``; ``then`` runs in the same unit, after
        the decision's store actions (the outcome of the transmission an answer came on)."""

        def unit(tx: Transaction) -> tuple[InboundDecision, bytes | None, AfterCommit]:
            for _attempt in range(3):
                after = AfterCommit()
                try:
                    with tx.savepoint():
                        decision = self._decide(tx, inbound, sync_override)
                        reply = self.executor.apply_inbound(
                            tx,
                            inbound.message,
                            inbound.raw,
                            decision,
                            inbound.now,
                            after,
                            forwarded=inbound.forwarded,
                            verified=inbound.verified,
                            receipts=inbound.receipts,
                        )
                        if then is not None:
                            then(tx, after)
                    return decision, reply, after
                except RaceLost:
                    continue  # another process stored this MessageId meanwhile: decide again, as a duplicate
            raise ConfigurationError("a received message kept losing the race for its MessageId; giving up on it")

        return unit

    # -- 4. answer

    def reply(self, decision: InboundDecision, reply: bytes | None) -> HttpReply:
        """The HTTP answer for a committed decision (ebMS2 B.2.3-B.2.5)."""
        status = reply_status(decision, reply is not None)
        refused = next((a for a in decision.actions if isinstance(a, Reject)), None)
        if refused is None:
            return HttpReply(status, SOAP_CONTENT_TYPE if reply is not None else None, reply or b"")
        # ebMS2 §4.2.4: the refusal, for bindings that settle the message by it; its error message when no
        # way back was found for it (not on the connection, no endpoint: the binding's reply address may be).
        way_back = refused.sync or (refused.to_endpoint is not None and self._resolvable(refused.to_endpoint))
        unsent = None if way_back else serialise_envelope(refused.error_message)
        return HttpReply(
            status,
            SOAP_CONTENT_TYPE if reply is not None else None,
            reply or b"",
            refusal=refusal_text(refused.error_message),
            unsent_error=unsent,
        )

    def _resolvable(self, ref: EndpointRef) -> bool:
        """Whether an agreement gives an endpoint for an asynchronous reply to ``ref`` (ebMS2 §4.2.4.2)."""
        exchange = Exchange(ref.from_party, ref.to_party, ref.service, ref.action)
        try:
            self.core.registry.resolve(ref.cpa_id, exchange, now=self.core.clock())
        except AgreementRefused:
            return False
        return True

    async def handle_http(
        self,
        body: BinaryIO | bytes,
        content_type: str | None,
        *,
        done: Callable[[AfterCommit], None],
        size: int | None = None,
        peer_certificate: bytes | None = None,
    ) -> HttpReply:
        """The endpoint's way in: parse, check, decide and commit one POSTed message, hand the after-commit
        work to ``done`` (the sender's :meth:`~msh.runtime.sender.Sender.after_commit`), and return the HTTP
        answer (a 500 with a SOAP Fault when the store failed: nothing was committed, the sender resends)."""
        core = self.core
        if size is None and isinstance(body, bytes):
            size = len(body)
        try:
            # A signature to verify (or payloads to decrypt) is work for the pool, whatever the size.
            if not core.offload or (size is not None and size <= PARSE_ON_LOOP and not core.security.in_use):
                parsed = self.parse(body, content_type, peer_certificate)
            else:
                parsed = await core.off_loop(self.parse, body, content_type, peer_certificate)
            if isinstance(parsed, HttpReply):
                return parsed
            try:
                decision, reply, after = await core.writer.run(self.unit(parsed, sync_override=None))
            finally:
                parsed.close()
        except Exception as exc:
            log.exception("could not process a received message")
            return server_fault(f"the receiving MSH could not process the message: {exc}")
        relay = next((a for a in decision.actions if isinstance(a, StoreForward) and a.sync_relay), None)
        if relay is None or reply is not None or not core.running:
            done(after)
            return self.reply(decision, reply)
        # ebMS2 §4.3, §10: SyncReply at an intermediary: this connection waits for the forward's answer.
        waiting = core.relays.expect(relay.message_id)
        done(after)
        seconds = core.settings.sending.http_timeout.total_seconds()
        answer = await core.relays.wait(relay.message_id, waiting, seconds)
        if answer is not None:
            core.counters["sync-replies-relayed"] += 1
            return answer
        return self.reply(decision, reply)

    def receive_http(
        self, body: BinaryIO | bytes, content_type: str | None, *, peer_certificate: bytes | None = None
    ) -> tuple[HttpReply, AfterCommit]:
        """Process one POSTed message and commit it, blocking: the reply and the work for after the
        commit (not done here). ``body`` is read twice (parsed, then stored as received)."""
        parsed = self.parse(body, content_type, peer_certificate)
        if isinstance(parsed, HttpReply):
            return parsed, AfterCommit()
        try:
            decision, reply, after = self.core.writer.call(self.unit(parsed, sync_override=None))
        finally:
            parsed.close()
        return self.reply(decision, reply), after

    # -- answers to our own transmissions

    def read_answer(
        self, message_id: str, status: int, content_type: str | None, body: bytes
    ) -> tuple[Inbound | None, Event]:
        """What the answer to a transmission means: the ebXML message it carries (checked, for the
        receiving machine) and the sending machine's event for the transmission itself."""
        message: EbxmlMessage | None = None
        if body.strip():
            try:
                message = parse_message(body, content_type, mode=ParseMode.LENIENT)
            except EbmsError as exc:
                log.warning("answer to %s (HTTP %s) is not an ebXML message: %s", message_id, status, exc)
        try:
            fault = message.envelope.fault if message is not None else None
            event = transmission_outcome(status, fault)
            if message is None or fault is not None:
                if message is not None:
                    message.close()
                return None, event
            return self.check(message, body, on_connection=True), event
        except BaseException:
            if message is not None:
                message.close()
            raise


def refusal_text(envelope: Envelope) -> str:
    """An error message in words: each Error's severity, errorCode, location and description (ebMS2 §4.2.3),
    or the SOAP Fault's code and string."""
    if envelope.error_list is not None:
        parts = []
        for e in envelope.error_list.errors:
            where = f" at {e.location}" if e.location else ""
            text = f": {e.description.text}" if e.description is not None else ""
            parts.append(f"{e.severity.value} {e.error_code}{where}{text}")
        return "; ".join(parts)
    if envelope.fault is not None:
        return f"SOAP Fault {envelope.fault.faultcode}: {envelope.fault.faultstring}"
    return "refused"
