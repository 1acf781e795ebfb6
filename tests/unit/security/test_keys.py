"""Keys: trial key pairs, encrypted PEM with the passphrase from an environment variable, the agreement's
Certificate element."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest
from lxml import etree

from cpa.certificates import x509_der
from msh.errors import ConfigurationError
from msh.security import certificate_element, generate_key_pair, load_certificates, load_private_key, write_key_pair
from msh.security.keys import CPPA


@pytest.fixture(scope="module")
def pair():  # type: ignore[no-untyped-def]
    return generate_key_pair("urn:duns:123456789", days=10)


def test_a_generated_pair_is_written_and_read_back(pair, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    key_path, cert_path = write_key_pair(pair, tmp_path / "keys", "urn:duns:123456789")
    assert key_path.name == "urn_duns_123456789.key.pem" and cert_path.name == "urn_duns_123456789.cert.pem"
    assert stat.S_IMODE(key_path.stat().st_mode) == 0o600
    assert load_certificates(cert_path) == (pair.certificate,)
    loaded = load_private_key(key_path)
    assert loaded.public_key().public_numbers() == pair.key.public_key().public_numbers()
    with pytest.raises(ConfigurationError, match="exists; move it away"):
        write_key_pair(pair, tmp_path / "keys", "urn:duns:123456789")


def test_an_encrypted_key_opens_with_the_passphrase_from_the_environment(
    pair,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,  # type: ignore[no-untyped-def]
) -> None:
    key_path, _ = write_key_pair(pair, tmp_path, "a", passphrase=b"s3cret")
    assert b"ENCRYPTED" in key_path.read_bytes()
    monkeypatch.setenv("MSH_TEST_PASSPHRASE", "s3cret")
    loaded = load_private_key(key_path, passphrase_env="MSH_TEST_PASSPHRASE")
    assert loaded.public_key().public_numbers() == pair.key.public_key().public_numbers()
    with pytest.raises(ConfigurationError, match="is encrypted; give its passphrase"):
        load_private_key(key_path)
    monkeypatch.setenv("MSH_TEST_PASSPHRASE", "wrong")
    with pytest.raises(ConfigurationError, match="the passphrase is wrong"):
        load_private_key(key_path, passphrase_env="MSH_TEST_PASSPHRASE")
    monkeypatch.delenv("MSH_TEST_PASSPHRASE")
    with pytest.raises(ConfigurationError, match="environment variable MSH_TEST_PASSPHRASE holds no passphrase"):
        load_private_key(key_path, passphrase_env="MSH_TEST_PASSPHRASE")


def test_unreadable_key_and_certificate_files_are_explained(tmp_path: Path) -> None:
    (tmp_path / "junk.pem").write_bytes(b"-----BEGIN PRIVATE KEY-----\nnope\n-----END PRIVATE KEY-----\n")
    with pytest.raises(ConfigurationError, match="cannot be read"):
        load_private_key(tmp_path / "junk.pem")
    with pytest.raises(ConfigurationError, match="check the path"):
        load_private_key(tmp_path / "missing.pem")
    with pytest.raises(ConfigurationError, match=r"holds no readable X\.509 certificate"):
        load_certificates(tmp_path / "junk.pem")


def test_the_certificate_element_is_what_an_agreement_holds(pair) -> None:  # type: ignore[no-untyped-def]
    text = certificate_element(pair.certificate, "A_Cert")
    element = etree.fromstring(text)
    assert element.tag == f"{{{CPPA}}}Certificate" and element.get(f"{{{CPPA}}}certId") == "A_Cert"
    node = element.find(".//{http://www.w3.org/2000/09/xmldsig#}X509Certificate")
    from cryptography.hazmat.primitives.serialization import Encoding

    assert x509_der(node) == pair.certificate.public_bytes(Encoding.DER)


def test_a_certificate_must_be_valid_a_day_at_least() -> None:
    with pytest.raises(ConfigurationError, match="at least one day"):
        generate_key_pair("x", days=0)
