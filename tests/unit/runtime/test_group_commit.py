"""Group commit in the runtime: steps of many messages share one store transaction, and nothing is acted on
before its commit. No network: the MSH is not serving, so submitted messages wait for a transmit timer."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path

import pytest

from cpa.resolve import AgreementRefused
from msh.engine import OutboundStatus
from msh.runtime.compose import Payload, Submission
from msh.runtime.config import load_settings
from msh.runtime.msh import Msh
from msh.store import TimerKind, Transaction

CONFIG = Path(__file__).resolve().parents[3] / "samples" / "config" / "party-a.toml"
PARTY_B = ("987654321", "urn:oasis:names:tc:ebcore:partyid-type:iso6523:0088")
WAIT = 10.0


def _msh(tmp_path: Path, url: str | None = None) -> Msh:
    return Msh(load_settings(CONFIG, env={"MSH_STORE_URL": url or str(tmp_path / "a.sqlite")}))


def _submission(n: int) -> Submission:
    return Submission(
        PARTY_B, "urn:example:services:ordering", "NewOrder", (Payload(f"<o n='{n}'/>".encode(), "application/xml"),)
    )


def _hold(msh: Msh) -> threading.Event:
    """Keep the MSH's store writer busy until the returned event is set."""
    started, release = threading.Event(), threading.Event()

    def blocker(tx: Transaction) -> None:
        started.set()
        assert release.wait(WAIT)

    msh.writer.submit(blocker)
    assert started.wait(WAIT)
    return release


@pytest.mark.parametrize("store", ["sqlite", "memory"])
def test_submissions_queued_during_a_commit_share_the_next_transaction(tmp_path: Path, store: str) -> None:
    msh = _msh(tmp_path, "memory:" if store == "memory" else None)
    try:
        release = _hold(msh)

        async def main() -> list[str]:
            tasks = [asyncio.ensure_future(msh.submit_async(_submission(i))) for i in range(30)]
            # Every task composes (and signs, on the work pool: the agreement signs) and queues its unit.
            deadline = asyncio.get_running_loop().time() + WAIT
            while msh.writer.queued < 30 and asyncio.get_running_loop().time() < deadline:  # type: ignore[attr-defined]
                await asyncio.sleep(0.005)
            assert not any(t.done() for t in tasks)  # none returns before its commit
            release.set()
            return list(await asyncio.wait_for(asyncio.gather(*tasks), WAIT))

        ids = asyncio.run(main())
        assert len(set(ids)) == 30
        assert msh.writer.stats.largest_batch == 30  # one transaction for the thirty submissions
        for message_id in ids:
            status = msh.status(message_id)
            assert status is not None and status.state.status is OutboundStatus.PENDING
        with msh.store.transaction() as tx:
            due = tx.claim_due_timers(msh.clock(), "test", lease=msh.settings.timers.lease, limit=100)
        # Not serving here: each message waits for the serving process's transmit timer (docs/design.md §5.1).
        assert sorted(t.message_id for t in due if t.kind is TimerKind.TRANSMIT) == sorted(ids)
    finally:
        msh.close()


def test_a_refused_submission_fails_alone(tmp_path: Path) -> None:
    msh = _msh(tmp_path)
    try:
        bad = Submission(("nobody", None), "urn:example:services:ordering", "NewOrder")

        async def main() -> tuple[list[str], BaseException | None]:
            good = [asyncio.ensure_future(msh.submit_async(_submission(i))) for i in range(3)]
            try:
                await msh.submit_async(bad)
            except AgreementRefused as exc:
                refused: BaseException | None = exc
            except Exception as exc:  # any other error is a failure of the test
                refused = exc
            else:
                refused = None
            return list(await asyncio.gather(*good)), refused

        ids, refused = asyncio.run(main())
        assert isinstance(refused, Exception) and "nobody" in str(refused)
        assert all(msh.status(m) is not None for m in ids)
    finally:
        msh.close()


def test_submit_blocks_until_its_commit_and_works_after_close_of_nothing(tmp_path: Path) -> None:
    msh = _msh(tmp_path)
    message_id = msh.submit(_submission(1))
    assert msh.status(message_id) is not None
    msh.close()
    with pytest.raises(Exception, match="closed"):
        msh.submit(_submission(2))
