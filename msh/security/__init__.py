"""Message security in the ebMS 2.0 profile (ebMS2 §4.1), run by python-xmlsec (libxmlsec1).

Signing and verifying (ebMS2 §4.1.3)::

    signed = sign(soap, {"cid-1@example": payload}, key, certificate, SignatureAlgorithm.RSA_SHA256,
                  DigestAlgorithm.SHA256)
    verification = verify(signed, {"cid-1@example": payload}, partner_certificate, anchors=..., at=now)

* :func:`sign` adds the ``ds:Signature`` to the SOAP Header: one Reference over the envelope (enveloped
  signature, the XPath filter leaving out the nextMSH/next elements, C14N), one ``cid:`` Reference per
  payload part.
* :func:`verify` checks it with a certificate the caller trusts, its validity and chain to the trust
  anchors; a failure is a :class:`~msh.errors.SecurityError` (SecurityFailure) naming the Reference that
  failed. It accepts every form the profile allows (References in any order, payloads named by ``cid:`` or
  by Content-Location, :func:`content_locations`), and says which payload parts the signature covers.
  :func:`verification_policy` and :func:`verify_message` take certificates, anchors and algorithms from
  the agreement.
* Receipts (ebMS2 §6.3.2.5): :func:`receipt_references` gives the ``ds:Reference`` list of an
  Acknowledgment, :func:`check_receipt` checks a received one against the message sent.
* Encryption (ebMS2 §4.1.4.5, DigitalEnvelope XMLENC): :func:`encrypt_payload`, :func:`decrypt_payload`.
* Keys: :func:`generate_key_pair`, :func:`load_private_key` (encrypted PEM, passphrase from an
  environment variable), :func:`load_certificates`, :func:`certificate_element`.
* :func:`check_agreement_security` refuses an agreement asking for what the MSH does not implement.

Importing this package loads xmlsec and checks that it runs on lxml's libxml2 (:mod:`.library`); the
modules :mod:`.algorithms` and :mod:`.keys` do not need xmlsec.
"""

from __future__ import annotations

from msh.security.agreement import (
    EncryptionPolicy,
    SigningPolicy,
    VerificationPolicy,
    agreement_security_problems,
    check_agreement_security,
    encryption_policy,
    signing_policy,
    verification_policy,
    verify_message,
)
from msh.security.algorithms import (
    DigestAlgorithm,
    EncryptionAlgorithm,
    KeyTransport,
    SignatureAlgorithm,
    digest_algorithm,
    encryption_algorithm,
    signature_algorithm,
)
from msh.security.digests import ReferenceDigest
from msh.security.encryption import ENCRYPTED_CONTENT_TYPE, DecryptedPayload, decrypt_payload, encrypt_payload
from msh.security.keys import (
    KeyPair,
    PrivateKey,
    certificate_element,
    generate_key_pair,
    load_certificates,
    load_private_key,
    write_key_pair,
)
from msh.security.library import LibraryVersions, Openable, Payload, library_versions
from msh.security.receipts import check_receipt, receipt_references
from msh.security.references import content_locations
from msh.security.signing import sign
from msh.security.verifying import Verification, keyinfo_certificates, verify

__all__ = [
    "ENCRYPTED_CONTENT_TYPE",
    "DecryptedPayload",
    "DigestAlgorithm",
    "EncryptionAlgorithm",
    "EncryptionPolicy",
    "KeyPair",
    "KeyTransport",
    "LibraryVersions",
    "Openable",
    "Payload",
    "PrivateKey",
    "ReferenceDigest",
    "SignatureAlgorithm",
    "SigningPolicy",
    "Verification",
    "VerificationPolicy",
    "agreement_security_problems",
    "certificate_element",
    "check_agreement_security",
    "check_receipt",
    "content_locations",
    "decrypt_payload",
    "digest_algorithm",
    "encrypt_payload",
    "encryption_algorithm",
    "encryption_policy",
    "generate_key_pair",
    "keyinfo_certificates",
    "library_versions",
    "load_certificates",
    "load_private_key",
    "receipt_references",
    "sign",
    "signature_algorithm",
    "signing_policy",
    "verification_policy",
    "verify",
    "verify_message",
    "write_key_pair",
]
