"""``msh cpa new``: flags and --interactive answers become an agreement ``msh cpa validate`` accepts; bad
answers get one clear line each; an existing file is never overwritten."""

from __future__ import annotations

import io
from pathlib import Path

import pytest

from cpa import load
from msh.cli import main

KEYS = Path(__file__).resolve().parents[3] / "samples" / "keys"
TYPE = "urn:oasis:names:tc:ebcore:partyid-type:iso6523:0088"
BASE = [
    "cpa", "new", "--ours", f"111:{TYPE}", "--theirs", "urn:example:partner",
    "--our-url", "https://127.0.0.1:9001/msh", "--their-url", "https://partner.example/msh",
    "--service", "urn:example:orders", "--action", "NewOrder", "--action", "Confirm:receive",
    "--cert", str(KEYS / "party-a.cert.pem"), "--partner-cert", str(KEYS / "party-b.cert.pem"),
]  # fmt: skip


def error_line(capsys: pytest.CaptureFixture[str]) -> str:
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1, err  # one clear line, never a traceback
    return err[0]


@pytest.mark.parametrize("flags", [[], ["--reliable"], ["--reliable", "--sign", "--encrypt", "--sync-acks"]])
def test_flags_write_an_agreement_validate_accepts(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], flags: list[str]
) -> None:
    out = tmp_path / "new.xml"
    assert main([*BASE, *flags, "--out", str(out), "--cpa-id", "cpa-x", "--days", "30"]) == 0
    assert f"wrote {out} (cpaid cpa-x" in capsys.readouterr().out
    assert main(["cpa", "validate", str(out)]) == 0
    assert f"{out}: ok (cpaid cpa-x, status agreed)" in capsys.readouterr().out
    cpa = load(out)
    assert (cpa.end - cpa.start).days == 30
    assert [p.party_ids[0].value for p in cpa.party_infos] == ["111", "urn:example:partner"]
    channel = cpa.party_infos[0].delivery_channels[0].messaging_characteristics
    assert (channel.ack_requested.value == "always") == ("--reliable" in flags)
    assert main(["cpa", "show", str(out)]) == 0


def test_an_existing_file_is_never_overwritten(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "new.xml"
    out.write_text("mine")
    assert main([*BASE, "--out", str(out)]) == 2
    assert "exists; choose another --out" in error_line(capsys)
    assert out.read_text() == "mine"


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        (["--ours", "111"], "--ours '111' is not a URI, so it needs its type: give PARTYID:TYPE"),
        (["--ours", ":x"], "--ours ':x' has an empty PartyId or type"),
        (["--their-url", "partner.example"], "their URL 'partner.example' is not an http:// or https:// URL"),
        (["--service", "Orders"], "service 'Orders' is not a URI (e.g. urn:example:orders): give its type too"),
        (["--action", "NewOrder"], "an action is given twice in the same direction"),
        (["--cert", "/nonexistent.pem"], "--cert: certificate file /nonexistent.pem: No such file"),
        (["--partner-cert", __file__], "--partner-cert: certificate file"),
        (["--action", ":send"], "--action ':send' names no action"),
    ],
)
def test_bad_answers_get_one_clear_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], change: list[str], expected: str
) -> None:
    out = tmp_path / "new.xml"
    assert main([*BASE, *change, "--out", str(out)]) == 2
    assert expected in error_line(capsys)
    assert not out.exists()


def test_missing_answers_and_certificates_are_named(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["cpa", "new", "--ours", f"1:{TYPE}", "--out", str(tmp_path / "x.xml")]) == 2
    line = error_line(capsys)
    assert "missing --theirs, --our-url, --their-url, --service, --action" in line and "--interactive" in line
    no_certs = [a for a in BASE if not a.endswith(".pem") and a not in ("--cert", "--partner-cert")]
    assert main([*no_certs, "--sign", "--out", str(tmp_path / "x.xml")]) == 2
    line = error_line(capsys)
    assert "https and signing need both parties' certificates, and ours and the partner's are missing" in line
    assert "(--cert and --partner-cert)" in line
    assert main([*BASE]) == 2
    assert "missing --out" in error_line(capsys)


def test_interactive_asks_every_question_with_defaults(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    out = tmp_path / "asked.xml"
    answers = [
        f"111:{TYPE}",
        "",  # our URL: the --our-url default
        "222",  # not a URI and no type: asked again
        f"222:{TYPE}",
        "https://partner.example/msh",
        "urn:example:orders",
        "NewOrder, Confirm:receive",
        "maybe",  # not y/n: asked again
        "y",  # reliable
        "y",  # signed
        "",  # encrypted: default n
        "",  # sync: default n
        "/nonexistent.pem",  # not a certificate: asked again
        str(KEYS / "party-a.cert.pem"),
        str(KEYS / "party-b.cert.pem"),
        "",  # cpaid: default
        "0",  # days: asked again
        "10",
        str(out),
    ]
    monkeypatch.setattr("sys.stdin", io.StringIO("\n".join(answers) + "\n"))
    assert main(["cpa", "new", "--interactive", "--our-url", "https://127.0.0.1:9001/msh"]) == 0
    captured = capsys.readouterr()
    assert "'222' is not a URI, so it needs its type" in captured.err
    assert "'maybe' is not y or n" in captured.err
    assert "certificate file /nonexistent.pem" in captured.err
    assert "'0' is not a whole number of at least 1" in captured.err
    cpa = load(out)
    assert cpa.cpaid == "cpa-111-222" and (cpa.end - cpa.start).days == 10
    assert cpa.party_infos[0].delivery_channels[0].doc_exchange.sender_binding.non_repudiation is not None  # type: ignore[union-attr]


def test_interactive_input_that_ends_early_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("sys.stdin", io.StringIO(f"111:{TYPE}\n"))
    assert main(["cpa", "new", "--interactive"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].startswith("msh cpa new: error: the input ended before the question 'our endpoint URL'")


def test_help_names_every_answer(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["cpa", "new", "--help"])
    out = capsys.readouterr().out
    for flag in ("--ours", "--theirs", "--our-url", "--their-url", "--service", "--action", "--reliable", "--sign"):
        assert flag in out
    for flag in ("--encrypt", "--sync-acks", "--cert", "--partner-cert", "--cpa-id", "--days", "--interactive"):
        assert flag in out
