"""The DSA key classes, named without cryptography's deprecation warning.

cryptography deprecates DSA (its recent releases warn at every use of ``dsa.DSAPrivateKey``), but ebMS 2.0
§4.1.3 makes dsa-sha1 its RECOMMENDED signature method, which "SHALL be supported by all compliant ebXML
Message Service software": the MSH keeps verifying and making such signatures. The warning would otherwise
be printed on every ``msh`` command, before its own output: it is silenced here, for these two names only,
and every module takes them from here.
"""

from __future__ import annotations

import warnings

from cryptography.utils import CryptographyDeprecationWarning

with warnings.catch_warnings():
    warnings.simplefilter("ignore", CryptographyDeprecationWarning)
    from cryptography.hazmat.primitives.asymmetric.dsa import DSAPrivateKey, DSAPublicKey

__all__ = ["DSAPrivateKey", "DSAPublicKey"]
