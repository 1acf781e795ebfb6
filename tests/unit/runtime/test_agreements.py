"""The agreements an MSH starts with (msh.runtime.agreements.load_agreements): warnings logged, errors refused."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from cpa import XsDuration
from msh.errors import ConfigurationError
from msh.runtime.agreements import load_agreements
from tests.support.agreement_files import (
    demo_bytes,
    replace_once,
    signature_template,
    with_month_durations,
    with_signature,
)


def test_a_signature_template_is_logged_as_a_warning_at_start_up(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "template.xml"
    path.write_bytes(with_signature(signature_template(), with_month_durations()))
    with caplog.at_level(logging.WARNING, logger="msh.runtime"):
        (agreement,) = load_agreements([path])
    assert agreement.signed is False
    assert [r.getMessage() for r in caplog.records] == [f"agreements.paths: {agreement.warnings[0]}"]
    assert f"{path}:" in caplog.records[0].getMessage() and ": Warning: " in caplog.records[0].getMessage()
    binding = agreement.party_infos[0].delivery_channels[0].doc_exchange.sender_binding
    assert binding is not None and binding.reliable_messaging is not None
    assert binding.reliable_messaging.retry_interval == XsDuration(months=1)


def test_an_agreement_with_an_error_stops_the_start(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    path = tmp_path / "broken.xml"
    path.write_bytes(replace_once(demo_bytes(), b"<tp:RetryInterval>PT5S<", b"<tp:RetryInterval>-PT5S<"))
    with pytest.raises(ConfigurationError) as caught:
        load_agreements([path])
    assert str(caught.value).startswith(f"agreements.paths: {path} cannot be used:\n{path}:")
    assert "RetryInterval '-PT5S' is negative; give a positive duration" in str(caught.value)
