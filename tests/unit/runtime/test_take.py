"""``msh inbox --take``: one folder per MessageId, never an overwrite, acknowledged only once on disk."""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from msh.ebms.mime import MimePart, PartBody
from msh.runtime.msh import Msh
from msh.runtime.take import METADATA, Outcome, folder_name, payload_names, take_inbox
from msh.store.api import InboxState
from tests.support.endpoint import CPA_ID, PARTY_A, PARTY_B, party_b_settings, valid_message


@pytest.fixture
def receiver(tmp_path: Path) -> Iterator[Msh]:
    msh = Msh(party_b_settings(tmp_path / "store"))
    yield msh
    msh.close()


def receive(msh: Msh, message_id: str, payload: bytes) -> None:
    content_type, body = valid_message(msh, message_id, payload=payload)
    reply, _after = msh.receive_http(body, content_type)
    assert reply.status == 200, reply.body


def part(content_id: str | None, content_type: str = "application/xml", **headers: str) -> MimePart:
    return MimePart(
        content_id,
        content_type,
        content_type.split(";")[0],
        None,
        "7bit",
        tuple((k.replace("_", "-"), v) for k, v in headers.items()),
        PartBody.from_bytes(b""),
    )


# ------------------------------------------------------------------------------------------- names


@pytest.mark.parametrize(
    "message_id",
    ["a/b@x", "..", ".", ".hidden@x", "a\\b", "", "é@x", "%41@x", "A@x", "a b@x", "x" * 500, "x" * 501, "NUL\x00@x"],
)
def test_folder_names_are_safe(message_id: str) -> None:
    name = folder_name(message_id)
    assert name not in ("", ".", "..") and not name.startswith(".")
    assert "/" not in name and "\\" not in name and "\x00" not in name
    assert len(name) <= 200 and name.isascii()
    assert folder_name(message_id) == name  # deterministic


def test_folder_names_do_not_collide() -> None:
    ids = ["a/b@x", "a%2Fb@x", "a_b@x", "%41@x", "A@x", ".x", "%2Ex", "x" * 500, "x" * 501, "x" * 140 + "~"]
    names = [folder_name(m) for m in ids]
    assert len(set(names)) == len(ids), names
    assert folder_name("ordinary-id.123@party-a.example") == "ordinary-id.123@party-a.example"


def test_payload_names_come_from_the_file_name_or_the_content_id_made_safe_and_unique() -> None:
    parts = (
        part("c1@x", content_disposition='attachment; filename="../../etc/passwd"'),
        part("c2@x", 'application/pdf; name="C:\\\\orders\\\\order 7.pdf"'),
        part("c3@x"),
        part(None),
        part("c5@x", content_disposition="attachment; filename=passwd"),
        part("c6@x", content_disposition='attachment; filename="message.json"'),
        part("c7@x", content_disposition='attachment; filename=".."'),
    )
    names = payload_names(parts)
    assert names == ["passwd", "order%207.pdf", "c3@x", "payload-4", "2-passwd", "2-message.json", "c7@x"]
    assert METADATA not in names


# -------------------------------------------------------------------------------------------- take


def test_each_message_becomes_a_folder_with_its_payloads_and_metadata(receiver: Msh, tmp_path: Path) -> None:
    receive(receiver, "m1/one@party-a.example", b"<order n='1'/>")
    receive(receiver, "m2@party-a.example", b"<order n='2'/>")
    out = tmp_path / "out"
    results = take_inbox(receiver, out)
    assert [r.outcome for r in results] == [Outcome.TAKEN, Outcome.TAKEN]
    assert sorted(p.name for p in out.iterdir()) == ["m1%2Fone@party-a.example", "m2@party-a.example"]
    folder = out / "m1%2Fone@party-a.example"
    meta = json.loads((folder / METADATA).read_text(encoding="utf-8"))
    [payload] = meta["payloads"]
    assert (folder / payload["file"]).read_bytes() == b"<order n='1'/>"
    assert payload["sha256"] == hashlib.sha256(b"<order n='1'/>").hexdigest() and payload["size"] == 14
    assert payload["contentType"] == "application/xml" and payload["contentId"]
    assert meta["messageId"] == "m1/one@party-a.example"
    assert meta["cpaId"] == CPA_ID and meta["action"] == "NewOrder" and meta["conversationId"]
    assert meta["service"]["value"] == "urn:example:services:ordering"
    assert meta["from"]["partyIds"] == [{"value": PARTY_A[0], "type": PARTY_A[1]}]
    assert meta["to"]["partyIds"] == [{"value": PARTY_B[0], "type": PARTY_B[1]}]
    assert meta["refToMessageId"] is None and meta["receivedAt"] and meta["timestamp"]
    assert sorted(os.listdir(folder)) == sorted([METADATA, payload["file"]])
    assert [e.state for e in receiver.inbox(None)] == [InboxState.ACKNOWLEDGED_BY_APP] * 2
    assert take_inbox(receiver, out) == []  # offered once


