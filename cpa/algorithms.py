"""The signing, digest and encryption algorithms an agreement may name (CPP/A 2.0 §8.4.40, §8.4.44), and
what each is for (:data:`KNOWN_ALGORITHMS`); the loader refuses an agreement naming another."""

from __future__ import annotations

from collections.abc import Mapping
from enum import StrEnum
from types import MappingProxyType
from typing import Final

from lxml import etree

from cpa.document import ProblemSink, local_name, text_of, tp_attr

__all__ = ["KNOWN_ALGORITHMS", "AlgorithmUse", "known_algorithm"]

_DSIG: Final = "http://www.w3.org/2000/09/xmldsig#"
_DSIG_MORE: Final = "http://www.w3.org/2001/04/xmldsig-more#"
_XMLENC: Final = "http://www.w3.org/2001/04/xmlenc#"
_XMLENC11: Final = "http://www.w3.org/2009/xmlenc11#"


class AlgorithmUse(StrEnum):
    """What an algorithm URI of :data:`KNOWN_ALGORITHMS` is for."""

    SIGNATURE = "signature"  # NonRepudiation/SignatureAlgorithm
    DIGEST = "digest"  # NonRepudiation/HashFunction
    ENCRYPTION = "encryption"  # DigitalEnvelope/EncryptionAlgorithm


# CPP/A 2.0 §8.4.40/§8.4.44: SignatureAlgorithm, HashFunction and EncryptionAlgorithm name XML Signature
# (RFC 3275, RFC 6931) and XML Encryption (1.0 and 1.1) algorithm URIs; these are the ones accepted.
KNOWN_ALGORITHMS: Final[Mapping[str, AlgorithmUse]] = MappingProxyType(
    {
        f"{_DSIG}rsa-sha1": AlgorithmUse.SIGNATURE,
        f"{_DSIG_MORE}rsa-sha256": AlgorithmUse.SIGNATURE,
        f"{_DSIG_MORE}rsa-sha384": AlgorithmUse.SIGNATURE,
        f"{_DSIG_MORE}rsa-sha512": AlgorithmUse.SIGNATURE,
        f"{_DSIG_MORE}ecdsa-sha256": AlgorithmUse.SIGNATURE,
        f"{_DSIG_MORE}ecdsa-sha384": AlgorithmUse.SIGNATURE,
        f"{_DSIG_MORE}ecdsa-sha512": AlgorithmUse.SIGNATURE,
        f"{_DSIG}sha1": AlgorithmUse.DIGEST,
        f"{_XMLENC}sha256": AlgorithmUse.DIGEST,
        f"{_DSIG_MORE}sha384": AlgorithmUse.DIGEST,
        f"{_XMLENC}sha512": AlgorithmUse.DIGEST,
        f"{_XMLENC}aes128-cbc": AlgorithmUse.ENCRYPTION,
        f"{_XMLENC}aes192-cbc": AlgorithmUse.ENCRYPTION,
        f"{_XMLENC}aes256-cbc": AlgorithmUse.ENCRYPTION,
        f"{_XMLENC}tripledes-cbc": AlgorithmUse.ENCRYPTION,
        f"{_XMLENC11}aes128-gcm": AlgorithmUse.ENCRYPTION,
        f"{_XMLENC11}aes256-gcm": AlgorithmUse.ENCRYPTION,
    }
)


def known_algorithm(element: etree._Element, use: AlgorithmUse, problem: ProblemSink) -> str | None:
    """The algorithm URI of ``element`` (its text, else its ``w3c`` attribute) if it is known for ``use``;
    else None, with the problem recorded in ``problem``."""
    text, w3c = text_of(element), tp_attr(element, "w3c")
    for candidate in (text, w3c):
        if candidate is not None and KNOWN_ALGORITHMS.get(candidate) is use:
            return candidate
    label = local_name(element)
    other = KNOWN_ALGORITHMS.get(text) or (KNOWN_ALGORITHMS.get(w3c) if w3c else None)
    known = ", ".join(uri for uri, kind in KNOWN_ALGORITHMS.items() if kind is use)
    if other is not None:
        message = f"{label} '{text}' is a {other} algorithm, not a {use} algorithm; use one of: {known}"
    else:
        message = f"{label} '{text}' is not a known {use} algorithm URI; use one of: {known}"
    problem(element, message)
    return None
