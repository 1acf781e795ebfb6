"""Who is asking: bearer tokens read from the environment or files, client certificates by subject CN."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from msh.api.auth import Applications, load_applications
from msh.api.problems import Problem
from msh.errors import ConfigurationError
from msh.runtime.config.api import credentials, priorities, webhooks

GOOD = "a-long-enough-token-0123456789"


def _certificate(cn: str) -> bytes:
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, cn)])
    now = datetime.now(UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(1)
        .not_valid_before(now - timedelta(days=1))
        .not_valid_after(now + timedelta(days=1))
        .sign(key, hashes.SHA256())
    )
    return cert.public_bytes(serialization.Encoding.DER)


def test_tokens_from_the_environment_and_files(tmp_path: Path) -> None:
    (tmp_path / "crm.token").write_text(GOOD + "-crm\n")
    apps = load_applications(
        credentials(("erp=env:ERP_TOKEN", "crm=file:crm.token")), env={"ERP_TOKEN": GOOD}, base_dir=tmp_path
    )
    assert apps.names == {"erp", "crm"}
    assert apps.authenticate(f"Bearer {GOOD}") == "erp"
    assert apps.authenticate(f"bearer {GOOD}-crm") == "crm"
    for bad in (None, "", "Bearer", f"Basic {GOOD}", "Bearer wrong"):
        with pytest.raises(Problem) as refused:
            apps.authenticate(bad)
        assert refused.value.status == 401 and refused.value.headers["WWW-Authenticate"].startswith("Bearer")


@pytest.mark.parametrize(
    ("items", "env", "says"),
    [
        (("erp=env:NOPE",), {}, "NOPE, which is not set"),
        (("erp=env:T",), {"T": "short"}, "shorter than 16"),
        (("erp=env:T", "crm=env:T"), {"T": GOOD}, "have the same token"),
        (("erp=env:T", "erp=env:U"), {"T": GOOD, "U": GOOD + "x"}, "named twice"),
        (("erp=file:missing.token",), {}, "cannot be read"),
    ],
)
def test_token_problems_say_which_application_and_never_the_token(
    items: tuple[str, ...], env: dict[str, str], says: str, tmp_path: Path
) -> None:
    with pytest.raises(ConfigurationError, match=says) as refused:
        load_applications(credentials(items), env=env, base_dir=tmp_path)
    assert GOOD not in str(refused.value)


def test_a_client_certificate_names_its_application() -> None:
    apps = Applications({"erp": GOOD.encode()}, certificates=True)
    assert apps.authenticate(None, _certificate("erp")) == "erp"
    with pytest.raises(Problem, match="names no application"):
        apps.authenticate(None, _certificate("intruder"))
    without = Applications({"erp": GOOD.encode()}, certificates=False)
    with pytest.raises(Problem):
        without.authenticate(None, _certificate("erp"))  # certificates count only with api.client_ca


@pytest.mark.parametrize(
    ("reader", "value"),
    [
        (credentials, "erp"),
        (credentials, "erp=vault:x"),
        (credentials, "bad name=env:X"),
        (priorities, "a;b=1"),
        (priorities, "a;b;c=high"),
        (webhooks, "erp=ftp://x"),
    ],
)
def test_unreadable_list_items_are_refused(reader: object, value: str) -> None:
    with pytest.raises(ValueError, match=r"write e\.g\."):
        reader((value,))  # type: ignore[operator]


def test_priority_rules_read_stars_as_any() -> None:
    (rule,) = priorities(("*;urn:s;Act=-3",))
    assert (rule.cpaid, rule.service, rule.action, rule.priority) == (None, "urn:s", "Act", -3)


def test_settings_refuse_interfaces_nobody_can_use() -> None:
    import tomllib

    from msh.runtime.config import SettingsError, settings_from_mapping
    from tests.unit.api.conftest import CONFIG

    data = tomllib.loads((CONFIG / "party-a.toml").read_text(encoding="utf-8"))
    data["store"] = {"url": "memory:"}
    data["api"] = {"enabled": True, "applications": []}
    with pytest.raises(SettingsError, match="names no application"):
        settings_from_mapping(data, base_dir=CONFIG, source="t.toml", env={})
    data["api"] = {"client_ca": [str(CONFIG.parent / "keys" / "party-a.cert.pem")]}
    with pytest.raises(SettingsError, match="needs HTTPS"):
        settings_from_mapping(data, base_dir=CONFIG, source="t.toml", env={})
    data["api"] = {"applications": ["erp=nowhere"]}
    with pytest.raises(SettingsError, match="NAME=env:VARIABLE"):
        settings_from_mapping(data, base_dir=CONFIG, source="t.toml", env={})
    env = {"MSH_API_APPLICATIONS": "erp=env:A, crm=env:B"}
    loaded = settings_from_mapping({**data, "api": {}}, base_dir=CONFIG, source="t.toml", env=env)
    assert loaded.api.applications == ("erp=env:A", "crm=env:B")
