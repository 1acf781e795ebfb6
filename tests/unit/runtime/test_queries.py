"""The operator's queries on the MSH (msh.runtime.queries): a received message listed and its history read
through ``Msh.messages`` and ``Msh.history``, never through the store."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from msh.runtime.msh import Msh
from msh.store.api import Direction, EventKind
from msh.store.listing import MessageFilter
from tests.support.endpoint import CPA_ID, PARTY_A, party_b_settings, valid_message


@pytest.fixture
def receiver(tmp_path: Path) -> Iterator[Msh]:
    msh = Msh(party_b_settings(tmp_path / "store"))
    yield msh
    msh.close()


def test_a_received_message_is_listed_with_its_history(receiver: Msh) -> None:
    content_type, body = valid_message(receiver, "m1@a.example", payload=b"<order/>")
    reply, _after = receiver.receive_http(body, content_type)
    assert reply.status == 200, reply.body
    page = receiver.messages(MessageFilter(direction=Direction.INBOUND))
    assert [r.message_id for r in page.rows] == ["m1@a.example"] and page.next_cursor is None
    row = page.rows[0]
    assert (row.status, row.cpa_id, row.partner) == ("available", CPA_ID, f"{PARTY_A[1]}:{PARTY_A[0]}")
    assert row.size is not None and row.size > len(b"<order/>")
    assert receiver.messages(MessageFilter(direction=Direction.OUTBOUND)).rows == ()
    kinds = [e.kind for e in receiver.history("m1@a.example")]
    assert kinds[0] == EventKind.RECEIVED
    assert receiver.history("unknown@x") == []


def test_a_bad_filter_is_a_value_error(receiver: Msh) -> None:
    with pytest.raises(ValueError, match="not one of"):
        receiver.messages(MessageFilter(status="gone"))
