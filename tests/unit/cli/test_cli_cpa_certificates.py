"""``msh cpa show`` prints each certificate's subject and expiry (and ``--json`` carries them); ``msh cpa
validate`` warns, exit status 0, for an agreement outside its validity window (CPP/A 2.0 §9.4.2 Start,
§9.4.3 End) or a certificate in it that has expired or is not valid yet (RFC 5280 §4.1.2.5). The agreements
are the demo agreement with certificates and windows changed, written in tmp."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from cryptography import x509
from lxml import etree

from msh.cli import main
from msh.security.keys import CPPA, certificate_element
from tests.support.agreement_files import demo_bytes, replace_once
from tests.support.json_keys import count_keys, keys_off_convention
from tests.support.security import NOW, certificate

START, END = b"<tp:Start>2026-01-01T00:00:00Z</tp:Start>", b"<tp:End>2036-01-01T00:00:00Z</tp:End>"


def _stamp(moment: datetime) -> bytes:
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ").encode()


def _agreement(
    tmp_path: Path,
    *,
    a: x509.Certificate | None = None,
    b: x509.Certificate | None = None,
    start: datetime | None = None,
    end: datetime | None = None,
    name: str = "agreement.xml",
) -> Path:
    """The demo agreement with A's and B's certificates and its window replaced as given."""
    tree = etree.fromstring(demo_bytes())
    for cert_id, cert in (("A_Cert", a), ("B_Cert", b)):
        if cert is not None:
            [old] = tree.iterfind(f".//{{{CPPA}}}Certificate[@{{{CPPA}}}certId='{cert_id}']")
            old.getparent().replace(old, etree.fromstring(certificate_element(cert, cert_id)))
    data = etree.tostring(tree)
    if start is not None:
        data = replace_once(data, START, b"<tp:Start>" + _stamp(start) + b"</tp:Start>")
    if end is not None:
        data = replace_once(data, END, b"<tp:End>" + _stamp(end) + b"</tp:End>")
    path = tmp_path / name
    path.write_bytes(data)
    return path


def _valid(name: str, days: int = 30) -> x509.Certificate:
    return certificate(name, not_before=NOW - timedelta(days=1), not_after=NOW + timedelta(days=days))


def test_show_prints_each_certificates_subject_and_expiry(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    a, b = _valid("Party A trial", 30), _valid("Party B trial", 200)
    path = _agreement(tmp_path, a=a, b=b)
    assert main(["cpa", "show", str(path)]) == 0
    out = capsys.readouterr().out
    expected = re.compile(
        r"^  certificate A_Cert: CN=Party A trial, expires \d{4}-\d\d-\d\d \d\d:\d\d UTC \(in 3\d days\)$"
    )
    assert any(expected.match(line) for line in out.splitlines()), out
    assert f"CN=Party B trial, expires {b.not_valid_after_utc:%Y-%m-%d %H:%M} UTC" in out
    assert "Warning" not in out


def test_show_json_carries_the_certificates(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    expired = certificate("Party A old", not_before=NOW - timedelta(days=90), not_after=NOW - timedelta(days=2))
    path = _agreement(tmp_path, a=expired, b=_valid("Party B trial"))
    assert main(["cpa", "show", str(path), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert keys_off_convention(data) == [] and count_keys(data) > 40
    assert data["cpaId"] == "cpa-demo-a-b" and data["window"] == "in force now"
    party_a, party_b = data["parties"]
    assert party_a["partyIds"] == [
        {"value": "123456789", "type": "urn:oasis:names:tc:ebcore:partyid-type:iso6523:0088"}
    ]
    [cert_a] = party_a["certificates"]
    assert cert_a["certId"] == "A_Cert" and cert_a["subject"] == "CN=Party A old"
    assert cert_a["notAfter"] == expired.not_valid_after_utc.isoformat()
    assert cert_a["expired"] is True and cert_a["daysLeft"] < 0 and cert_a["chain"] == []
    assert party_b["certificates"][0]["expired"] is False
    assert any("A_Cert of Party A" in w and "expired" in w for w in data["warnings"])
    assert party_a["roles"][0]["sends"] == ["NewOrder"]


def test_validate_warns_for_an_expired_agreement_and_exits_0(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = _agreement(tmp_path, start=NOW - timedelta(days=400), end=NOW - timedelta(days=35))
    assert main(["cpa", "validate", str(path)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith(f"{path}: Warning: agreement cpa-demo-a-b is no longer in force: it ended ")
    assert "(tp:End)" in lines[0]
    assert lines[-1] == f"{path}: ok with 1 warning (cpaid cpa-demo-a-b, status agreed)"
    later = _agreement(tmp_path, start=NOW + timedelta(days=3), name="later.xml")
    assert main(["cpa", "validate", str(later)]) == 0
    out = capsys.readouterr().out
    assert "is not in force yet: it starts" in out and "ok with 1 warning" in out


def test_validate_warns_for_expired_and_not_yet_valid_certificates(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    expired = certificate("Party A old", not_before=NOW - timedelta(days=90), not_after=NOW - timedelta(days=2))
    future = certificate("Party B next", not_before=NOW + timedelta(days=5), not_after=NOW + timedelta(days=400))
    path = _agreement(tmp_path, a=expired, b=future)
    assert main(["cpa", "validate", str(path)]) == 0
    out = capsys.readouterr().out
    [a_line] = [line for line in out.splitlines() if "A_Cert" in line]
    assert a_line.startswith(
        f"{path}: Warning: certificate A_Cert of Party A (agreement cpa-demo-a-b; subject CN=Party A old) expired "
    )
    assert a_line.endswith("replace it in the agreement")
    [b_line] = [line for line in out.splitlines() if "B_Cert" in line]
    assert f"subject CN=Party B next) is not valid before {future.not_valid_before_utc:%Y-%m-%d %H:%M} UTC" in b_line
    assert out.splitlines()[-1].startswith(f"{path}: ok with 2 warnings")
    # cpa show gives the same warnings, and says EXPIRED / NOT YET VALID beside the certificates.
    assert main(["cpa", "show", str(path)]) == 0
    shown = capsys.readouterr().out
    assert "certificate A_Cert: CN=Party A old, EXPIRED on" in shown
    assert "certificate B_Cert: CN=Party B next, NOT YET VALID (from" in shown
    assert shown.count("Warning: certificate") == 2


def test_a_valid_agreement_validates_without_warnings(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = _agreement(tmp_path, a=_valid("A"), b=_valid("B"))
    assert main(["cpa", "validate", str(path)]) == 0
    assert capsys.readouterr().out == f"{path}: ok (cpaid cpa-demo-a-b, status agreed)\n"
