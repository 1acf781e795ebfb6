"""Certificate chains of any length to an agreement's certificates, and the party binding (cpa.trust),
shared by the TLS client check and the signature check."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import replace
from datetime import timedelta

import pytest
from cryptography import x509
from cryptography.hazmat.primitives.serialization import Encoding

from cpa import trust
from cpa.model import Certificate
from cpa.trust import (
    UntrustedCertificate,
    agreement_certificates,
    certificate_path,
    party_certificate_problem,
    party_certificates,
)
from msh.ebms import model as m
from msh.errors import ErrorCode
from msh.transport.tls import FROM_PARTY_ID, client_certificate_issue
from tests.support.cpa_factory import A_ID, make_cpa
from tests.support.security import NOW, certificate, rsa_key

A = ((A_ID.value, A_ID.type),)
FROM_A = m.Party((m.PartyId(A_ID.value, A_ID.type),))


def chain(length: int) -> list:
    """[leaf, ..., root] of ``length`` certificates, the root a self-signed CA."""
    names = [f"level {i}" for i in range(length)]
    certs = [certificate(names[-1], ca=True)]
    for i in range(length - 2, -1, -1):
        certs.insert(0, certificate(names[i], issuer=(certs[0], rsa_key(names[i + 1])), ca=i > 0))
    return certs


def with_a_certificates(*certs: object):  # type: ignore[no-untyped-def]
    cpa = make_cpa()
    ders = tuple(Certificate(f"a{i}", (c.public_bytes(Encoding.DER),)) for i, c in enumerate(certs))  # type: ignore[attr-defined]
    a, b = cpa.party_infos
    return replace(cpa, party_infos=(replace(a, certificates=ders), b))


@pytest.mark.parametrize("length", [1, 2, 3, 4])
def test_chains_of_any_length_reach_the_anchor(length: int) -> None:
    certs = chain(length)
    path = certificate_path(certs[0], [certs[-1]], certs[1:-1], at=NOW)
    assert list(path) == certs


def test_intermediates_in_any_order_and_extra_ones_do_not_matter() -> None:
    certs = chain(4)
    noise = [certificate("unrelated CA", ca=True)]
    path = certificate_path(certs[0], [certs[-1]], [*noise, certs[2], certs[1]], at=NOW)
    assert list(path) == certs


def test_an_intermediate_that_is_not_a_ca_cannot_issue() -> None:
    root = certificate("root", ca=True)
    not_ca = certificate("not a CA", issuer=(root, rsa_key("root")), ca=False)
    leaf = certificate("leaf", issuer=(not_ca, rsa_key("not a CA")))
    with pytest.raises(UntrustedCertificate, match="is not one of the trusted certificates"):
        certificate_path(leaf, [root], [not_ca], at=NOW)


def test_a_forged_issuer_with_the_same_name_is_refused() -> None:
    real = certificate("A's CA", ca=True)
    impostor = certificate("A's CA", ca=True, key_name="impostor")
    forged = certificate("A's MSH", issuer=(impostor, rsa_key("impostor")))
    with pytest.raises(UntrustedCertificate):
        certificate_path(forged, [real], at=NOW)


@pytest.mark.parametrize("which", [0, 1, 2])
def test_an_expired_certificate_anywhere_in_the_chain_is_refused(which: int) -> None:
    past = {"not_before": NOW - timedelta(days=10), "not_after": NOW - timedelta(days=1)}
    root = certificate("root", ca=True, **(past if which == 2 else {}))  # type: ignore[arg-type]
    middle = certificate("middle", issuer=(root, rsa_key("root")), ca=True, **(past if which == 1 else {}))  # type: ignore[arg-type]
    leaf = certificate("leaf", issuer=(middle, rsa_key("middle")), **(past if which == 0 else {}))  # type: ignore[arg-type]
    with pytest.raises(UntrustedCertificate, match="expired on") as caught:
        certificate_path(leaf, [root], [middle], at=NOW)
    assert f"certificate CN={('leaf', 'middle', 'root')[which]} expired" in str(caught.value)


def test_a_not_yet_valid_certificate_is_refused() -> None:
    young = certificate("young", not_before=NOW + timedelta(days=1))
    with pytest.raises(UntrustedCertificate, match="is not valid before"):
        certificate_path(young, [young], at=NOW)


@pytest.mark.parametrize("length", [1, 2, 3])
def test_a_tls_certificate_chaining_to_the_partys_certificate_belongs_to_it(length: int) -> None:
    certs = chain(length)
    cpa = with_a_certificates(certs[-1])
    presented = certs[0].public_bytes(Encoding.DER)
    intermediates = [c.public_bytes(Encoding.DER) for c in certs[1:-1]]
    assert client_certificate_issue(cpa, FROM_A, presented, now=NOW, chain=intermediates) is None
    if length == 3:
        # Without the intermediate the chain cannot be built: refused.
        issue = client_certificate_issue(cpa, FROM_A, presented, now=NOW)
        assert issue is not None and issue.location == FROM_PARTY_ID


def test_an_expired_tls_certificate_is_refused_with_a_clear_reason() -> None:
    old = certificate("party A old", not_after=NOW - timedelta(days=1), not_before=NOW - timedelta(days=10))
    cpa = with_a_certificates(old)
    issue = client_certificate_issue(cpa, FROM_A, old.public_bytes(Encoding.DER), now=NOW)
    assert issue is not None and issue.error_code is ErrorCode.SECURITY_FAILURE
    assert "expired on" in issue.description and "party A old" in issue.description


def test_the_party_binding_tells_why_a_certificate_is_someone_elses() -> None:
    a, b = certificate("party A"), certificate("party B")
    cpa = with_a_certificates(a)
    assert party_certificate_problem(cpa, A, a, at=NOW) is None
    problem = party_certificate_problem(cpa, A, b, at=NOW)
    assert problem is not None and "CN=party B" in problem and "trusted: CN=party A" in problem


def test_a_chain_accepted_once_is_still_checked_against_each_instant() -> None:
    # Issuer signatures are remembered between calls; validity periods never are (RFC 5280 §4.1.2.5).
    root = certificate("root", ca=True)
    leaf = certificate("leaf", issuer=(root, rsa_key("root")))
    assert certificate_path(leaf, [root], at=NOW) == (leaf, root)
    with pytest.raises(UntrustedCertificate, match="certificate CN=leaf expired on"):
        certificate_path(leaf, [root], at=NOW + timedelta(days=31))
    with pytest.raises(UntrustedCertificate, match="certificate CN=leaf is not valid before"):
        certificate_path(leaf, [root], at=NOW - timedelta(days=2))
    assert certificate_path(leaf, [root], at=NOW) == (leaf, root)


def test_a_remembered_verdict_belongs_to_its_pair_of_certificates() -> None:
    real = certificate("A's CA", ca=True)
    impostor = certificate("A's CA", ca=True, key_name="impostor")
    forged = certificate("A's MSH", issuer=(impostor, rsa_key("impostor")))
    genuine = certificate("A's MSH", issuer=(real, rsa_key("A's CA")))
    for _ in range(2):
        with pytest.raises(UntrustedCertificate):
            certificate_path(forged, [real], at=NOW)
        assert certificate_path(genuine, [real], at=NOW) == (genuine, real)
        assert certificate_path(forged, [impostor], at=NOW) == (forged, impostor)
    # The same certificates as other objects (read again from their bytes) get the same answers.
    again = [x509.load_der_x509_certificate(c.public_bytes(Encoding.DER)) for c in (forged, real, genuine)]
    with pytest.raises(UntrustedCertificate):
        certificate_path(again[0], [again[1]], at=NOW)
    assert certificate_path(again[2], [again[1]], at=NOW) == (again[2], again[1])


def test_the_remembered_encodings_and_verdicts_stay_within_their_bound(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(trust, "CACHE_LIMIT", 2)
    certs = chain(4)
    for _ in range(2):
        assert certificate_path(certs[0], [certs[-1]], certs[1:-1], at=NOW) == tuple(certs)
        assert max(len(trust._ders), len(trust._issuer_verdicts), len(trust._ca_verdicts)) <= 2


def test_a_full_cache_forgets_the_entry_used_least_recently(monkeypatch: pytest.MonkeyPatch) -> None:
    # A flood of new keys (a sender claiming ever new PartyIds) does not push out an entry still in use.
    monkeypatch.setattr(trust, "CACHE_LIMIT", 3)
    cache: trust._Remembered[str, int] = trust._Remembered()
    for n, key in enumerate(("in use", "old 1", "old 2")):
        cache.remember(key, n)
    for flood in range(10):
        assert cache.get("in use") == 0  # used between each new entry
        cache.remember(f"new {flood}", flood)
        assert len(cache) == 3
    assert "in use" in cache and "old 1" not in cache and "old 2" not in cache
    assert cache.get("new 9") == 9 and cache.get("new 0") is None


def test_the_party_certificates_in_use_survive_a_flood_of_claimed_party_ids(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(trust, "CACHE_LIMIT", 4)
    monkeypatch.setattr(trust, "_party_certificates", trust._Remembered())
    cert = certificate("party A")
    cpa = with_a_certificates(cert)
    read: list[tuple[bytes, ...]] = []
    real = trust._readable

    def reading(ders: Iterable[bytes]) -> tuple[x509.Certificate, ...]:
        found = real(ders)
        read.append(tuple(c.public_bytes(Encoding.DER) for c in found))
        return found

    monkeypatch.setattr(trust, "_readable", reading)
    assert party_certificates(cpa, A) == (cert,)
    for n in range(20):
        assert party_certificates(cpa, [(f"claimed-{n}", None)]) == ()
        assert party_certificates(cpa, A) == (cert,)
    # Party A's certificates were read from the agreement once; each claimed PartyId's once.
    assert read.count((cert.public_bytes(Encoding.DER),)) == 1 and read.count(()) == 20
    assert len(trust._party_certificates) == 4


def test_an_agreement_reloaded_under_the_same_cpaid_is_read_anew() -> None:
    # An agreement's certificates are remembered with the agreement: the reloaded one's are its own.
    old, new = certificate("party A old key"), certificate("party A new key")
    before, after = with_a_certificates(old), with_a_certificates(new)
    assert before.cpaid == after.cpaid
    for _ in range(2):
        assert party_certificates(before, A) == (old,) and party_certificates(after, A) == (new,)
        assert old in agreement_certificates(before) and old not in agreement_certificates(after)
        assert client_certificate_issue(before, FROM_A, old.public_bytes(Encoding.DER), now=NOW) is None
        assert client_certificate_issue(after, FROM_A, old.public_bytes(Encoding.DER), now=NOW) is not None
        assert client_certificate_issue(after, FROM_A, new.public_bytes(Encoding.DER), now=NOW) is None