def test_an_existing_folder_is_never_overwritten_and_its_message_not_acknowledged(
    receiver: Msh, tmp_path: Path
) -> None:
    out = tmp_path / "out"
    taken_before = out / folder_name("m1@party-a.example")
    taken_before.mkdir(parents=True)
    (taken_before / "order.xml").write_bytes(b"the application's own file")
    receive(receiver, "m1@party-a.example", b"<order n='1'/>")
    receive(receiver, "m2@party-a.example", b"<order n='2'/>")
    results = take_inbox(receiver, out)
    assert [(r.message_id, r.outcome) for r in results] == [
        ("m1@party-a.example", Outcome.REFUSED),
        ("m2@party-a.example", Outcome.TAKEN),
    ]
    assert os.listdir(taken_before) == ["order.xml"]
    assert (taken_before / "order.xml").read_bytes() == b"the application's own file"
    states = {e.message_id: e.state for e in receiver.inbox(None)}
    assert states == {"m1@party-a.example": InboxState.NEW, "m2@party-a.example": InboxState.ACKNOWLEDGED_BY_APP}
    assert not [p for p in out.iterdir() if p.name.startswith(".")]  # no temporary folder left


def test_a_file_in_the_way_refuses_too(receiver: Msh, tmp_path: Path) -> None:
    out = tmp_path / "out"
    out.mkdir()
    (out / "m1@party-a.example").write_bytes(b"a file")
    receive(receiver, "m1@party-a.example", b"<order/>")
    [result] = take_inbox(receiver, out)
    assert result.outcome is Outcome.REFUSED
    assert (out / "m1@party-a.example").read_bytes() == b"a file"
    assert [e.state for e in receiver.inbox(None)] == [InboxState.NEW]


def test_a_failure_while_writing_leaves_no_folder_and_no_acknowledgment(
    receiver: Msh, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    receive(receiver, "m1@party-a.example", b"<order/>")
    out = tmp_path / "out"

    def no_rename(src: object, dst: object) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr("msh.runtime.take.os.rename", no_rename)
    with pytest.raises(OSError, match="No space"):
        take_inbox(receiver, out)
    assert list(out.iterdir()) == []
    assert [e.state for e in receiver.inbox(None)] == [InboxState.NEW]


def test_a_take_cut_short_before_its_acknowledgment_is_acknowledged_on_the_next_take(
    receiver: Msh, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    receive(receiver, "m1@party-a.example", b"<order/>")
    out = tmp_path / "out"

    def crash(entry_id: int) -> None:
        raise KeyboardInterrupt

    with monkeypatch.context() as patch:
        patch.setattr(receiver, "ack", crash)
        with pytest.raises(KeyboardInterrupt):
            take_inbox(receiver, out)
    assert [e.state for e in receiver.inbox(None)] == [InboxState.NEW]
    folder = out / "m1@party-a.example"
    written = {p.name: p.read_bytes() for p in folder.iterdir()}
    [result] = take_inbox(receiver, out)
    assert result.outcome is Outcome.ALREADY_THERE
    assert {p.name: p.read_bytes() for p in folder.iterdir()} == written
    assert [e.state for e in receiver.inbox(None)] == [InboxState.ACKNOWLEDGED_BY_APP]


def test_a_message_fetched_but_never_acknowledged_is_taken_too(receiver: Msh, tmp_path: Path) -> None:
    receive(receiver, "m1@party-a.example", b"<order/>")
    [entry] = receiver.inbox()
    receiver.fetch(entry.id).close()  # an application fetched it, then died before acknowledging
    assert receiver.inbox() == []
    [result] = take_inbox(receiver, tmp_path / "out")
    assert result.outcome is Outcome.TAKEN
    assert [e.state for e in receiver.inbox(None)] == [InboxState.ACKNOWLEDGED_BY_APP]
