"""``msh cpa validate`` and ``msh cpa show`` on the project's sample agreements and broken copies."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from cpa import load
from msh.cli import main
from msh.cli.agreements import render_agreement
from tests.support.agreement_files import (
    built_agreements,
    demo_bytes,
    replace_once,
    signature_template,
    with_month_durations,
    with_signature,
)

CPAS = Path(__file__).resolve().parents[3] / "samples" / "cpas"
DEMO_A_B = CPAS / "demo-a-b.xml"
DEMO_ROUTED = CPAS / "demo-routed-a-c.xml"


def test_help_texts(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["--help"])
    assert exc.value.code == 0
    assert "cpa" in capsys.readouterr().out
    with pytest.raises(SystemExit):
        main(["cpa", "--help"])
    out = capsys.readouterr().out
    assert "validate" in out and "show" in out
    with pytest.raises(SystemExit):
        main(["cpa", "validate", "--help"])
    out = capsys.readouterr().out
    assert "file:line: path: message" in out and "Exit status 0" in out
    assert "'file:line: path: Warning: message' per warning" in " ".join(out.split())
    with pytest.raises(SystemExit):
        main(["cpa", "show", "--help"])
    assert "validity window" in capsys.readouterr().out


def test_validate_good_files(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["cpa", "validate", str(DEMO_A_B), str(DEMO_ROUTED)]) == 0
    assert capsys.readouterr().out.splitlines() == [
        f"{DEMO_A_B}: ok (cpaid cpa-demo-a-b, status agreed)",
        f"{DEMO_ROUTED}: ok (cpaid cpa-demo-routed-a-c, status agreed)",
    ]


def test_validate_reports_every_problem_one_line_each(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    text = DEMO_A_B.read_text(encoding="utf-8")
    broken = tmp_path / "broken.xml"
    broken.write_text(
        text.replace("<tp:ChannelId>A_Channel<", "<tp:ChannelId>A_Chanel<", 1).replace(
            "<tp:RetryInterval>PT5S<", "<tp:RetryInterval>-PT5S<", 1
        ),
        encoding="utf-8",
    )
    hostile = tmp_path / "hostile.xml"
    hostile.write_text('<?xml version="1.0"?>\n<!DOCTYPE x [<!ENTITY e SYSTEM "file:///etc/passwd">]>\n<x>&e;</x>\n')
    assert main(["cpa", "validate", str(DEMO_A_B), str(broken), str(hostile), str(tmp_path / "missing.xml")]) == 1
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith(f"{DEMO_A_B}: ok")
    channel_line = text.split("<tp:ChannelId>A_Channel<")[0].count("\n") + 1
    assert lines[1] == (
        f"{broken}:{channel_line}: /CollaborationProtocolAgreement/PartyInfo[1]/CollaborationRole/ServiceBinding/"
        "CanSend/ThisPartyActionBinding/ChannelId: ChannelId 'A_Chanel' names no DeliveryChannel; define a "
        'DeliveryChannel with channelId="A_Chanel" or fix the reference'
    )
    assert lines[2].startswith(f"{broken}:") and "RetryInterval '-PT5S' is negative" in lines[2]
    assert lines[3].startswith(f"{hostile}:2: ") and "DTD" in lines[3]
    assert (
        lines[4] == f"{tmp_path / 'missing.xml'}: cannot read the agreement: No such file or directory; check the path"
    )
    assert len(lines) == 5


def test_show_summary(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["cpa", "show", str(DEMO_A_B)]) == 0
    out = capsys.readouterr().out
    for expected in (
        "cpaid: cpa-demo-a-b (version 1.0)",
        "status: agreed",
        "valid: 2026-01-01T00:00:00+00:00 to 2036-01-01T00:00:00+00:00",
        "party Party A: 123456789 (urn:oasis:names:tc:ebcore:partyid-type:iso6523:0088)",
        "party Party B: 987654321 (urn:oasis:names:tc:ebcore:partyid-type:iso6523:0088)",
        "role Buyer in Ordering 1.0, service urn:example:services:ordering",
        "sends NewOrder via A_Channel",
        "receives OrderResponse via A_Channel",
        "role Seller in Ordering 1.0",
        "sends OrderResponse via B_Channel",
        "channel A_Channel (transport A_Transport, doc exchange A_ReliableSigned)",
        "acknowledgments always (toPartyMSH), signed acks never, duplicate elimination always, "
        "sync reply mshSignalsOnly",
        "sending: retries 5, retry interval 5 seconds, order NotGuaranteed, persist duration 1 day",
        "signed rsa-sha256 / sha256 with A_Cert; not encrypted",
        "sends over HTTP 1.1 / TLS 1.2, client certificate A_Cert",
        "receives at https://127.0.0.1:8081/msh (allPurpose) / TLS 1.2, server certificate A_Cert, "
        "client authentication against A_TrustedPeers",
        "receives at https://127.0.0.1:8082/msh (allPurpose)",
        "default MSH channel: A_SignalChannel",
        "acknowledgments never (toPartyMSH)",
    ):
        assert expected in out, expected


def test_show_routed_agreement(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["cpa", "show", str(DEMO_ROUTED)]) == 0
    out = capsys.readouterr().out
    assert "receives NewOrder via C_Channel_ToParty, C_Channel_NextMsh" in out
    assert "acknowledgments always (nextMSH)" in out
    assert "receives at https://127.0.0.1:8090/msh (allPurpose) / TLS 1.2, server certificate C_IntermediaryCert" in out


def test_show_says_whether_the_agreement_is_in_force() -> None:
    cpa = load(DEMO_A_B)
    assert "(in force now)" in render_agreement(cpa, datetime(2030, 1, 1, tzinfo=UTC))
    assert "(not yet in force)" in render_agreement(cpa, datetime(2025, 1, 1, tzinfo=UTC))
    assert "(expired)" in render_agreement(cpa, datetime(2036, 1, 1, tzinfo=UTC))


def test_show_broken_file(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    broken = tmp_path / "broken.xml"
    broken.write_text(DEMO_A_B.read_text(encoding="utf-8").replace('<tp:Status tp:value="agreed"/>', ""))
    assert main(["cpa", "show", str(broken)]) == 1
    out = capsys.readouterr().out
    assert out.startswith(f"{broken}:") and "/CollaborationProtocolAgreement/Start" in out and "tp:Status" in out


def test_validate_prints_warnings_and_still_exits_0(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    template = tmp_path / "template.xml"
    data = with_signature(signature_template(), with_month_durations())
    template.write_bytes(data)
    assert main(["cpa", "validate", str(template), str(DEMO_A_B)]) == 0
    line = data[: data.index(b"<ds:Signature")].count(b"\n") + 1
    assert capsys.readouterr().out.splitlines() == [
        f"{template}:{line}: /CollaborationProtocolAgreement/Signature/Signature: Warning: the agreement's "
        "ds:Signature is an unfilled template (its SignatureValue is empty), so the agreement is loaded as unsigned; "
        "have it signed, or remove the tp:Signature element if it is not meant to be signed",
        f"{template}: ok with 1 warning (cpaid cpa-demo-a-b, status agreed)",
        f"{DEMO_A_B}: ok (cpaid cpa-demo-a-b, status agreed)",
    ]


def test_validate_exits_1_on_an_error_and_lists_the_warnings_with_it(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    broken = tmp_path / "broken.xml"
    broken.write_bytes(
        with_signature(
            signature_template(), replace_once(demo_bytes(), b"<tp:PersistDuration>P1D<", b"<tp:PersistDuration>-P1D<")
        )
    )
    assert main(["cpa", "validate", str(broken)]) == 1
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 2
    assert lines[0].startswith(f"{broken}:") and "PersistDuration '-P1D' is negative" in lines[0]
    assert ": Warning: " not in lines[0]
    assert lines[1].startswith(f"{broken}:") and ": Warning: the agreement's ds:Signature is an unfilled" in lines[1]


@pytest.mark.parametrize("name", sorted(built_agreements()))
def test_show_reads_every_agreement_validate_accepts(
    name: str, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    path = tmp_path / f"{name}.xml"
    path.write_bytes(built_agreements()[name])
    assert main(["cpa", "validate", str(path)]) == 0
    warnings = [line for line in capsys.readouterr().out.splitlines() if ": Warning: " in line]
    assert main(["cpa", "show", str(path)]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"{path}\ncpaid: cpa-demo-")
    assert "signed: no" in out
    assert all(w in out for w in warnings)  # show repeats what validate warns of
    assert "party Party A" in out


def test_show_gives_month_durations_in_words(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    path = tmp_path / "months.xml"
    path.write_bytes(with_month_durations())
    assert main(["cpa", "show", str(path)]) == 0
    out = capsys.readouterr().out
    assert "sending: retries 5, retry interval 1 month, order NotGuaranteed, persist duration 15 years" in out
    assert (
        "receiving: retries 5, retry interval 5 seconds, order NotGuaranteed, persist duration 1 year 2 months" in out
    )
