"""``msh init``: a party's folder that ``msh cpa validate`` and ``msh serve --print-settings`` accept; the
next three commands; a non-empty folder refused, ``--force`` adding only what is missing; a busy port
refused; and ``msh serve`` without a settings file saying how to give one."""

from __future__ import annotations

import os
import socket
import stat
from pathlib import Path

import pytest

from msh.cli import main
from msh.faults.pair import free_port
from msh.runtime.config import load_settings

KEYS = Path(__file__).resolve().parents[3] / "samples" / "keys"
TYPE = "urn:oasis:names:tc:ebcore:partyid-type:iso6523:0088"
PARTNER = [
    "--partner", f"222:{TYPE}", "--their-url", "http://127.0.0.1:9/msh", "--service", "urn:example:orders",
    "--action", "NewOrder", "--action", "Confirm:receive", "--reliable",
]  # fmt: skip


def init(folder: Path, *extra: str) -> int:
    return main(["init", str(folder), "--party", f"111:{TYPE}", *extra])


def test_init_sets_up_a_party_that_validates_and_serves(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    folder = tmp_path / "a"
    assert init(folder, *PARTNER) == 0
    out = capsys.readouterr().out.splitlines()
    agreement = folder / "agreements" / "cpa-111-222.xml"
    commands = [line.strip() for line in out if line.startswith("  msh ")]
    assert commands[0] == f"msh cpa validate {agreement}"
    assert commands[1] == f"msh serve --config {folder / 'msh.toml'}"
    assert commands[2].startswith(f"msh send --config {folder / 'msh.toml'} --to 222 --service urn:example:orders")
    assert len(commands) == 3
    assert stat.S_IMODE((folder / "keys" / "party.key.pem").stat().st_mode) == 0o600
    assert main(["cpa", "validate", str(agreement)]) == 0
    assert "ok (cpaid cpa-111-222" in capsys.readouterr().out
    assert main(["serve", "--config", str(folder / "msh.toml"), "--print-settings"]) == 0
    printed = capsys.readouterr().out
    settings = load_settings(folder / "msh.toml", env={})
    assert f"server.port = {settings.server.port}" in printed and settings.server.tls is False
    assert settings.identity.party_id == "111" and settings.identity.party_id_type == TYPE
    assert (folder / "msh.toml").read_text().count("#") > 20  # a commented file


def test_the_partner_sets_up_from_the_same_agreement_over_https(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    partner_https = [a.replace("http://", "https://") for a in PARTNER] + [
        "--partner-cert",
        str(KEYS / "party-b.cert.pem"),
        "--sign",
    ]
    assert init(tmp_path / "a", *partner_https) == 0
    capsys.readouterr()
    agreement = tmp_path / "a" / "agreements" / "cpa-111-222.xml"
    # B's endpoint in the agreement is port 9 (privileged): it listens on a port of its own behind it.
    port = str(free_port())
    assert main(["init", str(tmp_path / "b"), "--party", f"222:{TYPE}", "--cpa", str(agreement), "--port", port]) == 0
    captured = capsys.readouterr()
    assert f"endpoint https://127.0.0.1:9/msh (listening on port {port})" in captured.out
    # The next send is one the agreement lets B make (CPA §8.4.9 CanSend): Confirm, to A.
    send = [line.strip() for line in captured.out.splitlines() if line.strip().startswith("msh send")]
    assert send == [
        f"msh send --config {tmp_path / 'b' / 'msh.toml'} --to 111 --service urn:example:orders --action Confirm "
        "--payload FILE"
    ]
    # The agreement names B's sample certificate, not the one init made for B: said, not hidden.
    assert "names other certificates for 222" in captured.err
    settings = load_settings(tmp_path / "b" / "msh.toml", env={})
    assert settings.server.tls is True and settings.tls.certificate is not None
    a = load_settings(tmp_path / "a" / "msh.toml", env={})
    assert a.server.tls is True
    assert main(["cpa", "validate", str(tmp_path / "b" / "agreements" / "cpa-111-222.xml")]) == 0


def test_a_non_empty_folder_is_refused_and_force_only_adds(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    folder = tmp_path / "a"
    folder.mkdir()
    (folder / "notes.txt").write_text("mine")
    assert init(folder) == 2
    assert "is not empty; give a new or empty folder, or --force" in capsys.readouterr().err
    assert init(folder, "--force") == 0
    settings_text = (folder / "msh.toml").read_text()
    key = (folder / "keys" / "party.key.pem").read_bytes()
    assert "next: write the agreement" in capsys.readouterr().out
    assert init(folder, "--force", *PARTNER) == 0
    out = capsys.readouterr().out
    assert "(kept)" in out and "cpa-111-222.xml (new)" in out
    assert (folder / "msh.toml").read_text() == settings_text
    assert (folder / "keys" / "party.key.pem").read_bytes() == key
    assert (folder / "notes.txt").read_text() == "mine"
    assert main(["cpa", "validate", str(folder / "agreements" / "cpa-111-222.xml")]) == 0


def test_a_busy_port_and_conflicting_answers_are_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        assert init(tmp_path / "a", "--port", str(port)) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and f"port {port} on 127.0.0.1 is taken" in err[0]
    assert not (tmp_path / "a").exists()
    assert init(tmp_path / "b", "--cpa", "x.xml", *PARTNER) == 2
    assert "--cpa and the partner's answers are two ways" in capsys.readouterr().err
    assert init(tmp_path / "c", "--partner", f"222:{TYPE}") == 2
    assert "missing --their-url, --service, --action" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        init(tmp_path / "d", "--port", "70000")
    assert "argument --port: '70000' is not a port number from 1 to 65535" in capsys.readouterr().err


def test_serve_without_settings_says_how_to_give_them(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    for name in [n for n in os.environ if n.startswith("MSH_")]:
        monkeypatch.delenv(name)
    assert main(["serve"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [
        "msh serve: error: no settings file: give one with --config FILE or the environment variable "
        "MSH_CONFIG=FILE (msh init DIR writes one)"
    ]
