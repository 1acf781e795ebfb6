"""Reloading the agreements of a running MSH (msh.runtime.reload): a good set replaces the running one in one
step, a set with any problem changes nothing and says why (naming the file), and our messages in flight under
a removed agreement fail with evidence agreement-removed, the application told (ebMS2 §6.5.7)."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import logging
import os
import shutil
import ssl
from collections.abc import Iterator
from pathlib import Path

import pytest

from cpa.resolve import AgreementRefused
from msh.engine import OutboundStatus
from msh.engine.outcomes import Evidence
from msh.errors import ErrorCode, Issue, Severity
from msh.runtime.compose import Payload, Submission
from msh.runtime.config import load_settings
from msh.runtime.msh import Msh
from msh.runtime.pidfile import read_status, status_path
from msh.runtime.reload import AgreementReloader
from msh.runtime.serving import _trust_new_partners
from tests.support.agreement_files import DEMO_A_B, demo_bytes, replace_once
from tests.support.endpoint import party_b_settings, valid_message

CONFIG = Path(__file__).resolve().parents[3] / "samples" / "config" / "party-a.toml"
PARTY_B = ("987654321", "urn:oasis:names:tc:ebcore:partyid-type:iso6523:0088")
SECOND = "cpa-demo-a-b-second"


def second_agreement() -> bytes:
    """The demo agreement under another CPAId (a second agreement with the same partner)."""
    return replace_once(demo_bytes(), b'tp:cpaid="cpa-demo-a-b"', f'tp:cpaid="{SECOND}"'.encode())


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    cpas = tmp_path / "cpas"
    cpas.mkdir()
    shutil.copyfile(DEMO_A_B, cpas / "demo-a-b.xml")
    (cpas / "second.xml").write_bytes(second_agreement())
    return cpas


@pytest.fixture
def msh(tmp_path: Path, folder: Path) -> Iterator[Msh]:
    env = {
        "MSH_STORE_URL": str(tmp_path / "a.sqlite"),
        "MSH_AGREEMENTS_PATHS": str(folder),
        "MSH_SERVER_PID_FILE": str(tmp_path / "msh.pid"),
    }
    running = Msh(load_settings(CONFIG, env=env))
    yield running
    running.close()


def reloader(msh: Msh) -> AgreementReloader:
    return AgreementReloader(msh, pid_file=msh.settings.server.pid_file)


def order(cpa_id: str) -> Submission:
    return Submission(
        PARTY_B, "urn:example:services:ordering", "NewOrder", (Payload(b"<o/>", "application/xml"),), cpa_id=cpa_id
    )


def test_a_good_set_replaces_the_running_one(msh: Msh, folder: Path) -> None:
    (folder / "second.xml").unlink()
    third = replace_once(demo_bytes(), b'tp:cpaid="cpa-demo-a-b"', b'tp:cpaid="cpa-third"')
    (folder / "third.xml").write_bytes(third)
    outcome = asyncio.run(reloader(msh).reload())
    assert outcome.ok and outcome.generation == 1
    assert sorted(c.cpaid for c in msh.registry) == ["cpa-demo-a-b", "cpa-third"]
    assert (outcome.added, outcome.removed, outcome.failed_messages) == (("cpa-third",), (SECOND,), ())
    pid_file = msh.settings.server.pid_file
    assert pid_file is not None
    status = read_status(pid_file)
    assert status is not None
    assert (status["pid"], status["generation"], status["ok"], status["problem"]) == (os.getpid(), 1, True, None)
    assert status["added"] == ["cpa-third"] and status["failedMessages"] == []
    assert set(json.loads(status_path(pid_file).read_text())) >= {"agreements", "removed", "at"}
    # The new agreement is usable at once; the removed one is refused as not registered.
    assert msh.submit(order("cpa-third"))
    with pytest.raises(AgreementRefused):
        msh.submit(order(SECOND))


@pytest.mark.parametrize(
    ("name", "content", "said"),
    [
        ("broken.xml", b"<not-a-cpa/>", "broken.xml cannot be used"),
        (
            "negative.xml",
            replace_once(second_agreement(), b"<tp:RetryInterval>PT5S<", b"<tp:RetryInterval>-PT5S<"),
            "RetryInterval '-PT5S' is negative",
        ),
    ],
)
def test_a_set_with_a_problem_changes_nothing_and_names_the_file(
    msh: Msh, folder: Path, caplog: pytest.LogCaptureFixture, name: str, content: bytes, said: str
) -> None:
    (folder / "second.xml").unlink()  # would be a removal, if the set were good
    (folder / name).write_bytes(content)
    before = list(msh.registry)
    with caplog.at_level(logging.ERROR, logger="msh.runtime"):
        outcome = asyncio.run(reloader(msh).reload())
    assert not outcome.ok and outcome.problem is not None and said in outcome.problem
    assert str(folder / name) in outcome.problem
    assert list(msh.registry) == before and all(a is b for a, b in zip(msh.registry, before, strict=True))
    assert outcome.agreements == ("cpa-demo-a-b", SECOND)
    logged = [r.getMessage() for r in caplog.records]
    assert any("agreements not reloaded, the running set is unchanged" in m and said in m for m in logged)
    pid_file = msh.settings.server.pid_file
    assert pid_file is not None
    status = read_status(pid_file)
    assert status is not None and status["ok"] is False and said in status["problem"]


def test_our_messages_in_flight_under_a_removed_agreement_fail_and_the_application_is_told(
    msh: Msh, folder: Path
) -> None:
    told: list[tuple[str, Issue]] = []
    msh.on_failed = lambda message_id, issue: told.append((message_id, issue))
    gone = [msh.submit(order(SECOND)) for _ in range(3)]
    kept = msh.submit(order("cpa-demo-a-b"))
    (folder / "second.xml").unlink()
    outcome = asyncio.run(reloader(msh).reload())
    assert outcome.ok and outcome.removed == (SECOND,)
    assert sorted(outcome.failed_messages) == sorted(gone)
    for message_id in gone:
        stored = msh.status(message_id)
        assert stored is not None and stored.state.status is OutboundStatus.FAILED
        assert stored.state.evidence is Evidence.AGREEMENT_REMOVED
    # The first transmission counts as issued at the commit and its outcome is unknown: it may have left, so the
    # DeliveryFailure is a Warning (ebMS2 §6.5.7; the engine's test covers the Error of a refused one).
    assert sorted(m for m, _ in told) == sorted(gone)
    assert all(i.error_code is ErrorCode.DELIVERY_FAILURE and i.severity is Severity.WARNING for _, i in told)
    assert all(f"agreement {SECOND} was removed" in i.description for _, i in told)
    other = msh.status(kept)
    assert other is not None and other.state.status is OutboundStatus.PENDING
    # A second reload of the same set has nothing more to fail.
    again = asyncio.run(reloader(msh).reload())
    assert again.ok and again.removed == () and again.failed_messages == ()


def test_a_message_that_arrives_under_a_removed_agreement_is_refused(tmp_path: Path) -> None:
    # ebMS2 §3.1.2: a CPAId that names no agreement known here is reported as ValueNotRecognized, Error.
    cpas = tmp_path / "cpas"
    cpas.mkdir()
    shutil.copyfile(DEMO_A_B, cpas / "demo-a-b.xml")
    (cpas / "second.xml").write_bytes(second_agreement())
    settings = party_b_settings(tmp_path / "store")
    receiver = Msh(dataclasses.replace(settings, agreements=dataclasses.replace(settings.agreements, paths=(cpas,))))
    try:
        content_type, body = valid_message(receiver, "before@a.example", cpa_id=SECOND)
        reply, _after = receiver.receive_http(body, content_type)
        assert reply.status == 200, reply.body
        (cpas / "second.xml").unlink()
        assert asyncio.run(AgreementReloader(receiver).reload()).removed == (SECOND,)
        content_type, body = valid_message(receiver, "after@a.example", cpa_id=SECOND)
        reply, _after = receiver.receive_http(body, content_type)
        assert b"ValueNotRecognized" in reply.body and b"CPAId" in reply.body
        assert [e.message_id for e in receiver.inbox(None)] == ["before@a.example"]  # kept
    finally:
        receiver.close()


def test_the_partners_of_reloaded_agreements_become_tls_trust_anchors(msh: Msh) -> None:
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    assert context.cert_store_stats()["x509"] == 0
    _trust_new_partners(context, msh.registry, msh)
    assert context.cert_store_stats()["x509"] >= 1  # party B's certificate of the demo agreement
