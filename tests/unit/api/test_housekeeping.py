"""The TTL report (logged once, journaled) and forgetting exactly-once records past the window."""

from __future__ import annotations

import logging

import pytest

from msh.api.overdue import forget_old_requests, overdue_now
from tests.unit.api.conftest import AUTH, Apis, on_apis, order, pair


def test_overdue_messages_are_logged_and_journaled_once(caplog: pytest.LogCaptureFixture) -> None:
    async def scenario(t: Apis) -> None:
        (entry,) = await t.deliver(1)
        reported: set[int] = set()
        assert await overdue_now(t.ctx_b, reported) == []
        await t.advance(3601)
        with caplog.at_level(logging.WARNING, logger="msh.api"):
            assert [i.entry.id for i in await overdue_now(t.ctx_b, reported)] == [entry]
            assert await overdue_now(t.ctx_b, reported) == []  # once
        assert "has not been taken within api.inbox_ttl" in caplog.text
        with t.b.store.transaction(readonly=True) as tx:
            assert [e.kind for e in tx.list_events(limit=1000)].count("inbox-overdue") == 1

    on_apis(scenario, inbox_ttl="PT1H")


def test_records_past_the_window_are_forgotten_and_their_pair_stays_refused() -> None:
    async def scenario(t: Apis) -> None:
        headers = {**AUTH, **pair("urn:uuid:old", t.now)}
        assert (await t.api_a.post("/api/messages", json=order(), headers=headers)).status_code == 201
        await t.advance(3600)
        assert await forget_old_requests(t.ctx_a) == 0  # still inside the window
        await t.advance(3600 + 301)
        assert await forget_old_requests(t.ctx_a) == 1
        again = await t.api_a.post("/api/messages", json=order(), headers=headers)
        assert again.status_code == 403  # outside the window: refused, never submitted again

    on_apis(scenario, window="PT2H", clock_skew="PT5M")
