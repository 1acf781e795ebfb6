"""The MSH services between two real ``msh serve`` processes on loopback (HTTPS, mutual TLS, signed
signals): ``msh ping`` (ebMS2 §8) and ``msh status --remote`` (ebMS2 §7) run as commands beside A's
server, and the status before resend after the receiver was down (``sending.status_before_resend``).

The sample agreement's MSH channels are asynchronous (syncReplyMode none): every Pong and StatusResponse
comes to A's endpoint, where A's ``msh serve`` receives and journals it, and the command finds it in the
store. Every wait is bounded.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from msh.faults.pair import ACTION, PARTY_B, SERVICE, Pair, make_pair
from msh.faults.proxy import run_in_thread
from msh.runtime.compose import Payload, Submission
from msh.runtime.config import load_settings
from msh.runtime.msh import Msh
from msh.store import open_store


def msh(*args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "msh.cli", *args], capture_output=True, text=True, timeout=timeout, check=False
    )


def events(store: Path) -> list[tuple[str, str | None, dict[str, object]]]:
    with open_store(str(store), migrate=False) as opened, opened.transaction(readonly=True) as tx:
        return [(e.kind, e.message_id, dict(e.detail)) for e in tx.list_events(0, limit=100_000)]


def wait_for(condition: Callable[[], bool], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return
        time.sleep(0.1)
    raise AssertionError(f"{what} within {timeout:g} s")


@pytest.fixture
def pair(tmp_path: Path) -> Iterator[Pair]:
    made = make_pair(tmp_path / "pair", proxy=False, http_timeout="PT2S", first_resend="PT3S", lease="PT10S")
    try:
        yield made
    finally:
        made.stop()


def test_ping_and_remote_status_between_two_running_msh(pair: Pair, tmp_path: Path) -> None:
    pair.b.start()
    pair.a.start()
    config_a, config_b = str(pair.a.config), str(pair.b.config)
    # ebMS2 §8: each Ping answered by a Pong, which came to A's endpoint (msh serve journaled it).
    pinged = msh("ping", "--config", config_a, PARTY_B[0], "--count", "2", "--interval", "0", "--json")
    assert pinged.returncode == 0, pinged.stderr
    results = json.loads(pinged.stdout)
    assert [(r["pong"], r["onConnection"], r["httpStatus"]) for r in results] == [(True, False, 202)] * 2
    assert all(0 < r["roundTripMs"] < 10_000 for r in results)
    text = msh("ping", "--config", config_a, PARTY_B[0])
    assert text.returncode == 0 and "ping 1: Pong after " in text.stdout and "1 Ping(s), 1 Pong(s)" in text.stdout
    # ebMS2 §7: a message B received and holds, then B's application takes it.
    sent = msh(
        "send", "--config", config_a, "--to", PARTY_B[0], "--service", SERVICE, "--action", ACTION, "--wait", "20"
    )
    assert sent.returncode == 0, sent.stdout + sent.stderr
    message_id = sent.stdout.splitlines()[0]
    asked = msh("status", "--config", config_a, "--remote", "--json", message_id)
    assert asked.returncode == 0, asked.stdout + asked.stderr
    [remote] = json.loads(asked.stdout)
    # ebMS2 §7.3.3 Received, with the time B received it (§7.3.2), beside our record: delivered.
    assert (remote["messageStatus"], remote["onConnection"], remote["ours"]["status"]) == (
        "Received",
        False,
        "delivered",
    )
    assert remote["timestamp"] is not None
    assert msh("inbox", "--config", config_b, "--take", str(tmp_path / "taken")).returncode == 0
    processed = msh("status", "--config", config_a, "--remote", message_id)
    assert processed.returncode == 0
    assert processed.stdout.splitlines()[0].startswith(f"{message_id}: the partner says Processed (it received")
    # B down: the Ping says so, and the command's exit status is 1.
    pair.b.stop()
    down = msh("ping", "--config", config_a, PARTY_B[0], "--timeout", "3")
    assert down.returncode == 1
    assert "no Pong (Ping " in down.stdout and f"connection refused by 127.0.0.1:{pair.b.port}" in down.stdout


def test_status_before_resend_after_the_receiver_was_down(tmp_path: Path) -> None:
    pair = make_pair(
        tmp_path / "pair",
        retries=20,
        retry_interval="PT2S",
        first_resend="PT2S",
        http_timeout="PT1.5S",
        lease="PT5S",
    )
    # A asks B for a message's status once B has been unreachable 3 s, before resending it.
    pair.a.env["MSH_SENDING_STATUS_BEFORE_RESEND"] = "PT3S"
    listen, target = ("127.0.0.1", pair.b_public_port), ("127.0.0.1", pair.b.port)
    proxy = run_in_thread(listen, target).start()
    sender = None
    try:
        pair.b.start()
        pair.a.start()
        # B stores the message; its acknowledgment is lost on the way back (the proxy drops the answer to
        # the first large request: the message with its 30 KB payload).
        proxy.drop_next_response_after(20_000)
        sender = Msh(load_settings(pair.a.config, env={}))
        payload = Payload(b"<order>" + b"x" * 30_000 + b"</order>", "application/xml")
        message_id = sender.submit(Submission(PARTY_B, SERVICE, ACTION, (payload,)))

        def b_has_it() -> bool:
            with open_store(str(pair.b.store), migrate=False) as store, store.transaction(readonly=True) as tx:
                return tx.find_inbound(message_id) is not None

        wait_for(b_has_it, 20, "B did not store the message")
        assert proxy.stats().responses_dropped == 1
        # Then B is down: nothing listens where A sends (connection refused), longer than the setting.
        proxy.stop()
        pair.b.stop()

        def asked_while_down() -> bool:
            return any(
                k == "status-answered" and m == message_id and d.get("transmitted") is False
                for k, m, d in events(pair.a.store)
            )

        wait_for(asked_while_down, 30, "A did not ask B for the status while B was down")
        pair.b.start()
        proxy = run_in_thread(listen, target).start()

        def final() -> bool:
            stored = sender.status(message_id) if sender is not None else None
            return stored is not None and stored.state.status.final

        wait_for(final, 30, "the message was not final")
        stored = sender.status(message_id)
        assert stored is not None
        assert (stored.state.status.value, stored.state.evidence and stored.state.evidence.value) == (
            "delivered",
            "status-response",
        )
    finally:
        if sender is not None:
            sender.close()
        proxy.stop()
        pair.stop()
    # B received the message once and saw no duplicate: the body was not sent again after the outage.
    b_kinds = Counter(k for k, m, _ in events(pair.b.store) if m == message_id)
    assert b_kinds["received"] == 1 and b_kinds["duplicate"] == 0
    # A's journal says why: it asked (status-requested), B answered Received, and that delivered it.
    a_events = [(k, d) for k, m, d in events(pair.a.store) if m == message_id]
    kinds = [k for k, _ in a_events]
    assert "status-requested" in kinds
    answered = [d for k, d in a_events if k == "status-answered" and "messageStatus" in d]
    assert [d["messageStatus"] for d in answered] == ["Received"]
    assert ("delivered", {"evidence": "status-response"}) in a_events
    transmissions = [d for k, d in a_events if k == "transmission"]
    assert all(d["httpStatus"] is None for d in transmissions)  # no transmission of the body was answered
