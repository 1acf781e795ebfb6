"""A received message whose signature covers the envelope but not every payload part (ebMS2 §4.1.3: "Each
payload object requiring signing SHALL be represented by a [XMLDSIG] Reference"): the running MSH accepts
it, as the agreement signs per message, not per payload, and says which parts the signature does not cover
(msh/security/verifying.py, the decision); a signed part changed on the way is still refused."""

from __future__ import annotations

import io
import logging

import pytest

from cpa.resolve import Exchange
from msh.ebms.envelope import serialise_envelope
from msh.ebms.message import write_message
from msh.ebms.mime import AttachmentSpec
from msh.ebms.model import Envelope
from msh.runtime.compose import compose
from msh.runtime.msh import Msh
from msh.security import load_certificates, load_private_key, sign
from msh.testing.network import TestNetwork
from tests.support.endpoint import PARTY_A, RSA_SHA256, SHA256
from tests.support.secure_network import ACTION, KEYS, PARTY_B, SERVICE, order, run_pair


def _composed(b: Msh, message_id: str) -> tuple[Envelope, tuple[AttachmentSpec, ...]]:
    now = b.clock()
    params = b.registry.resolve("cpa-demo-a-b", Exchange(PARTY_A, PARTY_B, SERVICE, ACTION), now=now)
    composed = compose(
        params, order(1), message_id=message_id, now=now, conversation_id="c-1", content_id_domain="a.example"
    )
    return composed.envelope, composed.attachments


def _signed_envelope_only(envelope: Envelope, attachments: tuple[AttachmentSpec, ...]) -> tuple[str, bytes]:
    """The message signed as A over its envelope alone: no Reference names its payload part."""
    key = load_private_key(KEYS / "party-a.key.pem")
    [certificate] = load_certificates(KEYS / "party-a.cert.pem")
    soap = sign(serialise_envelope(envelope), {}, key, certificate, RSA_SHA256, SHA256)
    out = io.BytesIO()
    content_type = write_message(out, envelope, attachments, soap=soap)
    return content_type, out.getvalue()


def test_a_payload_the_signature_does_not_cover_is_delivered_and_said_unsigned(
    caplog: pytest.LogCaptureFixture,
) -> None:
    async def scenario(net: TestNetwork, a: Msh, b: Msh) -> None:
        envelope, attachments = _composed(b, "envelope-only-1@a.example")
        content_type, body = _signed_envelope_only(envelope, attachments)
        with caplog.at_level(logging.WARNING, logger="msh.runtime"):
            reply = await b.handle_http(body, content_type)
        assert b"<eb:Acknowledgment" in reply.body
        assert [e.message_id for e in b.inbox(None, limit=10)] == ["envelope-only-1@a.example"]
        [cid] = [x.content_id for x in attachments]
        assert any(
            "envelope-only-1@a.example" in r.getMessage()
            and f"cid:{cid} is not covered by the signature" in r.getMessage()
            for r in caplog.records
        )

    run_pair(scenario)


def test_the_opened_message_lists_the_parts_its_signature_does_not_cover() -> None:
    async def scenario(net: TestNetwork, a: Msh, b: Msh) -> None:
        from cpa.check import check
        from msh.ebms.message import ParseMode, parse_message

        envelope, attachments = _composed(b, "envelope-only-2@a.example")
        content_type, body = _signed_envelope_only(envelope, attachments)
        message = parse_message(body, content_type, mode=ParseMode.LENIENT)
        try:
            cpa = b.registry.get("cpa-demo-a-b")
            assert cpa is not None
            result = check(message.envelope, cpa, now=b.clock())
            opened = b.core.security.open(message, result, at=b.clock())
            assert opened.verified and opened.unsigned_payloads == tuple(x.content_id for x in attachments)
        finally:
            message.close()

    run_pair(scenario)
