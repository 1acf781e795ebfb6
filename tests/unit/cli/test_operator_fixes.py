"""What operators hit (issue "Operating the MSH"), each fixed: the busy port named by its own setting, exit
status 1 for a failed message, no "stopped" line before a start-up error, the migration tool quiet at the
default log level, one log line per refusal, and durations in API errors as ISO 8601."""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest

from msh.cli import main
from msh.errors import ErrorCode, Issue, Severity
from tests.unit.cli.test_cli import PARTY_A_CONFIG, one_line


@pytest.fixture
def busy_port() -> Iterator[int]:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        yield int(busy.getsockname()[1])


def test_a_busy_api_port_is_named_as_api_port(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], busy_port: int
) -> None:
    for name, value in {
        "MSH_STORE_URL": str(tmp_path / "a.sqlite"),
        "MSH_SERVER_PORT": "0",
        "MSH_API_ENABLED": "true",
        "MSH_API_PORT": str(busy_port),
        "MSH_API_APPLICATIONS": "erp=env:ERP_TOKEN",
        "ERP_TOKEN": "a-long-enough-secret-token-for-the-erp-0123456789",
    }.items():
        monkeypatch.setenv(name, value)
    assert main(["serve", "--config", PARTY_A_CONFIG, "--log-level", "error"]) == 2
    captured = capsys.readouterr()
    line = one_line(captured.err)
    assert f"api.host/api.port: cannot listen on 127.0.0.1:{busy_port}" in line
    assert "(api.port, or MSH_API_PORT)" in line and "server.port" not in line and "MSH_SERVER_PORT" not in line
    assert "msh: stopped" not in captured.out


def test_no_stopped_line_before_a_start_up_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from msh.errors import ConfigurationError
    from msh.runtime.msh import Msh

    async def fails(self: Msh, *, timers: bool = True) -> None:
        raise ConfigurationError("the runtime cannot start: (a start-up failure)")

    monkeypatch.setattr(Msh, "start", fails)
    monkeypatch.setenv("MSH_STORE_URL", str(tmp_path / "a.sqlite"))
    monkeypatch.setenv("MSH_SERVER_PORT", "0")
    monkeypatch.setenv("MSH_SERVER_TLS", "false")
    assert main(["serve", "--config", PARTY_A_CONFIG, "--log-level", "error"]) == 2
    captured = capsys.readouterr()
    assert "msh: stopped" not in captured.out
    assert one_line(captured.err) == "msh serve: error: the runtime cannot start: (a start-up failure)"


def test_status_exits_1_for_a_failed_message(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from msh.engine import OutboundStatus
    from msh.store import open_store
    from tests.support.store import add_outbound, outbound_state

    store = tmp_path / "a.sqlite"
    failure = Issue(ErrorCode.DELIVERY_FAILURE, Severity.ERROR, "no acknowledgment after 3 retries")
    with open_store(str(store)) as opened, opened.transaction() as tx:
        add_outbound(tx, "ok@x")
        failed = replace(outbound_state("bad@x"), status=OutboundStatus.FAILED, attempts=4, failure=failure)
        add_outbound(tx, "bad@x", state=failed)
    monkeypatch.setenv("MSH_STORE_URL", str(store))
    assert main(["status", "--config", PARTY_A_CONFIG, "ok@x"]) == 0
    assert main(["status", "--config", PARTY_A_CONFIG, "bad@x"]) == 1  # as the README says
    assert "failed" in capsys.readouterr().out
    assert main(["status", "--config", PARTY_A_CONFIG, "ok@x", "bad@x", "--json"]) == 1
    assert [s["status"] for s in json.loads(capsys.readouterr().out)] == ["pending", "failed"]


def test_the_migration_tool_is_quiet_at_the_default_log_level(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    import logging

    from msh.store import open_store

    caplog.set_level(logging.INFO)
    open_store(str(tmp_path / "a.sqlite")).close()  # a new store: every revision runs
    assert [r for r in caplog.records if r.name.startswith("alembic")] == []
    (line,) = [r.getMessage() for r in caplog.records if r.name == "msh.store.migrations"]
    assert line.startswith("store schema upgraded from revision (empty) to ")
    caplog.clear()
    open_store(str(tmp_path / "a.sqlite")).close()  # at head already: nothing to say
    assert [r for r in caplog.records if r.levelno >= logging.INFO] == []
    caplog.set_level(logging.DEBUG)
    open_store(str(tmp_path / "b.sqlite")).close()  # debugging: Alembic's own lines are wanted
    assert any(r.name.startswith("alembic") for r in caplog.records)


def test_the_receiver_logs_each_refusal_once(caplog: pytest.LogCaptureFixture) -> None:
    import logging

    from msh.ebms.message import build_message
    from msh.runtime.msh import Msh
    from msh.testing.network import TestNetwork
    from tests.support.secure_network import run_pair
    from tests.unit.runtime.test_security import _unsigned_message

    caplog.set_level(logging.INFO)

    async def scenario(net: TestNetwork, a: Msh, b: Msh) -> None:
        envelope, attachments = _unsigned_message(b, "unsigned-1@a.example")
        content_type, body = build_message(envelope, attachments)
        reply = await b.handle_http(body, content_type)
        assert b"SecurityFailure" in reply.body  # ebMS2 §4.1.5: refused, the agreement signs

    run_pair(scenario)
    lines = [r for r in caplog.records if "unsigned-1@a.example" in r.getMessage() and "refused" in r.getMessage()]
    assert len(lines) == 1, [r.getMessage() for r in lines]
    assert lines[0].levelno == logging.WARNING and "SecurityFailure" in lines[0].getMessage()


def test_an_api_error_says_a_duration_in_iso_8601() -> None:
    from datetime import UTC, datetime, timedelta

    from msh.api.soarity import Outcome, Pair, decide

    now = datetime(2026, 11, 28, 12, 0, tzinfo=UTC)
    old = Pair("urn:uuid:1", now - timedelta(days=31))
    decision = decide(old, "erp", "f", None, now=now, window=timedelta(days=30), clock_skew=timedelta(minutes=5))
    assert decision.outcome is Outcome.REJECTED
    assert "older than the time window (P30D, api.window)" in decision.why
    assert "days," not in decision.why and "0:00:00" not in decision.why
