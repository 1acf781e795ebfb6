"""The agreements an MSH starts with (msh.runtime.agreements): warnings logged, errors refused, none for a pure
intermediary."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from cpa import XsDuration
from msh.engine.routing import Route
from msh.errors import ConfigurationError
from msh.runtime.agreements import agreement_registry, load_agreements
from msh.runtime.config import (
    AgreementSettings,
    IdentitySettings,
    RoutingSettings,
    ServerSettings,
    Settings,
    StoreSettings,
)
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


def test_a_pure_intermediary_loads_no_agreement_into_an_empty_registry() -> None:
    route = Route(name="to-C", to_party_id="555555555", next_hop="https://127.0.0.1:8092/msh")
    settings = Settings(
        IdentitySettings("urn:x:999999999"),
        AgreementSettings(),
        StoreSettings("memory:"),
        ServerSettings(tls=False),
        routing=RoutingSettings((route,)),
    )
    loaded = load_agreements(settings.agreements.files())
    assert loaded == []
    registry = agreement_registry(settings, loaded, ("urn:x:999999999", None))
    assert len(registry) == 0 and list(registry) == []


def test_agreements_none_of_which_names_our_party_are_still_refused() -> None:
    cpa = Path(__file__).resolve().parents[3] / "samples" / "cpas" / "demo-a-b.xml"
    settings = Settings(
        IdentitySettings("urn:x:999999999"),
        AgreementSettings((cpa,)),
        StoreSettings("memory:"),
        ServerSettings(tls=False),
    )
    with pytest.raises(ConfigurationError, match=r"identity\.party_id 'urn:x:999999999' is not a party of any loaded"):
        agreement_registry(settings, load_agreements([cpa]), ("urn:x:999999999", None))
