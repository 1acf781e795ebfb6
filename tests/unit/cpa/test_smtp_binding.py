"""An agreement that sends by e-mail (ebMS2 Appendix B.3): what it cannot ask for is refused when it is loaded."""

from __future__ import annotations

from pathlib import Path

import pytest

from cpa import load
from cpa.interactions import interaction_problems
from cpa.smtp_binding import smtp_binding_problems
from msh.cli import main
from msh.errors import ConfigurationError
from msh.runtime.agreements import agreements_in_use
from tests.support.agreement_files import demo_bytes
from tests.support.mail_agreements import sync_none, with_b_receiving
from tests.support.secure_network import settings as party_settings


def test_an_agreement_sending_by_mail_without_replies_on_the_connection_is_fine() -> None:
    cpa = load(sync_none(with_b_receiving("SMTP", "mailto:msh-b@b.example")))
    assert smtp_binding_problems(cpa) == [] and interaction_problems(cpa) == []
    assert smtp_binding_problems(load(demo_bytes())) == []  # HTTP with synchronous signals: not this rule's


def test_replies_on_the_connection_to_a_mailto_endpoint_are_refused() -> None:
    # ebMS2 B.3.3: "All ebXML response messages, including errors and acknowledgments, are delivered
    # asynchronously between ebXML Message Service Handlers."
    cpa = load(with_b_receiving("SMTP", "mailto:msh-b@b.example"))  # A_Channel asks for mshSignalsOnly
    [problem] = smtp_binding_problems(cpa)
    assert "(channel A_Channel) asks for replies on the connection (syncReplyMode mshSignalsOnly)" in problem
    assert "by mail to mailto:msh-b@b.example" in problem
    assert "ebMS2 B.3.3" in problem and 'set tp:syncReplyMode="none"' in problem
    assert problem in interaction_problems(cpa)


@pytest.mark.parametrize(
    ("protocol", "uri", "expected"),
    [
        ("HTTP", "mailto:msh-b@b.example", "has the Endpoint mailto:msh-b@b.example under the TransportProtocol HTTP"),
        ("SMTP", "https://b.example/msh", "is SMTP but its Endpoint https://b.example/msh is not a mailto: address"),
    ],
)
def test_a_mailto_endpoint_goes_with_the_transport_protocol_smtp(protocol: str, uri: str, expected: str) -> None:
    # ebMS2 B.3 (CPP/A 2.0 §8.4.28-§8.4.29): a mailto: Endpoint is reached by SMTP, and SMTP reaches a mailbox.
    problems = smtp_binding_problems(load(sync_none(with_b_receiving(protocol, uri))))
    assert any(expected in p and "transport B_Transport" in p for p in problems), problems


def test_the_msh_refuses_to_work_under_it() -> None:
    cpa = load(with_b_receiving("SMTP", "mailto:msh-b@b.example"))
    settings = party_settings("a")
    with pytest.raises(ConfigurationError, match=r"ebMS2 B\.3\.3"):
        agreements_in_use(settings, [cpa], (settings.identity.party_id, settings.identity.party_id_type))


def test_msh_cpa_validate_refuses_it_naming_the_rule(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "by-mail.xml"
    path.write_bytes(with_b_receiving("SMTP", "mailto:msh-b@b.example"))
    assert main(["cpa", "validate", str(path)]) == 1
    out = capsys.readouterr().out
    assert "ebMS2 B.3.3" in out and ": ok" not in out
