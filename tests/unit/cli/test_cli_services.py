"""``msh ping`` (ebMS2 §8) and ``msh status --remote`` (ebMS2 §7) as commands: what they print and their exit
statuses when the partner cannot be reached, their usage errors, and ``msh status`` telling why a message
was not resent after a StatusRequest. (Between two running ``msh serve`` processes:
tests/integration/test_services.py.)"""

from __future__ import annotations

import asyncio
import tomllib
from datetime import timedelta
from pathlib import Path

import pytest

from msh.cli import main
from msh.faults.pair import Pair, make_pair
from msh.runtime.compose import Payload, Submission
from msh.runtime.config import settings_from_mapping
from msh.store import open_store
from msh.testing.network import TestNetwork

ROOT = Path(__file__).resolve().parents[3]
CONFIG = ROOT / "samples" / "config"
PARTNER = "987654321"


@pytest.fixture
def pair(tmp_path: Path) -> Pair:
    """Settings of A and B under a copy of the demo agreement whose endpoints are free ports: nothing
    listens there (no ``msh serve`` is started)."""
    return make_pair(tmp_path / "pair", proxy=False)


def test_a_ping_nobody_answers_says_why_and_exits_1(pair: Pair, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["ping", "--config", str(pair.a.config), PARTNER, "--count", "2", "--interval", "0"]) == 1
    out = capsys.readouterr().out.splitlines()
    url = f"https://127.0.0.1:{pair.b.port}/msh"
    assert out[0] == f"PING urn:oasis:names:tc:ebcore:partyid-type:iso6523:0088:{PARTNER} under cpa-demo-a-b at {url}"
    for number, line in enumerate(out[1:3], start=1):
        assert line.startswith(f"ping {number}: no Pong (Ping ")
        assert line.endswith(f"): connection refused by 127.0.0.1:{pair.b.port} ({url})")
    assert out[3] == "2 Ping(s), 0 Pong(s)"


def test_ping_usage_errors_are_one_line_with_exit_status_2(pair: Pair, capsys: pytest.CaptureFixture[str]) -> None:
    config = str(pair.a.config)
    assert main(["ping", "--config", config, "444444444"]) == 2
    err = capsys.readouterr().err
    assert err == (
        "msh ping: error: partner 444444444: no agreement in force between us and a party with that PartyId; the "
        "partners are: 987654321 (type urn:oasis:names:tc:ebcore:partyid-type:iso6523:0088) in cpa-demo-a-b "
        "(agreements.paths names the agreements)\n"
    )
    assert main(["ping", "--config", config, PARTNER, "--cpa-id", "other"]) == 2
    assert "agreement other is not one in force between us and that partner" in capsys.readouterr().err
    assert main(["ping", "--config", config, PARTNER, "--timeout", "0"]) == 2
    assert capsys.readouterr().err == "msh ping: error: --timeout 0: give a number of seconds above 0, e.g. 10\n"
    with pytest.raises(SystemExit) as usage:
        main(["ping", "--config", config, PARTNER, "--count", "0"])
    assert usage.value.code == 2
    assert "argument --count: 0 is too small" in capsys.readouterr().err


def test_status_remote_of_a_message_whose_partner_is_down(pair: Pair, capsys: pytest.CaptureFixture[str]) -> None:
    config = str(pair.a.config)
    assert (
        main(
            [
                "send",
                "--config",
                config,
                "--to",
                PARTNER,
                "--service",
                "urn:example:services:ordering",
                "--action",
                "NewOrder",
            ]
        )
        == 0
    )
    message_id = capsys.readouterr().out.strip()
    # ebMS2 §7.1.1: the StatusRequest goes where the message went; nothing listens there.
    assert main(["status", "--config", config, "--remote", message_id, "unknown@nowhere"]) == 1
    out = capsys.readouterr().out.splitlines()
    url = f"https://127.0.0.1:{pair.b.port}/msh"
    assert out[0] == f"{message_id}: no StatusResponse: connection refused by 127.0.0.1:{pair.b.port} ({url})"
    assert out[1].startswith(f"  asked urn:oasis:names:tc:ebcore:partyid-type:iso6523:0088:{PARTNER} at {url}")
    assert out[2].startswith("  our record: pending (")  # no msh serve: the message waits in the store
    assert out[-1] == f"unknown@nowhere: unknown (never submitted to this store, sqlite+pysqlite:///{pair.a.store})"
    assert main(["status", "--config", config, "--remote", "--receipt", "x", message_id]) == 2
    assert "--remote and --receipt FILE do not go together" in capsys.readouterr().err


def test_status_tells_why_a_message_was_not_resent(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The scenario of tests/unit/runtime/test_status_before_resend.py on an SQLite store msh status reads."""
    path = CONFIG / "party-a.toml"
    data = tomllib.loads(path.read_text(encoding="utf-8"))
    data["store"] = {"url": str(tmp_path / "a.sqlite")}
    data["sending"]["status_before_resend"] = "PT8S"
    settings = settings_from_mapping(data, base_dir=CONFIG, source=str(path), env={})
    b_data = tomllib.loads((CONFIG / "party-b.toml").read_text(encoding="utf-8"))
    b_data["store"] = {"url": "memory:"}
    b_settings = settings_from_mapping(b_data, base_dir=CONFIG, source="b", env={})

    async def scenario() -> str:
        net = TestNetwork(seed=1)
        store = open_store(str(tmp_path / "a.sqlite"))
        a = net.add("a", settings, store=store)
        net.add("b", b_settings)
        await net.start()
        try:
            net.faults.lose_next_answers = 1
            message_id = await a.submit_async(
                Submission(
                    (PARTNER, "urn:oasis:names:tc:ebcore:partyid-type:iso6523:0088"),
                    "urn:example:services:ordering",
                    "NewOrder",
                    (Payload(b"<order/>", "application/xml"),),
                )
            )
            await net.settle()
            net.faults.down.add("https://127.0.0.1:8082/msh")
            await net.advance(timedelta(seconds=12))
            net.faults.down.clear()
            await net.run_until(lambda: (s := a.status(message_id)) is not None and s.state.status.final)
            return message_id
        finally:
            await net.close()
            store.close()

    message_id = asyncio.run(scenario())
    monkeypatch.setenv("MSH_STORE_URL", str(tmp_path / "a.sqlite"))
    assert main(["status", "--config", str(CONFIG / "party-a.toml"), message_id]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith(
        f"{message_id}: delivered (the To party's StatusResponse says it has it), 4 transmission(s)"
    )
    assert out[-1] == (
        "  transmission 4 at 2026-12-01T09:00:15Z: asked the partner for its status first (StatusRequest): "
        "StatusResponse Received; not resent: the partner has it (ebMS2 §7.3.3)"
    )
