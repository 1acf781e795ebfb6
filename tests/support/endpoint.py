"""Party B's MSH served over plain HTTP on 127.0.0.1 in a background thread, for endpoint tests."""

from __future__ import annotations

import contextlib
import dataclasses
import io
import tomllib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
from lxml import etree

from cpa.resolve import Exchange
from msh.ebms.envelope import serialise_envelope
from msh.ebms.message import ParseMode, parse_message, write_message
from msh.ebms.mime import AttachmentSpec
from msh.ebms.model import Envelope, Party, PartyId
from msh.runtime.compose import Payload, Submission, compose
from msh.runtime.config import Settings, settings_from_mapping
from msh.runtime.msh import Msh
from msh.security import load_certificates, load_private_key, sign
from msh.store.api import utc_now
from msh.testing.threaded import serving_in_thread

CONFIG_DIR = Path(__file__).resolve().parents[2] / "samples" / "config"
KEYS_DIR = CONFIG_DIR.parent / "keys"
RSA_SHA256 = "http://www.w3.org/2001/04/xmldsig-more#rsa-sha256"
SHA256 = "http://www.w3.org/2001/04/xmlenc#sha256"
DS = "http://www.w3.org/2000/09/xmldsig#"
PARTY_ID_TYPE = "urn:oasis:names:tc:ebcore:partyid-type:iso6523:0088"
PARTY_A = ("123456789", PARTY_ID_TYPE)
PARTY_B = ("987654321", PARTY_ID_TYPE)
CPA_ID = "cpa-demo-a-b"
SERVICE = "urn:example:services:ordering"
ACTION = "NewOrder"
START_TIMEOUT = 20.0
STOP_TIMEOUT = 20.0


@dataclass(frozen=True)
class RunningMsh:
    """A served MSH: its endpoint URL (``http://127.0.0.1:<port>/msh``), port and object."""

    url: str
    port: int
    msh: Msh


def party_b_settings(tmp_path: Path, **server: Any) -> Settings:
    """Settings like samples/config/party-b.toml, over plain HTTP on a free port, store in ``tmp_path``."""
    tmp_path.mkdir(parents=True, exist_ok=True)
    data = tomllib.loads((CONFIG_DIR / "party-b.toml").read_text(encoding="utf-8"))
    data["server"] = {**data["server"], "tls": False, "port": 0, "host": "127.0.0.1", **server}
    data["store"] = {**data["store"], "url": str(tmp_path / "party-b.sqlite")}
    return settings_from_mapping(data, base_dir=CONFIG_DIR, source=str(CONFIG_DIR / "party-b.toml"), env={})


@contextlib.contextmanager
def serving(tmp_path: Path, **server: Any) -> Iterator[RunningMsh]:
    """Run party B's MSH with the real server on its own asyncio loop in a thread; stop it (bounded)."""
    settings = party_b_settings(tmp_path, **server)
    msh = Msh(settings)
    try:
        with serving_in_thread(settings, msh, timeout=START_TIMEOUT) as port:
            yield RunningMsh(f"http://127.0.0.1:{port}/msh", port, msh)
    finally:
        msh.close()


@pytest.fixture
def party_b(tmp_path: Path) -> Iterator[RunningMsh]:
    """Party B's MSH with the default server.max_body_bytes (2 GiB)."""
    with serving(tmp_path / "b") as running:
        yield running


@pytest.fixture
def party_b_small(tmp_path: Path) -> Iterator[RunningMsh]:
    """Party B's MSH accepting bodies of at most 1 MiB."""
    with serving(tmp_path / "b-small", max_body_bytes=1 << 20) as running:
        yield running


def valid_message(
    msh: Msh,
    message_id: str,
    *,
    cpa_id: str = CPA_ID,
    from_party: tuple[str, str] = PARTY_A,
    payload: bytes | None = b"<order n='1'/>",
    now: datetime | None = None,
) -> tuple[str, bytes]:
    """A valid ebXML message from A to B (Content-Type, body), as A would send it, with ``message_id``;
    ``payload`` None: no payload, so the bare SOAP envelope as text/xml (ebMS2 §2.1.2).

    ``cpa_id`` and ``from_party`` are written into the header after composing, to make messages that
    are well formed but not allowed by B's agreement."""
    when = now or utc_now()
    params = msh.registry.resolve(CPA_ID, Exchange(PARTY_A, PARTY_B, SERVICE, ACTION), now=when)
    payloads = () if payload is None else (Payload(payload, "application/xml"),)
    submission = Submission(PARTY_B, SERVICE, ACTION, payloads)
    composed = compose(
        params,
        submission,
        message_id=message_id,
        now=when,
        conversation_id=f"conv-{message_id}",
        content_id_domain="party-a.example",
    )
    envelope = composed.envelope
    if cpa_id != CPA_ID or from_party != PARTY_A:
        envelope = _rewrite_header(envelope, cpa_id, from_party)
    return signed_as_a(envelope, composed.attachments)


def signed_as_a(envelope: Envelope, attachments: Sequence[AttachmentSpec]) -> tuple[str, bytes]:
    """The message (Content-Type, body) signed with party A's demo key, as the sample agreement has A sign
    (rsa-sha256, sha256, ebMS2 §4.1.3)."""
    key = load_private_key(KEYS_DIR / "party-a.key.pem")
    certificate = load_certificates(KEYS_DIR / "party-a.cert.pem")[0]
    payloads = {a.content_id: a.body for a in attachments}
    soap = sign(serialise_envelope(envelope), payloads, key, certificate, RSA_SHA256, SHA256)
    out = io.BytesIO()
    content_type = write_message(out, envelope, attachments, soap=soap)
    return content_type, out.getvalue()


def resigned(body: bytes, content_type: str) -> bytes:
    """``body`` (a package signed as A, then changed) signed again as A over what it now holds, the MIME
    framing kept: a message that differs from the original yet carries a valid signature."""
    message = parse_message(body, content_type, mode=ParseMode.LENIENT)
    try:
        root = etree.fromstring(message.soap)
        for signature in root.iter(f"{{{DS}}}Signature"):
            parent = signature.getparent()
            assert parent is not None
            previous = signature.getprevious()
            if previous is not None:
                previous.tail = signature.tail
            parent.remove(signature)
        key = load_private_key(KEYS_DIR / "party-a.key.pem")
        certificate = load_certificates(KEYS_DIR / "party-a.cert.pem")[0]
        payloads = {p.content_id or "": p.body for p in message.payloads}
        unsigned = etree.tostring(root, xml_declaration=True, encoding="UTF-8")
        soap = sign(unsigned, payloads, key, certificate, RSA_SHA256, SHA256)
        assert body.count(message.soap) == 1
        return body.replace(message.soap, soap)
    finally:
        message.close()


def _rewrite_header(envelope: Envelope, cpa_id: str, from_party: tuple[str, str]) -> Envelope:
    header = envelope.message_header
    assert header is not None
    party = Party((PartyId(from_party[0], from_party[1]),), header.from_party.role)
    header = dataclasses.replace(header, cpa_id=cpa_id, from_party=party)
    return dataclasses.replace(envelope, message_header=header)
