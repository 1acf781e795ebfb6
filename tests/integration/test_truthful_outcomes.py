"""Statuses that are what happened, between real MSH processes on loopback (HTTPS with mutual TLS).

* A → intermediary I → C with answers lost on both hops: A's message is ``forwarded`` on I's word and
  ``delivered`` only on C's, never before C has stored it.
* A → B where every answer from B is lost: B has the message but A never hears so: A's DeliveryFailure has
  severity Warning ("it may have been delivered"), not Error.

Every wait is bounded.
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path

import pytest

from msh.engine import OutboundStatus
from msh.errors import Severity
from msh.faults.chain import PARTY_C, Chain, Timings, make_chain
from msh.faults.pair import ACTION, PARTY_B, SERVICE, make_pair
from msh.faults.proxy import RunningProxy, run_in_thread
from msh.runtime.compose import Payload, Submission
from msh.runtime.config import load_settings
from msh.runtime.msh import Msh
from msh.store import open_store
from msh.store.api import Direction
from tests.support.outcomes import wait_final

MESSAGES = 40


def first_event(path: Path, kind: str, direction: Direction) -> dict[str, datetime]:
    """When each message's first ``kind`` event was journaled in the store at ``path``."""
    with open_store(str(path), migrate=False) as store, store.transaction(readonly=True) as tx:
        events = tx.list_events(0, limit=1_000_000)
    out: dict[str, datetime] = {}
    for event in events:
        if event.kind == kind and event.direction is direction and event.message_id not in out:
            out[event.message_id] = event.at
    return out


@pytest.fixture
def chain(tmp_path: Path) -> Iterator[tuple[Chain, RunningProxy, RunningProxy]]:
    timings = Timings(
        retries=12,
        retry_interval="PT1S",
        route_retries=12,
        route_retry_interval="PT1S",
        first_resend="PT1S",
        http_timeout="PT0.8S",
        poll="PT0.2S",
        lease="PT5S",
    )
    made = make_chain(tmp_path / "chain", timings=timings)
    (front_of_i, front_of_c) = made.proxied_hops()
    with run_in_thread(*front_of_i, seed=3) as to_i, run_in_thread(*front_of_c, seed=4) as to_c:
        try:
            yield made, to_i, to_c
        finally:
            made.stop()


def test_through_an_intermediary_delivered_comes_only_with_the_to_partys_word(
    chain: tuple[Chain, RunningProxy, RunningProxy],
) -> None:
    # ebMS2 §10.1.3: the intermediary's acknowledgment (actor nextMSH) says it has the message; §6.5.2: the
    # To party's acknowledgment "indicates the original message reached its destination".
    made, to_i, to_c = chain
    for partner in made.partners:
        partner.start()
    to_i.set_loss(0.0, 0.25)  # answers from I lost (A's hop acknowledgments, on the connection)
    to_c.set_loss(0.1, 0.25)  # requests to C and C's answers lost
    msh = Msh(load_settings(made.a.config, env={}))
    try:
        ids = [
            msh.submit(
                Submission(PARTY_C, SERVICE, ACTION, (Payload(f"<order n='{n}'/>".encode(), "application/xml"),))
            )
            for n in range(MESSAGES)
        ]
        final = wait_final(msh, ids, timeout=240)
    finally:
        msh.close()
    assert to_i.stats().responses_dropped > 0 and to_c.stats().responses_dropped > 0
    assert final == dict.fromkeys(ids, OutboundStatus.DELIVERED)
    delivered_at = first_event(made.a.store, "delivered", Direction.OUTBOUND)
    forwarded_at = first_event(made.a.store, "hop-acknowledged", Direction.OUTBOUND)
    received_at = first_event(made.c.store, "received", Direction.INBOUND)
    for message_id in ids:
        # Never early: C had stored it when A called it delivered (one machine, one clock).
        assert received_at[message_id] <= delivered_at[message_id], message_id
        if message_id in forwarded_at:
            assert forwarded_at[message_id] <= delivered_at[message_id], message_id
    assert forwarded_at, "no hop acknowledgment was recorded: the intermediary's word was never shown"
    with open_store(str(made.c.store), migrate=False) as store, store.transaction(readonly=True) as tx:
        seen = Counter(e.message_id for e in tx.inbox_list(None, limit=100_000))
    assert {m: seen[m] for m in ids} == dict.fromkeys(ids, 1)


def test_a_message_whose_acknowledgments_are_all_lost_may_have_been_delivered(tmp_path: Path) -> None:
    # ebMS2 §6.5.7: the DeliveryFailure has severity "Warning if the message was transmitted, but an
    # Acknowledgment Message was not received. This means the message probably was not delivered" (and may
    # have been): here B has it.
    pair = make_pair(tmp_path / "pair", retries=2)
    with run_in_thread(("127.0.0.1", pair.b_public_port), ("127.0.0.1", pair.b.port), seed=5) as proxy:
        try:
            pair.b.start()
            pair.a.start()
            done = threading.Event()

            def lose_every_answer() -> None:
                # The answer to each transmission of the message (a request of 20 kB; the TLS handshake's
                # flights are far smaller and pass): B gets every copy, A never hears back.
                while not done.is_set():
                    proxy.drop_next_response_after(10_000)
                    done.wait(0.05)

            losing = threading.Thread(target=lose_every_answer, daemon=True)
            losing.start()
            msh = Msh(load_settings(pair.a.config, env={}))
            try:
                payload = b"<order n='1'>" + b"x" * 20_000 + b"</order>"
                message_id = msh.submit(Submission(PARTY_B, SERVICE, ACTION, (Payload(payload, "application/xml"),)))
                final = wait_final(msh, [message_id], timeout=60)
                stored = msh.status(message_id)
            finally:
                done.set()
                losing.join(10)
                msh.close()
        finally:
            pair.stop()
    assert final == {message_id: OutboundStatus.FAILED}
    assert stored is not None and stored.state.failure is not None
    assert stored.state.failure.severity is Severity.WARNING
    assert "may have been delivered" in stored.state.failure.description
    with open_store(str(pair.b.store), migrate=False) as store, store.transaction(readonly=True) as tx:
        assert [e.message_id for e in tx.inbox_list(None)] == [message_id]  # B has it, once
