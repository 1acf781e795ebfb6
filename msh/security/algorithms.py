"""The algorithms of message security, named by their URIs (XML Signature RFC 3275 and RFC 6931, XML
Encryption 1.0 and 1.1), as a CPP/A 2.0 agreement names them in its NonRepudiation and DigitalEnvelope
elements (CPP/A 2.0 §8.4.40, §8.4.44).

Each enum's values are the URIs themselves, so an agreement's ``SignatureAlgorithm``, ``HashFunction`` or
``EncryptionAlgorithm`` text is looked up as it is (:func:`signature_algorithm`, :func:`digest_algorithm`,
:func:`encryption_algorithm`), and an algorithm the MSH cannot use is refused with a message listing the
ones it can.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Final, TypeVar

from msh.errors import ConfigurationError

__all__ = [
    "EBMS_XPATH",
    "CanonicalizationMethod",
    "DigestAlgorithm",
    "EncryptionAlgorithm",
    "KeyTransport",
    "SignatureAlgorithm",
    "Transform",
    "digest_algorithm",
    "encryption_algorithm",
    "signature_algorithm",
]

_DSIG: Final = "http://www.w3.org/2000/09/xmldsig#"
_DSIG_MORE: Final = "http://www.w3.org/2001/04/xmldsig-more#"
_XMLENC: Final = "http://www.w3.org/2001/04/xmlenc#"
_XMLENC11: Final = "http://www.w3.org/2009/xmlenc11#"


class SignatureAlgorithm(StrEnum):
    """XML-DSig SignatureMethod URIs (CPP/A 2.0 §8.4.40 SignatureAlgorithm)."""

    RSA_SHA1 = f"{_DSIG}rsa-sha1"
    RSA_SHA256 = f"{_DSIG_MORE}rsa-sha256"
    RSA_SHA384 = f"{_DSIG_MORE}rsa-sha384"
    RSA_SHA512 = f"{_DSIG_MORE}rsa-sha512"
    ECDSA_SHA256 = f"{_DSIG_MORE}ecdsa-sha256"
    ECDSA_SHA384 = f"{_DSIG_MORE}ecdsa-sha384"
    ECDSA_SHA512 = f"{_DSIG_MORE}ecdsa-sha512"
    # ebMS2 §4.1.3: the RECOMMENDED SignatureMethod of the spec's time; verified, never chosen by us.
    DSA_SHA1 = f"{_DSIG}dsa-sha1"

    @property
    def key_type(self) -> str:
        """The kind of key that makes this signature: ``RSA``, ``EC`` or ``DSA``."""
        return "EC" if self.name.startswith("ECDSA") else self.name.split("_", 1)[0]


class DigestAlgorithm(StrEnum):
    """XML-DSig DigestMethod URIs (CPP/A 2.0 §8.4.40 HashFunction)."""

    SHA1 = f"{_DSIG}sha1"
    SHA256 = f"{_XMLENC}sha256"
    SHA384 = f"{_DSIG_MORE}sha384"
    SHA512 = f"{_XMLENC}sha512"


class EncryptionAlgorithm(StrEnum):
    """XML Encryption block cipher URIs (CPP/A 2.0 §8.4.44 EncryptionAlgorithm)."""

    AES128_CBC = f"{_XMLENC}aes128-cbc"
    AES192_CBC = f"{_XMLENC}aes192-cbc"
    AES256_CBC = f"{_XMLENC}aes256-cbc"
    TRIPLEDES_CBC = f"{_XMLENC}tripledes-cbc"
    AES128_GCM = f"{_XMLENC11}aes128-gcm"
    AES256_GCM = f"{_XMLENC11}aes256-gcm"

    @property
    def key_bits(self) -> int:
        """The length of the session key."""
        return 192 if self is EncryptionAlgorithm.TRIPLEDES_CBC else int(self.name[3:6])


class KeyTransport(StrEnum):
    """XML Encryption key transport URIs: how the session key travels, encrypted for the recipient's RSA key."""

    RSA_OAEP_MGF1P = f"{_XMLENC}rsa-oaep-mgf1p"
    # XML Encryption 1.0 §5.4.1; read for interoperability (ebms-core and PHIN-MS send it), never written.
    RSA_1_5 = f"{_XMLENC}rsa-1_5"


class CanonicalizationMethod(StrEnum):
    """XML-DSig CanonicalizationMethod URIs, also used as Transforms."""

    C14N = "http://www.w3.org/TR/2001/REC-xml-c14n-20010315"
    C14N_WITH_COMMENTS = "http://www.w3.org/TR/2001/REC-xml-c14n-20010315#WithComments"
    EXCLUSIVE_C14N = "http://www.w3.org/2001/10/xml-exc-c14n#"
    EXCLUSIVE_C14N_WITH_COMMENTS = "http://www.w3.org/2001/10/xml-exc-c14n#WithComments"
    C14N11 = "http://www.w3.org/2006/12/xml-c14n11"
    C14N11_WITH_COMMENTS = "http://www.w3.org/2006/12/xml-c14n11#WithComments"


class Transform(StrEnum):
    """The XML-DSig Transforms of the ebMS 2.0 signature profile other than canonicalisation."""

    ENVELOPED_SIGNATURE = f"{_DSIG}enveloped-signature"
    XPATH = "http://www.w3.org/TR/1999/REC-xpath-19991116"


# ebMS2 §4.1.3: the XPath filter that leaves out the elements targeted at the next MSH or the next SOAP node.
EBMS_XPATH: Final = (
    'not(ancestor-or-self::node()[@SOAP:actor="urn:oasis:names:tc:ebxml-msg:actor:nextMSH"] | '
    'ancestor-or-self::node()[@SOAP:actor="http://schemas.xmlsoap.org/soap/actor/next"])'
)

_E = TypeVar("_E", SignatureAlgorithm, DigestAlgorithm, EncryptionAlgorithm)


def _lookup(kind: type[_E], uri: str | _E, what: str, element: str) -> _E:
    if isinstance(uri, kind):
        return uri
    try:
        return kind(str(uri).strip())
    except ValueError:
        known = ", ".join(a.value for a in kind)
        raise ConfigurationError(
            f"{element} {str(uri)!r} is not a {what} the MSH implements; use one of: {known}"
        ) from None


def signature_algorithm(uri: str | SignatureAlgorithm) -> SignatureAlgorithm:
    """The :class:`SignatureAlgorithm` of ``uri``; :class:`ConfigurationError` naming the ones known."""
    return _lookup(SignatureAlgorithm, uri, "signature algorithm", "SignatureAlgorithm")


def digest_algorithm(uri: str | DigestAlgorithm) -> DigestAlgorithm:
    """The :class:`DigestAlgorithm` of ``uri``; :class:`ConfigurationError` naming the ones known."""
    return _lookup(DigestAlgorithm, uri, "digest algorithm", "HashFunction")


def encryption_algorithm(uri: str | EncryptionAlgorithm) -> EncryptionAlgorithm:
    """The :class:`EncryptionAlgorithm` of ``uri``; :class:`ConfigurationError` naming the ones known."""
    return _lookup(EncryptionAlgorithm, uri, "encryption algorithm", "EncryptionAlgorithm")
